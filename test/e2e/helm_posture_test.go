// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// notAfterAnnotation is where the chart keeps its certificate's expiry.
const notAfterAnnotation = "inference-metrics-adapter/not-after"

// TestHelmPosture installs the chart into a real kube-apiserver and checks
// what only a cluster can tell: Pod Security admission admits the adapter's
// pods in a namespace that enforces restricted and the gpu-agent's in the
// namespace the chart makes for it (and refuses the agent's under
// restricted), and tls.type=helm keeps its certificate across upgrades
// (lookup) until it is near expiry, then renews it with both CAs trusted.
func TestHelmPosture(t *testing.T) {
	h := startHelmEnv(t)
	t.Run("pod security", func(t *testing.T) { h.checkPodSecurity(t) })
	t.Run("certificate renewal", func(t *testing.T) { h.checkCertRenewal(t) })
}

// chartArgs are the arguments of a helm install or upgrade of ci into ns
// without APIServices (no adapter answers them here, and helm's discovery
// would stumble on unavailable ones).
func (h *helmEnv) chartArgs(verb, ns, ci string) []string {
	return []string{verb, framework.HelmRelease, h.chart, "--namespace", ns,
		"-f", filepath.Join(h.chart, "ci", ci+"-values.yaml"), "--set", "apiService.create=false", "--wait=false"}
}

func (h *helmEnv) checkPodSecurity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "ima-psa"
	agentNS := ns + "-gpu-agent"
	if _, err := h.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.cp.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	h.runHelm(t, h.chartArgs("install", ns, "gpu-agent")...)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			h.runHelm(t, "uninstall", framework.HelmRelease, "--namespace", ns, "--wait", "--timeout", "60s")
		}
	})

	agentNamespace, err := h.cp.Client.CoreV1().Namespaces().Get(ctx, agentNS, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gpu-agent's namespace: %v", err)
	}
	if got := agentNamespace.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("namespace %s enforces %q, want privileged", agentNS, got)
	}
	d, err := h.cp.Client.AppsV1().Deployments(ns).Get(ctx, framework.HelmRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := h.cp.Client.AppsV1().DaemonSets(agentNS).Get(ctx, framework.HelmRelease+"-gpu-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gpu-agent DaemonSet in %s: %v", agentNS, err)
	}
	// The ServiceAccount admission wants each namespace's default
	// ServiceAccount, which kube-controller-manager makes soon after the
	// namespace.
	for _, n := range []string{ns, agentNS} {
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := h.cp.Client.CoreV1().ServiceAccounts(n).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("no default ServiceAccount in %s: %v", n, err)
		}
	}
	// A pod of each template, created with dry run: admission runs,
	// nothing is stored.
	admit := func(name, namespace string, spec corev1.PodSpec) error {
		// This control plane has no RuntimeClass nvidia (ci/gpu-agent's);
		// it has no bearing on Pod Security.
		spec.RuntimeClassName = nil
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: spec}
		_, err := h.cp.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := admit("adapter", ns, d.Spec.Template.Spec); err != nil {
		t.Errorf("the adapter's pod is refused in a namespace that enforces restricted: %v", err)
	}
	if err := admit("gpu-agent", agentNS, ds.Spec.Template.Spec); err != nil {
		t.Errorf("the gpu-agent's pod is refused in its own namespace: %v", err)
	}
	// The check bites: the agent's pod is not restricted (user 0, hostPath).
	if err := admit("gpu-agent", ns, ds.Spec.Template.Spec); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("the gpu-agent's pod in a restricted namespace: %v, want refused by PodSecurity", err)
	}

	h.runHelm(t, "uninstall", framework.HelmRelease, "--namespace", ns, "--wait", "--timeout", "60s")
	uninstalled = true
	if left := h.leftovers(t, 60*time.Second); len(left) > 0 {
		t.Errorf("helm uninstall left objects of the release behind (the agent's namespace among them?): %v", left)
	}
}

// servingSecret is the chart's Secret: its CA bundle, certificate and
// not-after annotation.
type servingSecret struct {
	ca, crt  []byte
	notAfter string
}

