// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// agentPolicies returns the NetworkPolicies that select the gpu-agent's pods.
func agentPolicies(objs []object) []object {
	var out []object
	for _, np := range byKind(objs, "NetworkPolicy") {
		if str(np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name") == agentName {
			out = append(out, np)
		}
	}
	return out
}

// adapterPolicies returns the NetworkPolicies that select the adapter's pods.
func adapterPolicies(objs []object) []object {
	var out []object
	for _, np := range byKind(objs, "NetworkPolicy") {
		if str(np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name") == release {
			out = append(out, np)
		}
	}
	return out
}

// Finding 5: the adapter's API port was open to every pod, past
// kube-apiserver's API Priority and Fairness. A NetworkPolicy, on by default,
// admits only the control plane's addresses and extraFrom, on that port only;
// without addresses the chart refuses to render rather than guess them.
func TestAPINetworkPolicy(t *testing.T) {
	helm := helmBinary(t)
	cidrs := []string{"--set", "apiNetworkPolicy.controlPlaneCIDRs={10.0.0.10/32,fd00::10/128}"}
	konnectivity := []string{"--set", "apiNetworkPolicy.extraFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=kube-system",
		"--set", "apiNetworkPolicy.extraFrom[0].podSelector.matchLabels.k8s-app=konnectivity-agent"}
	ipBlock := func(cidr string) any { return map[string]any{"ipBlock": map[string]any{"cidr": cidr}} }
	konnectivityPeer := map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
		"podSelector":       map[string]any{"matchLabels": map[string]any{"k8s-app": "konnectivity-agent"}},
	}
	tcp := func(port int) []any { return []any{map[string]any{"protocol": "TCP", "port": float64(port)}} }
	type rule struct {
		From  []any // nil: every peer
		Ports []any
	}
	tests := []struct {
		name    string
		args    []string
		want    []rule // nil: no policy
		wantErr string
	}{
		{name: "control plane CIDRs", args: cidrs, want: []rule{{[]any{ipBlock("10.0.0.10/32"), ipBlock("fd00::10/128")}, tcp(6443)}}},
		{name: "and extra peers", args: append(append([]string{}, cidrs...), konnectivity...),
			want: []rule{{[]any{ipBlock("10.0.0.10/32"), ipBlock("fd00::10/128"), konnectivityPeer}, tcp(6443)}}},
		{name: "extra peers alone", args: konnectivity, want: []rule{{[]any{konnectivityPeer}, tcp(6443)}}},
		{name: "the container port", args: append([]string{"--set", "adapter.containerPort=8443"}, cidrs...), want: []rule{{[]any{ipBlock("10.0.0.10/32"), ipBlock("fd00::10/128")}, tcp(8443)}}},
		// With its own policy turned off (kedaScaler.networkPolicy), the KEDA
		// port stays open to all, as without this policy, and the API rule
		// does not name it.
		{name: "KEDA port left as it was", args: append([]string{"--set", "kedaScaler.enabled=true", "--set", "kedaScaler.allowUnauthenticated=true", "--set", "kedaScaler.networkPolicy.enabled=false"}, cidrs...),
			want: []rule{{[]any{ipBlock("10.0.0.10/32"), ipBlock("fd00::10/128")}, tcp(6443)}, {nil, tcp(9443)}}},
		{name: "disabled", args: []string{"--set", "apiNetworkPolicy.enabled=false"}},
		{name: "no addresses", wantErr: "set apiNetworkPolicy.controlPlaneCIDRs"},
		{name: "not a CIDR", args: []string{"--set", "apiNetworkPolicy.controlPlaneCIDRs={kube-apiserver}"}, wantErr: "controlPlaneCIDRs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The chart's defaults and tt.args only: not render's required values.
			out, err := runHelm(t, helm, append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nps := adapterPolicies(decode(t, out))
			if tt.want == nil {
				if len(nps) != 0 {
					t.Fatalf("%d NetworkPolicies select the adapter's pods, want none", len(nps))
				}
				return
			}
			if len(nps) != 1 {
				t.Fatalf("%d NetworkPolicies select the adapter's pods, want 1", len(nps))
			}
			np := nps[0]
			if np.name() != release+"-api" || str(np, "metadata", "namespace") != namespace {
				t.Errorf("NetworkPolicy %s/%s, want %s/%s-api", str(np, "metadata", "namespace"), np.name(), namespace, release)
			}
			if diff := cmp.Diff(map[string]any{"app.kubernetes.io/name": release, "app.kubernetes.io/instance": release}, get(np, "spec", "podSelector", "matchLabels")); diff != "" {
				t.Errorf("podSelector is not the adapter's pods (-want +got):\n%s", diff)
			}
			if types := fmt.Sprint(get(np, "spec", "policyTypes")); types != "[Ingress]" {
				t.Errorf("policyTypes %s, want [Ingress]", types)
			}
			var got []rule
			for _, r := range list(get(np, "spec", "ingress")) {
				m, _ := r.(map[string]any)
				got = append(got, rule{list(m["from"]), list(m["ports"])})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ingress rules (-want +got):\n%s", diff)
			}
		})
	}
}

