// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package helm tests the Helm chart in deploy/helm/inference-metrics-adapter
// without a cluster: helm lint, helm template of every ci/*-values.yaml
// against golden files, the properties each render must have (TLS, RBAC,
// security context), the chart's errors on bad values, and its Grafana
// dashboard and PrometheusRule (monitoring_test.go). The tests need
// the helm binary from IMA_E2E_BIN (test/tools/build.sh prints that
// directory) and skip without it. Installing the chart into a real control
// plane is test/e2e/helm_install_test.go.
package helm

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/monitoring"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current chart")

// The chart, release, namespace and Kubernetes version are those the e2e
// chart tests use (test/e2e/framework/helm.go).
const (
	chartDir    = "../../" + framework.ChartPath
	release     = framework.HelmRelease
	namespace   = framework.ChartNamespace
	kubeVersion = framework.KubeVersion
	agentName   = "inference-metrics-adapter-gpu-agent"
	// agentNamespace is the gpu-agent's namespace by default.
	agentNamespace = namespace + "-gpu-agent"
)

// helmBinary returns the helm executable or skips t.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(framework.BinEnv)
	if dir == "" {
		t.Skipf("chart tests need helm: set %s to the directory with helm (run `make e2e`, or `%s=$(test/tools/build.sh | tail -n1) go test ./test/helm/`)", framework.BinEnv, framework.BinEnv)
	}
	h, err := framework.HelmBinary(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runHelm runs helm with args, at most a minute.
func runHelm(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return framework.RunHelm(ctx, helm, nil, args...)
}

// ciValues lists the chart's ci/*-values.yaml files by name (without the suffix).
func ciValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci/*-values.yaml in %s (err %v)", chartDir, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), "-values.yaml"))
	}
	return names
}

// requiredValues are the values the chart cannot default: every ci/*-values.yaml
// sets them, and a render with the chart's defaults alone ("") adds them.
var requiredValues = []string{"--set", "apiNetworkPolicy.controlPlaneCIDRs={192.0.2.10/32}"}

func render(t *testing.T, helm, ci string, extra ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	if ci != "" {
		args = append(args, "-f", framework.ChartCIValues(chartDir, ci))
	} else {
		args = append(args, requiredValues...)
	}
	return runHelm(t, helm, append(args, extra...)...)
}

// secretLine matches the lines whose values are random per render (the
// chart's own certificates) or derived from them.
var secretLine = regexp.MustCompile(`(?m)^(\s*(?:caBundle|ca\.crt|tls\.crt|tls\.key|checksum/tls|inference-metrics-adapter/not-after):) \S+$`)

// mask replaces certificate data with a placeholder so that goldens are stable.
func mask(s string) string { return secretLine.ReplaceAllString(s, "$1 <masked>") }

func TestLint(t *testing.T) {
	helm := helmBinary(t)
	for _, ci := range append([]string{""}, ciValues(t)...) {
		name := ci
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", chartDir, "--strict", "--kube-version", kubeVersion, "--namespace", namespace}
			if ci != "" {
				args = append(args, "-f", framework.ChartCIValues(chartDir, ci))
			} else {
				args = append(args, requiredValues...)
			}
			if out, err := runHelm(t, helm, args...); err != nil {
				t.Fatal(err)
			} else if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint did not pass:\n%s", out)
			}
		})
	}
}

func TestTemplateGolden(t *testing.T) {
	helm := helmBinary(t)
	for _, ci := range ciValues(t) {
		t.Run(ci, func(t *testing.T) {
			out, err := render(t, helm, ci)
			if err != nil {
				t.Fatal(err)
			}
			got := mask(out)
			golden := filepath.Join("testdata", ci+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run `go test ./test/helm -update` to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("render of ci/%s-values.yaml differs from %s (-golden +now; run with -update if the change is intended):\n%s", ci, golden, diff)
			}
		})
	}
}

// object is one rendered manifest, decoded loosely.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { return str(o, "metadata", "name") }

func str(m map[string]any, path ...string) string {
	v := get(m, path...)
	s, _ := v.(string)
	return s
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func list(v any) []any { l, _ := v.([]any); return l }

// decode splits a rendered chart into its objects (test/monitoring.Objects).
func decode(t *testing.T, rendered string) []object {
	t.Helper()
	maps, err := monitoring.Objects([]byte(rendered))
	if err != nil {
		t.Fatalf("%v\n%s", err, rendered)
	}
	objs := make([]object, len(maps))
	for i, m := range maps {
		objs[i] = m
	}
	return objs
}

func byKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestTemplateProperties checks what every render must have, per ci values.
func TestTemplateProperties(t *testing.T) {
	helm := helmBinary(t)
	for _, ci := range ciValues(t) {
		t.Run(ci, func(t *testing.T) {
			out, err := render(t, helm, ci)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			checkAPIServices(t, ci, objs)
			checkTLS(t, ci, objs)
			checkAdapterPods(t, ci, objs)
			checkRBAC(t, objs)
			checkGPUAgent(t, ci, objs)
			if got, want := len(byKind(objs, "ServiceMonitor")), map[bool]int{true: 1, false: 0}[ci == "servicemonitor" || ci == "monitoring"]; got != want {
				t.Errorf("%d ServiceMonitors, want %d", got, want)
			}
		})
	}
}

func checkAPIServices(t *testing.T, ci string, objs []object) {
	t.Helper()
	want := []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"}
	if ci == "external-metrics" {
		want = append(want, "v1beta1.external.metrics.k8s.io")
	}
	var got []string
	for _, o := range byKind(objs, "APIService") {
		got = append(got, o.name())
		spec, _ := o["spec"].(map[string]any)
		if spec["insecureSkipTLSVerify"] == true {
			t.Errorf("APIService %s: insecureSkipTLSVerify is set", o.name())
		}
		if str(spec, "service", "name") != release || str(spec, "service", "namespace") != namespace {
			t.Errorf("APIService %s points at %v, want %s/%s", o.name(), spec["service"], namespace, release)
		}
		inject := str(o, "metadata", "annotations", "cert-manager.io/inject-ca-from")
		switch {
		case ci == "tls-cert-manager" && inject != namespace+"/"+release:
			t.Errorf("APIService %s: inject-ca-from %q, want %s/%s", o.name(), inject, namespace, release)
		case ci != "tls-cert-manager" && spec["caBundle"] == nil:
			t.Errorf("APIService %s has no caBundle", o.name())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("APIServices (-want +got):\n%s", diff)
	}
}

// checkTLS: with chart-generated certificates, the caBundle verifies the
// serving certificate for the Service's DNS name, and the Secret's ca.crt is
// the caBundle.
func checkTLS(t *testing.T, ci string, objs []object) {
	t.Helper()
	if ci == "tls-cert-manager" {
		if len(byKind(objs, "Certificate")) != 1 || len(byKind(objs, "Issuer")) != 1 {
			t.Errorf("want one Certificate and one Issuer with tls.type=cert-manager")
		}
		return
	}
	if ci == "tls-existing-secret" {
		if n := len(byKind(objs, "Secret")); n != 0 {
			t.Errorf("%d Secrets rendered with tls.type=existingSecret, want 0", n)
		}
		return
	}
	secrets := byKind(objs, "Secret")
	if len(secrets) != 1 {
		t.Fatalf("%d Secrets, want the serving certificate's", len(secrets))
	}
	data := func(k string) []byte {
		b, err := base64.StdEncoding.DecodeString(str(secrets[0], "data", k))
		if err != nil {
			t.Fatalf("Secret data %s: %v", k, err)
		}
		return b
	}
	caPEM := data("ca.crt")
	for _, a := range byKind(objs, "APIService") {
		if str(a, "spec", "caBundle") != base64.StdEncoding.EncodeToString(caPEM) {
			t.Errorf("APIService %s caBundle differs from the Secret's ca.crt", a.name())
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(data("tls.crt"))
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	dnsName := release + "." + namespace + ".svc"
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName}); err != nil {
		t.Errorf("serving certificate does not verify for %s with the caBundle: %v", dnsName, err)
	}
	if key, _ := pem.Decode(data("tls.key")); key == nil {
		t.Error("tls.key holds no PEM block")
	}
}

func checkAdapterPods(t *testing.T, ci string, objs []object) {
	t.Helper()
	deps := byKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deps))
	}
	d := deps[0]
	pod, _ := get(d, "spec", "template", "spec").(map[string]any)
	if get(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("adapter pod: runAsNonRoot is not true")
	}
	containers := list(pod["containers"])
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c, _ := containers[0].(map[string]any)
	sc, _ := c["securityContext"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
		t.Errorf("adapter container securityContext %v: want a read-only root and no privilege escalation", sc)
	}
	if drop := list(get(sc, "capabilities", "drop")); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("adapter capabilities drop %v, want [ALL]", drop)
	}
	for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz"} {
		if got := str(c, probe, "httpGet", "path"); got != path || str(c, probe, "httpGet", "scheme") != "HTTPS" {
			t.Errorf("%s: path %q scheme %q, want %s over HTTPS", probe, got, str(c, probe, "httpGet", "scheme"), path)
		}
	}
	if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "requests", "memory") == nil {
		t.Error("adapter container has no cpu and memory requests")
	}
	if get(pod, "affinity", "podAntiAffinity") == nil {
		t.Error("adapter pods have no anti-affinity")
	}
	args := fmt.Sprint(c["args"])
	if got, want := strings.Contains(args, "--enable-external-metrics"), ci == "external-metrics"; got != want {
		t.Errorf("--enable-external-metrics in args is %v, want %v: %s", got, want, args)
	}
	pdbs := byKind(objs, "PodDisruptionBudget")
	replicas, _ := get(d, "spec", "replicas").(float64)
	if got, want := len(pdbs), map[bool]int{true: 1, false: 0}[replicas > 1]; got != want {
		t.Errorf("%d PodDisruptionBudgets with %v replicas, want %d", got, replicas, want)
	}
}

// checkRBAC: least privilege (no wildcard verbs; wildcard resources only in
// the metrics API groups, whose resources are metric names), and the
// delegation bindings every aggregated API server needs.
func checkRBAC(t *testing.T, objs []object) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, r := range byKind(objs, kind) {
			for _, rule := range list(r["rules"]) {
				m, _ := rule.(map[string]any)
				groups := fmt.Sprint(m["apiGroups"])
				for _, v := range list(m["verbs"]) {
					if v == "*" || (v != "get" && v != "list" && v != "watch") {
						t.Errorf("%s %s: verb %v; the adapter only reads", kind, r.name(), v)
					}
				}
				for _, res := range list(m["resources"]) {
					if res == "*" && !strings.Contains(groups, "metrics.k8s.io") {
						t.Errorf("%s %s: resources * in %s", kind, r.name(), groups)
					}
				}
			}
		}
	}
	refs := map[string]bool{}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range byKind(objs, kind) {
			refs[kind+"/"+str(b, "metadata", "namespace")+"/"+str(b, "roleRef", "name")] = true
		}
	}
	for _, want := range []string{
		"ClusterRoleBinding//system:auth-delegator",
		"RoleBinding/kube-system/extension-apiserver-authentication-reader",
		"ClusterRoleBinding//" + release,
	} {
		if !refs[want] {
			t.Errorf("no binding %s; have %v", want, refs)
		}
	}
	var reader object
	for _, r := range byKind(objs, "ClusterRole") {
		if r.name() == release+":metrics-reader" {
			reader = r
		}
	}
	if reader == nil || str(reader, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-view") != "true" {
		t.Errorf("no metrics-reader ClusterRole aggregated to view")
	}
}

func checkGPUAgent(t *testing.T, ci string, objs []object) {
	t.Helper()
	ds := byKind(objs, "DaemonSet")
	if ci != "gpu-agent" {
		if len(ds) != 0 {
			t.Errorf("%d DaemonSets without gpuAgent.enabled", len(ds))
		}
		if n := len(agentPolicies(objs)); n != 0 {
			t.Errorf("%d gpu-agent NetworkPolicies without gpuAgent.enabled", n)
		}
		return
	}
	if len(ds) != 1 {
		t.Fatalf("%d DaemonSets, want the gpu-agent", len(ds))
	}
	if got := str(ds[0], "spec", "template", "metadata", "labels", "app.kubernetes.io/name"); got != agentName {
		t.Errorf("gpu-agent pods labeled app.kubernetes.io/name=%q, want %q (the adapter's --gpu-agent-selector)", got, agentName)
	}
	pod, _ := get(ds[0], "spec", "template", "spec").(map[string]any)
	var hostPath string
	for _, v := range list(pod["volumes"]) {
		if p := str(v.(map[string]any), "hostPath", "path"); p != "" {
			hostPath = p
		}
	}
	if hostPath != "/var/lib/kubelet/pod-resources" {
		t.Errorf("gpu-agent hostPath %q, want /var/lib/kubelet/pod-resources", hostPath)
	}
	if pod["nodeSelector"] == nil || pod["tolerations"] == nil {
		t.Error("gpu-agent has no nodeSelector or tolerations for GPU nodes")
	}
	c, _ := list(pod["containers"])[0].(map[string]any)
	if str(list(c["ports"])[0].(map[string]any), "name") != "metrics" {
		t.Error("gpu-agent port is not named metrics")
	}
	if get(c, "resources", "limits", "nvidia.com/gpu") != nil {
		t.Error("gpu-agent requests nvidia.com/gpu; it must not take a GPU from the workloads")
	}
	deps := byKind(objs, "Deployment")
	if args := fmt.Sprint(get(deps[0], "spec", "template", "spec", "containers")); !strings.Contains(args, "--gpu-agent-selector=app.kubernetes.io/name="+agentName) {
		t.Errorf("adapter args do not select the agent: %s", args)
	}
}

// TestTemplateErrors: bad values fail with a message that says what to do.
func TestTemplateErrors(t *testing.T) {
	helm := helmBinary(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown tls type", []string{"--set", "tls.type=self"}, "value must be one of 'helm', 'cert-manager', 'existingSecret'"},
		{"existing secret without name", []string{"--set", "tls.type=existingSecret"}, "tls.existingSecret.name is required"},
		{"existing secret without CA", []string{"--set", "tls.type=existingSecret", "--set", "tls.existingSecret.name=mine"}, "set apiService.caBundle"},
		{"duration without unit", []string{"--set", "adapter.scrapeInterval=5"}, "scrapeInterval"},
		{"unknown value", []string{"--set", "adapter.scrapeIntervall=5s"}, "scrapeIntervall"},
		{"grace period too short", []string{"--set", "terminationGracePeriodSeconds=15"}, "terminationGracePeriodSeconds (15) must exceed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, helm, "", tc.args...)
			if err == nil {
				t.Fatalf("rendered; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// deployment returns the adapter's Deployment and its container.
func deployment(t *testing.T, objs []object) (pod, container map[string]any) {
	t.Helper()
	deps := byKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deps))
	}
	pod, _ = get(deps[0], "spec", "template", "spec").(map[string]any)
	container, _ = list(pod["containers"])[0].(map[string]any)
	return pod, container
}

// envSource returns the valueFrom of the container's variable name.
func envSource(c map[string]any, name string) map[string]any {
	for _, e := range list(c["env"]) {
		m, _ := e.(map[string]any)
		if m["name"] == name {
			v, _ := m["valueFrom"].(map[string]any)
			return v
		}
	}
	return nil
}

func hasArg(c map[string]any, arg string) bool {
	for _, a := range list(c["args"]) {
		if a == arg {
			return true
		}
	}
	return false
}

// The chart always names the release's namespace as the agent namespace and
// gives the pod its namespace.
// Was wrong: with the default values (no chart agent) the adapter trusted agent-labelled pods in any namespace.
func TestAgentNamespaceAlwaysSet(t *testing.T) {
	helm := helmBinary(t)
	for _, ci := range append([]string{""}, ciValues(t)...) {
		t.Run("ci="+ci, func(t *testing.T) {
			out, err := render(t, helm, ci)
			if err != nil {
				t.Fatal(err)
			}
			_, c := deployment(t, decode(t, out))
			if !hasArg(c, "--gpu-agent-namespace="+agentNamespace) {
				t.Errorf("adapter args lack --gpu-agent-namespace=%s: %v", agentNamespace, c["args"])
			}
			if got := str(envSource(c, "POD_NAMESPACE"), "fieldRef", "fieldPath"); got != "metadata.namespace" {
				t.Errorf("POD_NAMESPACE from %q, want the downward API's metadata.namespace", got)
			}
		})
	}
}

// The chart passes the container's memory limit (MEMORY_LIMIT_BYTES) for
// GOMEMLIMIT and the budget check.
// Was wrong: the adapter knew nothing of its container's memory limit.
func TestMemoryLimitPassed(t *testing.T) {
	helm := helmBinary(t)
	out, err := render(t, helm, "")
	if err != nil {
		t.Fatal(err)
	}
	_, c := deployment(t, decode(t, out))
	src := envSource(c, "MEMORY_LIMIT_BYTES")
	if str(src, "resourceFieldRef", "resource") != "limits.memory" || str(src, "resourceFieldRef", "containerName") != "adapter" {
		t.Errorf("MEMORY_LIMIT_BYTES from %v, want the adapter container's limits.memory", src)
	}
	if got := str(c, "resources", "limits", "memory"); got != "512Mi" {
		t.Errorf("memory limit %q; the documented budget assumes 512Mi", got)
	}
}

// With adapter.namespaces set, the chart grants reading pods and workloads
// by Roles in those namespaces and the gpu-agent's (where the chart runs the
// agent, or the release's if it is there); what the API server library needs
// stays cluster-wide (auth delegation) or in kube-system.
// Was wrong: with adapter.namespaces set the chart still granted that read cluster-wide.
func TestRBACScopedToNamespaces(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name           string
		args           []string
		wantClusterGet bool
		wantRoles      []string // namespaces
	}{
		{"all namespaces", nil, true, nil},
		{"listed namespaces", []string{"--set", "adapter.namespaces={team-a,team-b}"}, false, []string{"team-a", "team-b"}},
		{"listed namespaces and the gpu-agent", []string{"--set", "adapter.namespaces={team-a,team-b}", "--set", "gpuAgent.enabled=true"}, false, []string{"team-a", "team-b", agentNamespace}},
		{"agent namespace listed", []string{"--set", "adapter.namespaces={team-a," + agentNamespace + "}", "--set", "gpuAgent.enabled=true"}, false, []string{"team-a", agentNamespace}},
		{"agent in the release namespace", []string{"--set", "adapter.namespaces={team-a}", "--set", "gpuAgent.namespace=" + namespace}, false, []string{"team-a", namespace}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, helm, "", tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			checkRBACDelegation(t, objs)
			readsWorkloads := func(o object) bool {
				for _, r := range list(o["rules"]) {
					if strings.Contains(fmt.Sprint(r.(map[string]any)["resources"]), "pods") {
						return true
					}
				}
				return false
			}
			clusterGet := false
			for _, r := range byKind(objs, "ClusterRole") {
				clusterGet = clusterGet || readsWorkloads(r)
			}
			if clusterGet != tt.wantClusterGet {
				t.Errorf("a ClusterRole reads pods: %v, want %v", clusterGet, tt.wantClusterGet)
			}
			var roles, bindings []string
			for _, r := range byKind(objs, "Role") {
				if readsWorkloads(r) {
					roles = append(roles, str(r, "metadata", "namespace"))
					rules := fmt.Sprint(r["rules"])
					for _, want := range []string{"pods", "deployments", "statefulsets"} {
						if !strings.Contains(rules, want) {
							t.Errorf("Role in %s does not read %s: %s", str(r, "metadata", "namespace"), want, rules)
						}
					}
				}
			}
			for _, b := range byKind(objs, "RoleBinding") {
				if str(b, "roleRef", "kind") == "Role" && str(b, "roleRef", "name") == release {
					bindings = append(bindings, str(b, "metadata", "namespace"))
				}
			}
			if diff := cmp.Diff(tt.wantRoles, roles); diff != "" {
				t.Errorf("namespaces of the reading Roles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRoles, bindings); diff != "" {
				t.Errorf("namespaces of their RoleBindings (-want +got):\n%s", diff)
			}
		})
	}
}

// checkRBACDelegation: the bindings the aggregated API server library needs
// in every mode.
func checkRBACDelegation(t *testing.T, objs []object) {
	t.Helper()
	refs := map[string]bool{}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range byKind(objs, kind) {
			refs[kind+"/"+str(b, "metadata", "namespace")+"/"+str(b, "roleRef", "name")] = true
		}
	}
	for _, want := range []string{
		"ClusterRoleBinding//system:auth-delegator",
		"RoleBinding/kube-system/extension-apiserver-authentication-reader",
	} {
		if !refs[want] {
			t.Errorf("no binding %s; have %v", want, refs)
		}
	}
}

// The chart sleeps in preStop, passes --shutdown-delay, and gives the pod a
// grace period above both.
// Was wrong: a rolling update closed the adapter's port while kube-apiserver still sent it requests.
func TestGracefulShutdown(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name        string
		kubeVersion string
		wantPreStop bool
	}{
		{"Kubernetes " + kubeVersion, kubeVersion, true},
		{"Kubernetes 1.29 has no sleep action", "1.29.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runHelm(t, helm, append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", tt.kubeVersion}, requiredValues...)...)
			if err != nil {
				t.Fatal(err)
			}
			pod, c := deployment(t, decode(t, out))
			if !hasArg(c, "--shutdown-delay=10s") {
				t.Errorf("adapter args lack --shutdown-delay=10s: %v", c["args"])
			}
			sleep, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(float64)
			if (sleep > 0) != tt.wantPreStop {
				t.Errorf("preStop sleep %v, want one: %v", sleep, tt.wantPreStop)
			}
			grace, _ := pod["terminationGracePeriodSeconds"].(float64)
			if grace <= sleep+10 {
				t.Errorf("terminationGracePeriodSeconds %v does not exceed preStop %v + shutdown delay 10", grace, sleep)
			}
		})
	}
}

// The gpu-agent runs with least privilege, the pod-resources mount
// read-only, and a NetworkPolicy that admits only the adapter's pods to the
// agent's port.
// Was wrong: the gpu-agent ran with a read-write hostPath and its port open to every pod.
func TestGPUAgentLeastPrivilege(t *testing.T) {
	helm := helmBinary(t)
	out, err := render(t, helm, "gpu-agent")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	ds := byKind(objs, "DaemonSet")
	if len(ds) != 1 {
		t.Fatalf("%d DaemonSets, want the gpu-agent", len(ds))
	}
	pod, _ := get(ds[0], "spec", "template", "spec").(map[string]any)
	c, _ := list(pod["containers"])[0].(map[string]any)
	sc, _ := c["securityContext"].(map[string]any)
	if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || sc["privileged"] != false {
		t.Errorf("gpu-agent securityContext %v: want no privilege escalation, a read-only root, not privileged", sc)
	}
	if drop := list(get(sc, "capabilities", "drop")); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("gpu-agent capabilities drop %v, want [ALL]", drop)
	}
	if add := get(sc, "capabilities", "add"); add != nil {
		t.Errorf("gpu-agent adds capabilities %v", add)
	}
	if str(sc, "seccompProfile", "type") != "RuntimeDefault" || str(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("gpu-agent seccomp: container %v, pod %v; want RuntimeDefault", sc["seccompProfile"], get(pod, "securityContext", "seccompProfile"))
	}
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if pod[k] == true {
			t.Errorf("gpu-agent pod sets %s", k)
		}
	}
	if pod["automountServiceAccountToken"] != false {
		t.Error("gpu-agent mounts a service account token it does not use")
	}
	for _, m := range list(c["volumeMounts"]) {
		mm, _ := m.(map[string]any)
		if mm["readOnly"] != true {
			t.Errorf("gpu-agent mount %v is not read-only", mm)
		}
	}
	if !hasArg(c, "--max-connections=16") {
		t.Errorf("gpu-agent args lack --max-connections=16: %v", c["args"])
	}

	nps := agentPolicies(objs)
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies select the agent, want the gpu-agent's", len(nps))
	}
	np := nps[0]
	if got := str(np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name"); got != agentName {
		t.Errorf("NetworkPolicy selects %q, want the agent's pods", got)
	}
	if types := fmt.Sprint(get(np, "spec", "policyTypes")); types != "[Ingress]" {
		t.Errorf("policyTypes %s, want [Ingress]", types)
	}
	ingress := list(get(np, "spec", "ingress"))
	if len(ingress) != 1 {
		t.Fatalf("%d ingress rules, want 1", len(ingress))
	}
	rule, _ := ingress[0].(map[string]any)
	from := list(rule["from"])
	if len(from) != 1 {
		t.Fatalf("ingress from %v, want the adapter's pods only", from)
	}
	peer, _ := from[0].(map[string]any)
	if diff := cmp.Diff(map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace}}, peer["namespaceSelector"]); diff != "" || peer["ipBlock"] != nil {
		t.Errorf("ingress peer %v reaches beyond the adapter's namespace (-want +got namespaceSelector):\n%s", peer, diff)
	}
	if diff := cmp.Diff(map[string]any{"app.kubernetes.io/name": release, "app.kubernetes.io/instance": release}, get(peer, "podSelector", "matchLabels")); diff != "" {
		t.Errorf("ingress peer is not the adapter's pods (-want +got):\n%s", diff)
	}
	ports := list(rule["ports"])
	if len(ports) != 1 || get(ports[0].(map[string]any), "port") != float64(9410) {
		t.Errorf("ingress ports %v, want the agent's 9410 only", ports)
	}

	out, err = render(t, helm, "gpu-agent", "--set", "gpuAgent.networkPolicy.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(agentPolicies(decode(t, out))); n != 0 {
		t.Errorf("%d gpu-agent NetworkPolicies with gpuAgent.networkPolicy.enabled=false", n)
	}
}

func TestExtraEnv(t *testing.T) {
	helm := helmBinary(t)
	out, err := render(t, helm, "", "--set", "adapter.extraEnv[0].name=GOGC", "--set-string", "adapter.extraEnv[0].value=50")
	if err != nil {
		t.Fatal(err)
	}
	_, c := deployment(t, decode(t, out))
	env, _ := c["env"].([]any)
	var names []string
	for _, e := range env {
		m, _ := e.(map[string]any)
		names = append(names, fmt.Sprint(m["name"]))
		if m["name"] == "GOGC" && m["value"] != "50" {
			t.Errorf("GOGC = %v, want \"50\"", m["value"])
		}
	}
	if want := []string{"POD_NAMESPACE", "MEMORY_LIMIT_BYTES", "GOGC"}; !slices.Equal(names, want) {
		t.Errorf("env names %v, want %v", names, want)
	}
	for _, args := range [][]string{
		{"--set", "adapter.extraEnv[0].name=MEMORY_LIMIT_BYTES", "--set-string", "adapter.extraEnv[0].value=1"},
		{"--set", "adapter.extraEnv[0].name=GOGC"},
		{"--set", "adapter.extraEnv[0].name=not-a-name", "--set-string", "adapter.extraEnv[0].value=1"},
	} {
		if _, err := render(t, helm, "", args...); err == nil || !strings.Contains(err.Error(), "extraEnv") {
			t.Errorf("render %q: %v, want a schema error about extraEnv", args, err)
		}
	}
}
