package helm

import (
	"strings"
	"testing"
)

// TestKEDAScalerValues: kedaScaler.enabled adds the scaler's flag, a
// container port and a Service port (gRPC); clientCASecret mounts that
// Secret's ca.crt and passes it; plaintext passes its flag; off by default,
// none of it is rendered.
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
		{name: "enabled", set: []string{"kedaScaler.enabled=true"}, wantArgs: []string{"--keda-scaler-address=:9443"}, wantPort: 9443, forbidArg: "--keda-scaler-plaintext"},
		{name: "client CA", set: []string{"kedaScaler.enabled=true", "kedaScaler.port=9555", "kedaScaler.clientCASecret=keda-client"},
			wantArgs: []string{"--keda-scaler-address=:9555", "--keda-scaler-client-ca-file=/etc/inference-metrics-adapter/keda-client-ca/ca.crt"}, wantCA: true, wantPort: 9555},
		{name: "plaintext", set: []string{"kedaScaler.enabled=true", "kedaScaler.plaintext=true"}, wantArgs: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext"}, wantPort: 9443},
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
