// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKEDAScalerValues: kedaScaler.enabled adds the scaler's flag, a
// container port and a Service port (gRPC); clientCASecret mounts that
// Secret's ca.crt and passes it with the grants (user:keda-operator=* by
// default) and subjectAccessReview; allowUnauthenticated and plaintext pass
// their flags; off by default, none of it is rendered.
func TestKEDAScalerValues(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name      string
		set       []string
		wantArgs  []string
		wantNone  bool
		wantCA    bool
		wantPort  int
		forbidArg string
	}{
		{name: "off by default", wantNone: true},
		{name: "enabled, unauthenticated on purpose", set: []string{"kedaScaler.enabled=true", "kedaScaler.allowUnauthenticated=true"}, wantArgs: []string{"--keda-scaler-address=:9443", "--keda-scaler-allow-unauthenticated"}, wantPort: 9443, forbidArg: "--keda-scaler-plaintext"},
		{name: "client CA", set: []string{"kedaScaler.enabled=true", "kedaScaler.port=9555", "kedaScaler.clientCASecret=keda-client"},
			wantArgs: []string{"--keda-scaler-address=:9555", "--keda-scaler-client-ca-file=/etc/inference-metrics-adapter/keda-client-ca/ca.crt", "--keda-scaler-grant=user:keda-operator=*"}, wantCA: true, wantPort: 9555, forbidArg: "--keda-scaler-allow-unauthenticated"},
		{name: "client CA, grants and reviews", set: []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=keda-client", "kedaScaler.grants={user:keda=*,group:team-a=team-a}", "kedaScaler.subjectAccessReview=true"},
			wantArgs: []string{"--keda-scaler-grant=user:keda=*", "--keda-scaler-grant=group:team-a=team-a", "--keda-scaler-subject-access-review"}, wantCA: true, wantPort: 9443, forbidArg: "--keda-scaler-grant=user:keda-operator=*"},
		{name: "plaintext", set: []string{"kedaScaler.enabled=true", "kedaScaler.plaintext=true", "kedaScaler.allowUnauthenticated=true"}, wantArgs: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext", "--keda-scaler-allow-unauthenticated"}, wantPort: 9443},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra []string
			for _, s := range tt.set {
				extra = append(extra, "--set", s)
			}
			out, err := render(t, helm, "", extra...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			pod, c := deployment(t, objs)
			if tt.wantNone {
				if strings.Contains(out, "keda") {
					t.Errorf("the default render mentions keda")
				}
				return
			}
			for _, a := range tt.wantArgs {
				if !hasArg(c, a) {
					t.Errorf("args lack %s: %v", a, c["args"])
				}
			}
			if tt.forbidArg != "" && hasArg(c, tt.forbidArg) {
				t.Errorf("args have %s: %v", tt.forbidArg, c["args"])
			}
			var containerPort bool
			for _, p := range list(c["ports"]) {
				m, _ := p.(map[string]any)
				if m["name"] == "keda-scaler" && m["containerPort"] == float64(tt.wantPort) {
					containerPort = true
				}
			}
			if !containerPort {
				t.Errorf("container ports %v lack keda-scaler %d", c["ports"], tt.wantPort)
			}
			var servicePort bool
			for _, s := range byKind(objs, "Service") {
				for _, p := range list(get(s, "spec", "ports")) {
					m, _ := p.(map[string]any)
					if m["name"] == "keda-scaler" && m["port"] == float64(tt.wantPort) && m["targetPort"] == "keda-scaler" && m["appProtocol"] == "grpc" {
						servicePort = true
					}
				}
			}
			if !servicePort {
				t.Errorf("no Service has the port keda-scaler %d", tt.wantPort)
			}
			var volume, mount bool
			for _, v := range list(pod["volumes"]) {
				m, _ := v.(map[string]any)
				volume = volume || (m["name"] == "keda-client-ca" && str(m, "secret", "secretName") == "keda-client")
			}
			for _, v := range list(c["volumeMounts"]) {
				m, _ := v.(map[string]any)
				mount = mount || (m["name"] == "keda-client-ca" && m["mountPath"] == "/etc/inference-metrics-adapter/keda-client-ca")
			}
			if volume != tt.wantCA || mount != tt.wantCA {
				t.Errorf("client CA volume %v, mount %v; want %v", volume, mount, tt.wantCA)
			}
		})
	}
}