func (h *helmEnv) readServingSecret(t *testing.T, ns string) servingSecret {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := h.cp.Client.CoreV1().Secrets(ns).Get(ctx, framework.HelmRelease+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return servingSecret{ca: s.Data["ca.crt"], crt: s.Data["tls.crt"], notAfter: s.Annotations[notAfterAnnotation]}
}

// verifies says whether certPEM verifies for the Service's name against bundle.
func verifies(t *testing.T, bundle, certPEM []byte, dnsName string) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("the CA bundle holds no certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName})
	return err
}

func (h *helmEnv) checkCertRenewal(t *testing.T) {
	ns := "ima-renew"
	dnsName := framework.HelmRelease + "." + ns + ".svc"
	h.runHelm(t, append(h.chartArgs("install", ns, "tls-helm"), "--create-namespace")...)
	t.Cleanup(func() {
		h.runHelm(t, "uninstall", framework.HelmRelease, "--namespace", ns, "--wait", "--timeout", "60s")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.cp.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	upgrade := func() servingSecret {
		h.runHelm(t, h.chartArgs("upgrade", ns, "tls-helm")...)
		return h.readServingSecret(t, ns)
	}
	setNotAfter := func(v any) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, notAfterAnnotation, v)
		if _, err := h.cp.Client.CoreV1().Secrets(ns).Patch(ctx, framework.HelmRelease+"-tls", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	checkFresh := func(s servingSecret) {
		t.Helper()
		notAfter, err := time.Parse(time.RFC3339, s.notAfter)
		if err != nil {
			t.Fatalf("annotation %s %q: %v", notAfterAnnotation, s.notAfter, err)
		}
		if d := time.Until(notAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
			t.Errorf("the certificate expires in %v, want 365 days", d)
		}
		if err := verifies(t, s.ca, s.crt, dnsName); err != nil {
			t.Errorf("the certificate does not verify against ca.crt: %v", err)
		}
	}

	first := h.readServingSecret(t, ns)
	checkFresh(first)
	if kept := upgrade(); !bytes.Equal(kept.crt, first.crt) || !bytes.Equal(kept.ca, first.ca) || kept.notAfter != first.notAfter {
		t.Fatalf("an upgrade a year before expiry replaced the certificate")
	}

	// Ten days left, under renewBeforeDays (30): the upgrade renews.
	setNotAfter(fmt.Sprintf("%q", time.Now().Add(10*24*time.Hour).UTC().Format(time.RFC3339)))
	renewed := upgrade()
	if bytes.Equal(renewed.crt, first.crt) {
		t.Fatal("an upgrade ten days before expiry kept the certificate")
	}
	checkFresh(renewed)
	if err := verifies(t, renewed.ca, first.crt, dnsName); err != nil {
		t.Errorf("after renewal ca.crt no longer verifies the old certificate, which replicas not yet replaced still serve: %v", err)
	}
	if n := bytes.Count(renewed.ca, []byte("BEGIN CERTIFICATE")); n != 2 {
		t.Errorf("ca.crt holds %d certificates after renewal, want the new CA and the old one", n)
	}
	if kept := upgrade(); !bytes.Equal(kept.crt, renewed.crt) || !bytes.Equal(kept.ca, renewed.ca) {
		t.Error("the upgrade after a renewal replaced the certificate again")
	}

	// A Secret an earlier chart made has no annotation: renewed, and the
	// bundle keeps only the CA of the certificate it replaces (no growth).
	setNotAfter("null")
	legacy := upgrade()
	if bytes.Equal(legacy.crt, renewed.crt) {
		t.Fatal("an upgrade over a certificate of unknown expiry kept it")
	}
	checkFresh(legacy)
	if err := verifies(t, legacy.ca, renewed.crt, dnsName); err != nil {
		t.Errorf("ca.crt no longer verifies the certificate it replaced: %v", err)
	}
	if n := bytes.Count(legacy.ca, []byte("BEGIN CERTIFICATE")); n != 2 {
		t.Errorf("ca.crt holds %d certificates after a second renewal, want 2", n)
	}
}