// Finding 8: the chart's serving certificate lasted 3,650 days.
func TestServingCertLifetime(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		days int
	}{
		{"default", nil, 365},
		{"certDurationDays", []string{"--set", "tls.helm.certDurationDays=90"}, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, helm, "tls-helm", tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			secrets := byKind(objs, "Secret")
			if len(secrets) != 1 {
				t.Fatalf("%d Secrets, want the serving certificate's", len(secrets))
			}
			want := time.Duration(tc.days) * 24 * time.Hour
			for _, key := range []string{"tls.crt", "ca.crt"} {
				cert := parseCert(t, secrets[0], key)
				if got := cert.NotAfter.Sub(cert.NotBefore); got < want || got > want+2*time.Hour {
					t.Errorf("%s valid for %v (%v to %v), want %d days", key, got, cert.NotBefore, cert.NotAfter, tc.days)
				}
			}
			// The annotation the next upgrade reads to decide on renewal.
			ann := str(secrets[0], "metadata", "annotations", "inference-metrics-adapter/not-after")
			notAfter, err := time.Parse(time.RFC3339, ann)
			if err != nil {
				t.Fatalf("annotation inference-metrics-adapter/not-after %q: %v", ann, err)
			}
			if d := notAfter.Sub(parseCert(t, secrets[0], "tls.crt").NotAfter); d < -time.Minute || d > time.Minute {
				t.Errorf("not-after annotation %v, certificate's NotAfter %v", notAfter, parseCert(t, secrets[0], "tls.crt").NotAfter)
			}
		})
	}
}

// parseCert decodes the first certificate of the Secret's data key.
func parseCert(t *testing.T, secret object, key string) *x509.Certificate {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(str(secret, "data", key))
	if err != nil {
		t.Fatalf("Secret data %s: %v", key, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("Secret data %s holds no PEM block", key)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("Secret data %s: %v", key, err)
	}
	return c
}

// writeServingCert writes a throwaway CA and a serving certificate for the
// chart's Service to dir, as tls.values wants them, and returns the paths.
func writeServingCert(t *testing.T, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now, NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dnsName := release + "." + namespace + ".svc"
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName}, NotBefore: now, NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("tls.crt", "CERTIFICATE", der), write("tls.key", "EC PRIVATE KEY", keyDER), write("ca.crt", "CERTIFICATE", caDER)
}

// document returns the rendered document of kind and name, as text.
func document(t *testing.T, rendered, kind, name string) string {
	t.Helper()
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(rendered, -1) {
		if regexp.MustCompile(`(?m)^kind: `+kind+`$`).MatchString(doc) && regexp.MustCompile(`(?m)^  name: `+regexp.QuoteMeta(name)+`$`).MatchString(doc) {
			return doc
		}
	}
	t.Fatalf("no %s %s in the render", kind, name)
	return ""
}

// Finding 8: every `helm template` render (GitOps: Argo CD) made a new
// certificate, so the Secret changed and the pods restarted on every sync.
// With tls.type=values the Secret, the APIServices' caBundle and the pods'
// checksum are the same on every render.
func TestServingCertFromValues(t *testing.T) {
	helm := helmBinary(t)
	certFile, keyFile, caFile := writeServingCert(t, t.TempDir())
	args := []string{"--set", "tls.type=values", "--set-file", "tls.values.cert=" + certFile, "--set-file", "tls.values.key=" + keyFile, "--set-file", "tls.values.ca=" + caFile}
	var renders []string
	for range 2 {
		out, err := render(t, helm, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		renders = append(renders, out)
	}
	for _, d := range []struct{ kind, name string }{{"Secret", release + "-tls"}, {"APIService", "v1beta2.custom.metrics.k8s.io"}, {"Deployment", release}} {
		a, b := document(t, renders[0], d.kind, d.name), document(t, renders[1], d.kind, d.name)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s %s differs between two renders (-first +second):\n%s", d.kind, d.name, diff)
		}
	}
	objs := decode(t, renders[0])
	secrets := byKind(objs, "Secret")
	if len(secrets) != 1 {
		t.Fatalf("%d Secrets, want the serving certificate's", len(secrets))
	}
	for key, file := range map[string]string{"tls.crt": certFile, "tls.key": keyFile, "ca.crt": caFile} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := str(secrets[0], "data", key); got != base64.StdEncoding.EncodeToString(want) {
			t.Errorf("Secret %s is not the file given", key)
		}
	}
	caPEM, _ := os.ReadFile(caFile)
	for _, a := range byKind(objs, "APIService") {
		if got := str(a, "spec", "caBundle"); got != base64.StdEncoding.EncodeToString(caPEM) {
			t.Errorf("APIService %s caBundle is not tls.values.ca", a.name())
		}
	}
	d := byKind(objs, "Deployment")[0]
	if str(d, "spec", "template", "metadata", "annotations", "checksum/tls") == "" {
		t.Error("the Deployment has no checksum/tls: a new certificate in values would not roll the pods")
	}

	// The chart's own certificates, by contrast, are new on every render
	// without a cluster to read them back from (what docs/operations.md says).
	a, err := render(t, helm, "tls-helm")
	if err != nil {
		t.Fatal(err)
	}
	b, err := render(t, helm, "tls-helm")
	if err != nil {
		t.Fatal(err)
	}
	if document(t, a, "Secret", release+"-tls") == document(t, b, "Secret", release+"-tls") {
		t.Error("two renders of tls.type=helm made the same Secret; this test cannot tell a stable render from a random one")
	}

	for _, missing := range []string{"cert", "key", "ca"} {
		var partial []string
		for i := 2; i < len(args); i += 2 {
			if !strings.HasPrefix(args[i+1], "tls.values."+missing+"=") {
				partial = append(partial, args[i], args[i+1])
			}
		}
		_, err := render(t, helm, "", append([]string{"--set", "tls.type=values"}, partial...)...)
		if err == nil || !strings.Contains(err.Error(), "tls.values."+missing+" is required") {
			t.Errorf("render without tls.values.%s: %v, want an error naming it", missing, err)
		}
	}
}

