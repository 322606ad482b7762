// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// How the tests install the chart (framework.ChartPath, as release
// framework.HelmRelease).
const (
	instanceKey = "app.kubernetes.io/instance"
	// existingSecretName is the Secret ci/tls-existing-secret-values.yaml names.
	existingSecretName = "inference-metrics-adapter-serving"
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// helmEnv is a control plane of the chart tests' own: the chart's
// APIServices (v1beta1 and v1beta2.custom.metrics.k8s.io) are cluster-wide,
// and the shared environment's adapter already owns them.
type helmEnv struct {
	cp         *framework.ControlPlane
	helm       string
	chart      string
	adapterBin string
	dir        string
}

func startHelmEnv(t *testing.T) *helmEnv {
	t.Helper()
	requireEnv(t, framework.ComponentAdapter)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A binary of the tests' own: the shared environment's may be removed
	// by the time a test runs.
	adapterBin, err := framework.BuildCommand(ctx, root, dir, framework.ComponentAdapter)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := framework.StartControlPlane(ctx, os.Getenv(binEnv), dir)
	if err != nil {
		t.Fatalf("start a control plane for the chart: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b bytes.Buffer
			framework.DumpLogs(&b, cp.LogDir, 30)
			t.Log(b.String())
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	helm, err := framework.HelmBinary(os.Getenv(binEnv))
	if err != nil {
		t.Fatal(err)
	}
	h := &helmEnv{
		cp:         cp,
		helm:       helm,
		chart:      filepath.Join(root, framework.ChartPath),
		adapterBin: adapterBin,
		dir:        dir,
	}
	h.createStubCRDs(t)
	return h
}

// createStubCRDs registers cert-manager's Certificate and Issuer and
// prometheus-operator's ServiceMonitor and PrometheusRule with open schemas, so that the API
// server accepts the chart's objects of those kinds. The controllers
// themselves are not run: the test plays cert-manager where needed.
func (h *helmEnv) createStubCRDs(t *testing.T) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crds := []struct{ group, kind, plural string }{
		{"cert-manager.io", "Certificate", "certificates"},
		{"cert-manager.io", "Issuer", "issuers"},
		{"monitoring.coreos.com", "ServiceMonitor", "servicemonitors"},
		{"monitoring.coreos.com", "PrometheusRule", "prometheusrules"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range crds {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": c.plural + "." + c.group},
			"spec": map[string]any{
				"group": c.group,
				"scope": "Namespaced",
				"names": map[string]any{"kind": c.kind, "plural": c.plural, "singular": strings.ToLower(c.kind), "listKind": c.kind + "List"},
				"versions": []any{map[string]any{
					"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				}},
			},
		}}
		if _, err := h.cp.Dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", obj.GetName(), err)
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := h.cp.Dynamic.Resource(schema.GroupVersionResource{Group: c.group, Version: "v1", Resource: c.plural}).Namespace("default").List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("CRD %s never served: %v", obj.GetName(), err)
		}
	}
}

func (h *helmEnv) runHelm(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := framework.RunHelm(ctx, h.helm, []string{"HELM_CACHE_HOME=" + filepath.Join(h.dir, "helm-cache"), "HELM_CONFIG_HOME=" + filepath.Join(h.dir, "helm-config"), "HELM_DATA_HOME=" + filepath.Join(h.dir, "helm-data")},
		append(args, "--kubeconfig", h.cp.AdminKubeconfig)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// install is one chart release on loopback: the chart installed as the
// user would, its Service turned into an ExternalName of 127.0.0.1, and the
// adapter run on this machine with the chart's arguments, certificate and
// ServiceAccount.
type install struct {
	h         *helmEnv
	ci        string
	ns        string
	port      int
	certFile  string
	keyFile   string
	caPEM     []byte
	adapter   *framework.Process
	uninstall bool
}

func (h *helmEnv) install(t *testing.T, ci string) *install {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := &install{h: h, ci: ci, ns: "ima-" + ci}
	var err error
	if in.port, err = framework.FreePort(); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", framework.HelmRelease, h.chart, "--namespace", in.ns, "--create-namespace",
		"-f", filepath.Join(h.chart, "ci", ci+"-values.yaml"), "--set", "service.port=" + strconv.Itoa(in.port)}
	var ca *framework.CA
	if ci == "tls-existing-secret" || ci == "tls-cert-manager" {
		if ca, err = framework.NewCA("e2e-chart-ca-" + ci); err != nil {
			t.Fatal(err)
		}
	}
	if ci == "tls-existing-secret" {
		// The user's part: the namespace, the Secret, and the CA as a value.
		if _, err := h.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.createServingSecret(t, ca, in.ns, existingSecretName, []string{framework.HelmRelease + "." + in.ns + ".svc"})
		caFile := filepath.Join(h.dir, ci+"-ca.crt")
		if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--set-file", "apiService.caBundle="+caFile)
	}
	out := h.runHelm(t, args...)
	in.uninstall = true
	t.Cleanup(func() { in.cleanup(t) })
	if !strings.Contains(out, "kubectl get --raw /apis/custom.metrics.k8s.io/v1beta2") {
		t.Errorf("helm install output lacks the NOTES check command:\n%s", out)
	}
	if ci == "tls-cert-manager" {
		h.playCertManager(t, ca, in.ns)
	}
	in.loadServingCert(t)
	in.serviceToLoopback(t)
	return in
}

// createServingSecret issues a serving certificate for dnsNames and stores
// it as a kubernetes.io/tls Secret with ca.crt.
func (h *helmEnv) createServingSecret(t *testing.T, ca *framework.CA, ns, name string, dnsNames []string) {
	t.Helper()
	kp, err := ca.Issue(framework.CertSpec{CommonName: dnsNames[0], DNSNames: dnsNames, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM, "ca.crt": ca.CertPEM},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.cp.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret %s/%s: %v", ns, name, err)
	}
}

// playCertManager does what cert-manager and its cainjector would: issue
// the chart's Certificate into its secretName, and copy the CA into the
// caBundle of each APIService annotated cert-manager.io/inject-ca-from.
func (h *helmEnv) playCertManager(t *testing.T, ca *framework.CA, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	cert, err := h.cp.Dynamic.Resource(certGVR).Namespace(ns).Get(ctx, framework.HelmRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's Certificate: %v", err)
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if secretName == "" || len(dnsNames) == 0 {
		t.Fatalf("Certificate %s/%s lacks secretName or dnsNames: %v", ns, framework.HelmRelease, cert.Object["spec"])
	}
	h.createServingSecret(t, ca, ns, secretName, dnsNames)
	list, err := h.cp.Dynamic.Resource(apiServicesGVR).List(ctx, metav1.ListOptions{LabelSelector: instanceKey + "=" + framework.HelmRelease})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Items {
		if got, want := a.GetAnnotations()["cert-manager.io/inject-ca-from"], ns+"/"+framework.HelmRelease; got != want {
			t.Fatalf("APIService %s: inject-ca-from %q, want %q", a.GetName(), got, want)
		}
		patch := fmt.Sprintf(`{"spec":{"caBundle":%q}}`, base64.StdEncoding.EncodeToString(ca.CertPEM))
		if _, err := h.cp.Dynamic.Resource(apiServicesGVR).Patch(ctx, a.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("inject caBundle into %s: %v", a.GetName(), err)
		}
	}
}

// loadServingCert writes the certificate the Deployment mounts to files.
func (in *install) loadServingCert(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := in.deployment(t)
	var secretName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			secretName = v.Secret.SecretName
		}
	}
	s, err := in.h.cp.Client.CoreV1().Secrets(in.ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment's TLS Secret %q: %v", secretName, err)
	}
	in.caPEM = s.Data["ca.crt"]
	in.certFile = filepath.Join(in.h.dir, in.ci+"-tls.crt")
	in.keyFile = filepath.Join(in.h.dir, in.ci+"-tls.key")
	if err := os.WriteFile(in.certFile, s.Data["tls.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.keyFile, s.Data["tls.key"], 0o600); err != nil {
		t.Fatal(err)
	}
}

// serviceToLoopback turns the chart's Service into an ExternalName of
// 127.0.0.1: kube-apiserver then reaches the adapter on this machine at the
// APIServices' port, as it would reach the pods behind the Service.
func (in *install) serviceToLoopback(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	patch := `{"spec":{"type":"ExternalName","externalName":"127.0.0.1","selector":null,"clusterIP":null,"clusterIPs":null,"ipFamilies":null,"ipFamilyPolicy":null,"internalTrafficPolicy":null,"sessionAffinity":null}}`
	if _, err := in.h.cp.Client.CoreV1().Services(in.ns).Patch(ctx, framework.HelmRelease, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("make Service %s/%s an ExternalName of 127.0.0.1: %v", in.ns, framework.HelmRelease, err)
	}
}

func (in *install) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := in.h.cp.Client.AppsV1().Deployments(in.ns).Get(ctx, framework.HelmRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}
	return d
}

// startAdapter runs the adapter with the Deployment's arguments, as the
// chart's ServiceAccount (a TokenRequest token), on 127.0.0.1:port.
func (in *install) startAdapter(t *testing.T, name string) {
	t.Helper()
	p, err := framework.StartProcess(name, in.h.cp.LogDir, in.h.adapterBin, in.adapterArgs(t, name, in.port), nil)
	if err != nil {
		t.Fatal(err)
	}
	in.adapter = p
}

// adapterArgs are the Deployment's current arguments for one adapter
// process on 127.0.0.1:port, with a kubeconfig of the chart's
// ServiceAccount (a TokenRequest token).
func (in *install) adapterArgs(t *testing.T, name string, port int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := in.deployment(t)
	sa := d.Spec.Template.Spec.ServiceAccountName
	tr, err := in.h.cp.Client.CoreV1().ServiceAccounts(in.ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", in.ns, sa, err)
	}
	kubeconfig := filepath.Join(in.h.dir, name+".kubeconfig")
	if err := framework.WriteKubeconfig(kubeconfig, in.h.cp.URL, in.h.cp.CA.CertPEM, nil, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	// The chart's arguments, less those that say where the pod listens and
	// finds its certificate; then this machine's.
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		flag, _, _ := strings.Cut(a, "=")
		switch flag {
		case "--secure-port", "--tls-cert-file", "--tls-private-key-file":
		case "--server-config":
			// The pod mounts the chart's ConfigMap; here the file is written from it.
			args = append(args, "--server-config="+in.serverConfigFile(t, d, name))
		default:
			args = append(args, a)
		}
	}
	return append(args,
		"--secure-port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--tls-cert-file="+in.certFile,
		"--tls-private-key-file="+in.keyFile,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--scrape-interval=1s", "--scrape-timeout=800ms", "--max-age=5s", "--v=2",
		"--shutdown-delay=0s", // the chart's delay is for Service endpoints, which this process has none of
	)
}

func (in *install) stopAdapter(t *testing.T) {
	t.Helper()
	if in.adapter == nil {
		return
	}
	if err := in.adapter.Stop(10 * time.Second); err != nil {
		t.Errorf("stop adapter: %v", err)
	}
	if t.Failed() {
		t.Logf("adapter log:\n%s", in.adapter.Tail(40))
	}
	in.adapter = nil
}

// waitAvailable waits until every APIService of the release is Available.
// It returns the last condition per APIService that never got there, or,
// where none was listed by the end, why: never an empty map on a timeout.
func (in *install) waitAvailable(t *testing.T, timeout time.Duration) map[string]string {
	t.Helper()
	notYet := map[string]string{}
	var listErr error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := in.h.cp.Dynamic.Resource(apiServicesGVR).List(ctx, metav1.ListOptions{LabelSelector: instanceKey + "=" + framework.HelmRelease})
		if listErr = err; err != nil {
			return false, nil
		}
		clear(notYet)
		for _, a := range list.Items {
			notYet[a.GetName()] = "no Available condition yet"
			conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] != "Available" {
					continue
				}
				if m["status"] == "True" {
					delete(notYet, a.GetName())
				} else {
					notYet[a.GetName()] = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				}
			}
		}
		return len(list.Items) > 0 && len(notYet) == 0, nil
	})
	if err == nil {
		return nil
	}
	switch {
	case listErr != nil:
		notYet["(list)"] = fmt.Sprintf("listing APIServices: %v", listErr)
	case len(notYet) == 0:
		notYet["(none)"] = fmt.Sprintf("no APIService labelled %s=%s", instanceKey, framework.HelmRelease)
	}
	return notYet
}

