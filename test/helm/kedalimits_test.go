// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import "testing"

// TestKEDAScalerLimitValues: the chart passes kedaScaler.maxConnections and
// kedaScaler.maxStreams as --keda-scaler-max-connections and
// --keda-scaler-max-streams, the binary's defaults unless set, and its
// schema refuses a limit under 1.
func TestKEDAScalerLimitValues(t *testing.T) {
	helm := helmBinary(t)
	on := []string{"--set", "kedaScaler.enabled=true", "--set", "kedaScaler.clientCASecret=keda-client"}
	tests := []struct {
		name string
		set  []string
		want []string
	}{
		{name: "defaults", want: []string{"--keda-scaler-max-connections=64", "--keda-scaler-max-streams=256"}},
		{name: "set", set: []string{"--set", "kedaScaler.maxConnections=8", "--set", "kedaScaler.maxStreams=32"},
			want: []string{"--keda-scaler-max-connections=8", "--keda-scaler-max-streams=32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, helm, "", append(on, tt.set...)...)
			if err != nil {
				t.Fatal(err)
			}
			_, c := deployment(t, decode(t, out))
			for _, a := range tt.want {
				if !hasArg(c, a) {
					t.Errorf("args lack %s: %v", a, c["args"])
				}
			}
		})
	}
	for _, bad := range []string{"kedaScaler.maxConnections=0", "kedaScaler.maxStreams=0"} {
		if _, err := render(t, helm, "", append(on, "--set", bad)...); err == nil {
			t.Errorf("%s rendered, want the schema to refuse it", bad)
		}
	}
}