// Finding 8: the gpu-agent (user 0, a hostPath) shared the adapter's
// namespace, which then had to allow Pod Security's privileged level. It now
// runs in a namespace of its own, labelled privileged, which the adapter
// trusts (--gpu-agent-namespace) and whose NetworkPolicy admits the adapter
// from the release's namespace.
func TestGPUAgentOwnNamespace(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name          string
		args          []string
		wantNamespace string
		wantCreated   bool
	}{
		{"default", nil, agentNamespace, true},
		{"named", []string{"--set", "gpuAgent.namespace=gpu-system"}, "gpu-system", true},
		{"made by the user", []string{"--set", "gpuAgent.createNamespace=false"}, agentNamespace, false},
		{"the release's", []string{"--set", "gpuAgent.namespace=" + namespace}, namespace, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, helm, "gpu-agent", tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			var created []string
			for _, ns := range byKind(objs, "Namespace") {
				created = append(created, ns.name())
				if got := str(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce"); got != "privileged" {
					t.Errorf("Namespace %s: pod-security.kubernetes.io/enforce %q, want privileged", ns.name(), got)
				}
			}
			var wantCreated []string
			if tt.wantCreated {
				wantCreated = []string{tt.wantNamespace}
			}
			if diff := cmp.Diff(wantCreated, created); diff != "" {
				t.Errorf("Namespaces the chart creates (-want +got):\n%s", diff)
			}
			for _, o := range append(byKind(objs, "DaemonSet"), agentPolicies(objs)...) {
				if got := str(o, "metadata", "namespace"); got != tt.wantNamespace {
					t.Errorf("%s %s in namespace %q, want %q", o.kind(), o.name(), got, tt.wantNamespace)
				}
			}
			for _, o := range objs {
				if o.kind() == "Deployment" || o.kind() == "Service" || o.kind() == "Secret" || o.kind() == "ServiceAccount" {
					if got := str(o, "metadata", "namespace"); got != namespace {
						t.Errorf("%s %s in namespace %q, want the release's %q", o.kind(), o.name(), got, namespace)
					}
				}
			}
			_, c := deployment(t, objs)
			if !hasArg(c, "--gpu-agent-namespace="+tt.wantNamespace) || !hasArg(c, "--gpu-agent-selector=app.kubernetes.io/name="+agentName) {
				t.Errorf("adapter args do not trust the agents in %s: %v", tt.wantNamespace, c["args"])
			}
			nps := agentPolicies(objs)
			if len(nps) != 1 {
				t.Fatalf("%d gpu-agent NetworkPolicies, want 1", len(nps))
			}
			peer, _ := list(get(list(get(nps[0], "spec", "ingress"))[0].(map[string]any), "from"))[0].(map[string]any)
			want := map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": release, "app.kubernetes.io/instance": release}},
			}
			if diff := cmp.Diff(want, peer); diff != "" {
				t.Errorf("the agent's NetworkPolicy does not admit the adapter's pods from %s (-want +got):\n%s", namespace, diff)
			}
		})
	}

	// With adapter.namespaces, the adapter may read only where the chart
	// grants it: without the chart's agent there is no Role in the agent's
	// namespace (it may not exist), so the adapter looks for no agents.
	out, err := render(t, helm, "", "--set", "adapter.namespaces={team-a}")
	if err != nil {
		t.Fatal(err)
	}
	_, c := deployment(t, decode(t, out))
	if !hasArg(c, "--gpu-agent-selector=") {
		t.Errorf("with adapter.namespaces and no agent namespace it may read, the adapter still looks for agents: %v", c["args"])
	}
}