// cleanup uninstalls the release while the adapter still serves (as a user
// would, and so that discovery does not fail during the uninstall), stops
// the adapter, and checks that nothing of the release is left.
func (in *install) cleanup(t *testing.T) {
	t.Helper()
	if in.uninstall {
		in.h.runHelm(t, "uninstall", framework.HelmRelease, "--namespace", in.ns, "--wait", "--timeout", "60s")
		in.uninstall = false
	}
	in.stopAdapter(t)
	if left := in.h.leftovers(t, 30*time.Second); len(left) > 0 {
		t.Errorf("helm uninstall left objects of the release behind: %v", left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := in.h.cp.Client.CoreV1().Namespaces().Delete(ctx, in.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", in.ns, err)
	}
}

// releaseObjects lists every object, of every listable resource the API
// server serves, labeled as part of the release.
func (h *helmEnv) releaseObjects(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := rest.CopyConfig(h.cp.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatalf("discovery: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !chartContains(r.Verbs, "list") || gv.Group == "events.k8s.io" || (gv.Group == "" && r.Name == "events") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: instanceKey + "=" + framework.HelmRelease})
			if err != nil {
				continue
			}
			for _, it := range items.Items {
				found = append(found, r.Name+"/"+strings.TrimPrefix(it.GetNamespace()+"/"+it.GetName(), "/"))
			}
		}
	}
	return found
}

// leftovers waits up to timeout for the release's objects to be gone (the
// garbage collector removes ReplicaSets and pods after their Deployment).
func (h *helmEnv) leftovers(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		left = h.releaseObjects(t)
		return len(left) == 0, nil
	})
	return left
}

func chartContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestHelmInstall installs each ci/*-values.yaml of the chart into a real
// control plane, runs the adapter behind the chart's APIServices with the
// chart's ServiceAccount, and checks that the APIServices become Available,
// the probes answer, the HPA controller reads a pod and an Object metric,
// and helm uninstall leaves nothing behind.
func TestHelmInstall(t *testing.T) {
	h := startHelmEnv(t)
	files, err := filepath.Glob(filepath.Join(h.chart, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci values files in %s: %v", h.chart, err)
	}
	for _, f := range files {
		ci := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		t.Run(ci, func(t *testing.T) {
			in := h.install(t, ci)
			if n := len(h.releaseObjects(t)); n < 10 {
				t.Fatalf("only %d objects labeled %s=%s after install; the uninstall check would prove nothing", n, instanceKey, framework.HelmRelease)
			}
			in.startAdapter(t, "adapter-"+ci)
			defer in.stopAdapter(t)
			// The adapter serves custom.metrics.k8s.io and
			// external.metrics.k8s.io: every APIService the chart registers
			// must become Available, or the case fails (it never skips).
			if notYet := in.waitAvailable(t, 60*time.Second); len(notYet) > 0 {
				t.Fatalf("the chart's APIServices not Available after 60s (the adapter serves each one the chart registers): %v\nadapter log:\n%s", notYet, in.adapter.Tail(30))
			}
			in.checkProbes(t)
			in.checkScenario(t)
		})
	}
	t.Run("examples", func(t *testing.T) { h.checkExamples(t) })
	t.Run("upgrade", func(t *testing.T) { h.checkUpgrade(t) })
}

// checkExamples: the API server accepts every manifests/examples HPA (a
// server-side dry run, so that field names and quantities are validated).
func (h *helmEnv) checkExamples(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(h.chart, "..", "..", "..", "manifests", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests/examples/*.yaml: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hpaGVR := schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal(b, &obj.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if obj.GetKind() != "HorizontalPodAutoscaler" {
			t.Fatalf("%s: kind %q, want HorizontalPodAutoscaler", f, obj.GetKind())
		}
		if _, err := h.cp.Dynamic.Resource(hpaGVR).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Errorf("%s: not accepted: %v", filepath.Base(f), err)
		}
	}
}

// readyz returns the status of the adapter's /readyz, 0 when unreachable.
func (in *install) readyz(t *testing.T) int {
	t.Helper()
	c, err := framework.TLSClient(in.caPEM, nil, framework.HelmRelease+"."+in.ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(in.port) + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkProbes: /livez and /readyz answer a client without credentials, as
// the kubelet's HTTPS probes are.
func (in *install) checkProbes(t *testing.T) {
	t.Helper()
	c, err := framework.TLSClient(in.caPEM, nil, framework.HelmRelease+"."+in.ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(in.port) + path)
		if err != nil {
			t.Fatalf("probe %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("probe %s: %s, want 200", path, resp.Status)
		}
	}
}

// serveChartPage serves a fixed vLLM V1 page on a loopback address outside the
// kubelet stand-in's range and returns the address.
func serveChartPage(t *testing.T, page string) (ip string, port int) {
	t.Helper()
	ip = "127.1.0.2"
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, page)
	})}
	go func() { _ = srv.Serve(l) }() // http.ErrServerClosed after Close
	t.Cleanup(func() { srv.Close() })
	return ip, l.Addr().(*net.TCPAddr).Port
}

const chartScenarioPage = `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
`

// checkScenario: a Running pod serving a vLLM page, and a Deployment
// selecting it; the HPA controller's identity reads the pod's queue size
// and the Deployment's through the aggregator.
func (in *install) checkScenario(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := in.h.cp.Client
	ip, port := serveChartPage(t, chartScenarioPage)
	labels := map[string]string{"app": "chart-scenario"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "model", Namespace: in.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm"}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(in.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "model-0", Namespace: in.ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "vllm",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port)}},
		}}},
	}
	created, err := c.CoreV1().Pods(in.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "127.0.0.1", StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	if _, err := c.CoreV1().Pods(in.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Asked as the HPA controller asks: its identity, its typed client.
	hpa, err := framework.NewMetricsClient(in.h.cp.Impersonate(hpaControllerUser, hpaControllerGroups...))
	if err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	questions := map[string]func(ctx context.Context) (map[string]float64, error){
		"pods": func(ctx context.Context) (map[string]float64, error) {
			return hpa.PodValues(ctx, in.ns, metricQueue, selector)
		},
		"deployments": func(ctx context.Context) (map[string]float64, error) {
			v, err := hpa.Object(ctx, in.ns, framework.DeploymentKind, "model", metricQueue)
			if err != nil {
				return nil, err
			}
			return map[string]float64{v.DescribedObject.Name: v.Value.AsApproximateFloat64()}, nil
		},
	}
	for what, ask := range questions {
		var last string
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			vals, err := ask(ctx)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = formatValues(vals)
			return onlyValue(vals, 7), nil
		})
		if err != nil {
			t.Fatalf("%s metric via the chart's APIService never answered 7 (last: %s): %v\nadapter log:\n%s", what, last, err, in.adapter.Tail(20))
		}
	}
}

// TestHelmInstallRBACIsNeeded removes, one at a time, a rule or binding the
// chart grants and shows that the adapter then fails, saying why in its log.
func TestHelmInstallRBACIsNeeded(t *testing.T) {
	h := startHelmEnv(t)
	in := h.install(t, "tls-helm")
	sa := "system:serviceaccount:" + in.ns + ":" + framework.HelmRelease
	cases := []struct {
		name    string
		breakIt func(ctx context.Context) (restore func(ctx context.Context) error, err error)
		wantLog string
	}{
		{
			name:    "no list on pods",
			breakIt: in.dropClusterRoleRule(framework.HelmRelease, "pods"),
			wantLog: `pods is forbidden: User "` + sa + `" cannot list resource "pods"`,
		},
		{
			name:    "no list on deployments",
			breakIt: in.dropClusterRoleRule(framework.HelmRelease, "deployments"),
			wantLog: `cannot list resource "deployments" in API group "apps"`,
		},
		{
			name:    "no extension-apiserver-authentication-reader",
			breakIt: in.deleteRoleBinding("kube-system", framework.HelmRelease+":auth-reader"),
			wantLog: `configmaps "extension-apiserver-authentication" is forbidden`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			restore, err := tc.breakIt(ctx)
			if err != nil {
				t.Fatal(err)
			}
			in.startAdapter(t, "adapter-rbac-"+strings.ReplaceAll(tc.name, " ", "-"))
			// klog quotes values, escaping the quotes inside them; compare unescaped.
			var logText string
			err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
				b, _ := os.ReadFile(in.adapter.LogPath)
				logText = strings.ReplaceAll(string(b), `\"`, `"`)
				return strings.Contains(logText, tc.wantLog), nil
			})
			if err != nil {
				t.Errorf("adapter log never said %q:\n%s", tc.wantLog, chartLogTail(logText, 30))
			}
			// The kubelet's readiness probe must fail, so that the pod never
			// serves behind the Service. (The APIService itself may still say
			// Available: the aggregator checks discovery, not readiness.)
			if exited, _ := in.adapter.Exited(); !exited && in.readyz(t) == http.StatusOK {
				t.Errorf("adapter /readyz answers 200 although it lacks a permission")
			}
			in.stopAdapter(t)
			if err := restore(ctx); err != nil {
				t.Fatalf("restore: %v", err)
			}
		})
	}
	// With everything restored, the same install works: the failures above
	// came from the removed permission alone.
	in.startAdapter(t, "adapter-rbac-restored")
	defer in.stopAdapter(t)
	if notYet := in.waitAvailable(t, 60*time.Second); len(notYet) > 0 {
		t.Fatalf("APIServices not Available with the chart's RBAC restored: %v", notYet)
	}
	in.checkScenario(t)
}

// dropClusterRoleRule removes the rule naming resource from a ClusterRole.
func (in *install) dropClusterRoleRule(role, resource string) func(context.Context) (func(context.Context) error, error) {
	return func(ctx context.Context) (func(context.Context) error, error) {
		roles := in.h.cp.Client.RbacV1().ClusterRoles()
		orig, err := roles.Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		cut := orig.DeepCopy()
		cut.Rules = nil
		for _, r := range orig.Rules {
			if chartContains(r.Resources, resource) {
				var keep []string
				for _, res := range r.Resources {
					if res != resource {
						keep = append(keep, res)
					}
				}
				if len(keep) == 0 {
					continue
				}
				r.Resources = keep
			}
			cut.Rules = append(cut.Rules, r)
		}
		if len(cut.Rules) == len(orig.Rules) && fmt.Sprint(cut.Rules) == fmt.Sprint(orig.Rules) {
			return nil, fmt.Errorf("ClusterRole %s has no rule on %s", role, resource)
		}
		if _, err := roles.Update(ctx, cut, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			cur, err := roles.Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Rules = orig.Rules
			_, err = roles.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, nil
	}
}

// deleteRoleBinding deletes a RoleBinding and restores it afterwards.
func (in *install) deleteRoleBinding(ns, name string) func(context.Context) (func(context.Context) error, error) {
	return func(ctx context.Context) (func(context.Context) error, error) {
		rbs := in.h.cp.Client.RbacV1().RoleBindings(ns)
		orig, err := rbs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if err := rbs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			rb := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: orig.Name, Namespace: orig.Namespace, Labels: orig.Labels, Annotations: orig.Annotations},
				RoleRef:    orig.RoleRef,
				Subjects:   orig.Subjects,
			}
			_, err := rbs.Create(ctx, rb, metav1.CreateOptions{})
			return err
		}, nil
	}
}

func chartLogTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serverConfigFile writes the custom-server table from the ConfigMap that the
// Deployment mounts as its server-config volume, and returns the file's path.
func (in *install) serverConfigFile(t *testing.T, d *appsv1.Deployment, name string) string {
	t.Helper()
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "server-config" && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" {
		t.Fatal("--server-config is set but no server-config ConfigMap volume is mounted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := in.h.cp.Client.CoreV1().ConfigMaps(in.ns).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap %s: %v", cmName, err)
	}
	path := filepath.Join(in.h.dir, name+"-servers.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["servers.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