// TestKEDAScalerNeedsClientAuth: the chart does not render a KEDA port that
// would answer anyone unless that is asked for on purpose, nor settings the
// adapter would refuse at start.
func TestKEDAScalerNeedsClientAuth(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{name: "neither client CA nor opt-out", set: []string{"kedaScaler.enabled=true"}, want: "kedaScaler.enabled needs kedaScaler.clientCASecret"},
		{name: "plaintext without opt-out", set: []string{"kedaScaler.enabled=true", "kedaScaler.plaintext=true"}, want: "kedaScaler.allowUnauthenticated=true"},
		{name: "client CA and opt-out", set: []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=c", "kedaScaler.allowUnauthenticated=true"}, want: "cannot go with kedaScaler.clientCASecret"},
		{name: "client CA and plaintext", set: []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=c", "kedaScaler.plaintext=true"}, want: "cannot go with kedaScaler.plaintext"},
		{name: "client CA without a rule", set: []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=c", "kedaScaler.grants=null"}, want: "needs kedaScaler.grants or kedaScaler.subjectAccessReview"},
		{name: "bad grant", set: []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=c", "kedaScaler.grants={keda-operator=*}"}, want: "grants"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra []string
			for _, s := range tt.set {
				extra = append(extra, "--set", s)
			}
			_, err := render(t, helm, "", extra...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render error %v; want one containing %q", err, tt.want)
			}
		})
	}
}

// TestKEDAScalerNetworkPolicy: with kedaScaler.enabled the chart admits
// only KEDA's operator pods (namespace keda, app: keda-operator, as KEDA's
// own chart labels them, or the values' namespace and labels) and extraFrom
// to the scaler's port; without the API port's own policy, that port stays
// open to all, as without this one.
func TestKEDAScalerNetworkPolicy(t *testing.T) {
	helm := helmBinary(t)
	base := []string{"kedaScaler.enabled=true", "kedaScaler.clientCASecret=keda-client"}
	tests := []struct {
		name        string
		set         []string
		wantNone    bool
		wantNS      string
		wantLabels  map[string]any
		wantExtra   int  // extraFrom peers
		wantAPIOpen bool // a rule admitting every peer to the API port
	}{
		{name: "KEDA off", set: []string{"kedaScaler.enabled=false"}, wantNone: true},
		{name: "defaults", wantNS: "keda", wantLabels: map[string]any{"app": "keda-operator"}},
		{name: "KEDA elsewhere", set: []string{"kedaScaler.networkPolicy.kedaNamespace=autoscaling", "kedaScaler.networkPolicy.kedaPodLabels.app=my-keda",
			"kedaScaler.networkPolicy.extraFrom[0].podSelector.matchLabels.app=probe"}, wantNS: "autoscaling", wantLabels: map[string]any{"app": "my-keda"}, wantExtra: 1},
		{name: "without the API port's policy", set: []string{"apiNetworkPolicy.enabled=false"}, wantNS: "keda", wantLabels: map[string]any{"app": "keda-operator"}, wantAPIOpen: true},
		{name: "policy off", set: []string{"kedaScaler.networkPolicy.enabled=false"}, wantNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra []string
			for _, s := range append(append([]string{}, base...), tt.set...) {
				extra = append(extra, "--set", s)
			}
			out, err := render(t, helm, "", extra...)
			if err != nil {
				t.Fatal(err)
			}
			var np object
			for _, o := range byKind(decode(t, out), "NetworkPolicy") {
				switch o.name() {
				case release + "-keda-scaler":
					np = o
				case release + "-api":
					if tt.wantNone {
						break // without this policy, the API port's opens the scaler's port to all
					}
					// The API port's policy leaves the scaler's port to this one.
					for _, r := range list(get(o, "spec", "ingress")) {
						m, _ := r.(map[string]any)
						for _, p := range list(m["ports"]) {
							if pm, _ := p.(map[string]any); pm["port"] == float64(9443) {
								t.Errorf("the API port's policy names the scaler's port: %v", r)
							}
						}
					}
				}
			}
			if tt.wantNone {
				if np != nil {
					t.Errorf("rendered %v", np)
				}
				return
			}
			if np == nil {
				t.Fatalf("no NetworkPolicy %s-keda-scaler", release)
			}
			if got := get(np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name"); got != "inference-metrics-adapter" {
				t.Errorf("podSelector picks %v, want the adapter's pods", get(np, "spec", "podSelector"))
			}
			rules := list(get(np, "spec", "ingress"))
			if len(rules) == 0 {
				t.Fatal("no ingress rule")
			}
			first, _ := rules[0].(map[string]any)
			from := list(first["from"])
			ports := list(first["ports"])
			if len(from) != 1+tt.wantExtra || len(ports) != 1 {
				t.Fatalf("first rule %v: want %d peers and the scaler's port", first, 1+tt.wantExtra)
			}
			peer, _ := from[0].(map[string]any)
			if got := str(peer, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"); got != tt.wantNS {
				t.Errorf("namespace %q, want %q", got, tt.wantNS)
			}
			if got, _ := get(peer, "podSelector", "matchLabels").(map[string]any); !cmp.Equal(got, tt.wantLabels) {
				t.Errorf("pod labels %v, want %v", got, tt.wantLabels)
			}
			if p, _ := ports[0].(map[string]any); p["port"] != float64(9443) {
				t.Errorf("port %v, want 9443", ports[0])
			}
			apiOpen := false
			for _, r := range rules[1:] {
				m, _ := r.(map[string]any)
				for _, p := range list(m["ports"]) {
					pm, _ := p.(map[string]any)
					apiOpen = apiOpen || (m["from"] == nil && pm["port"] == float64(6443))
				}
			}
			if apiOpen != tt.wantAPIOpen || len(rules) > 2 {
				t.Errorf("rules %v: API port open to all %v, want %v", rules, apiOpen, tt.wantAPIOpen)
			}
		})
	}
}
