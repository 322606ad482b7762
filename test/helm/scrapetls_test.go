// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestScrapeTLSValues: each scrapeTLS mode passes its flag and mounts its
// file (CA from a ConfigMap or a Secret, a projected service-account
// token, a client certificate from a Secret), the token gets a ClusterRole
// of get on /metrics alone, and all of it is off by default.
func TestScrapeTLSValues(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name       string
		set        []string
		wantArgs   []string
		wantVols   []string
		wantReader bool
		wantErr    string
	}{
		{name: "off"},
		{name: "CA from a ConfigMap", set: []string{"scrapeTLS.caConfigMap=trust-bundle", "scrapeTLS.caKey=root-certs.pem"},
			wantArgs: []string{"--scrape-ca-file=/etc/inference-metrics-adapter/scrape-ca/ca.crt"}, wantVols: []string{"scrape-ca"}},
		{name: "CA from a Secret", set: []string{"scrapeTLS.caSecret=metrics-ca"},
			wantArgs: []string{"--scrape-ca-file=/etc/inference-metrics-adapter/scrape-ca/ca.crt"}, wantVols: []string{"scrape-ca"}},
		{name: "token", set: []string{"scrapeTLS.bearerToken.enabled=true", "scrapeTLS.bearerToken.toHostNetwork=true"},
			wantArgs: []string{"--scrape-bearer-token-file=/var/run/secrets/inference-metrics-adapter/scrape-token/token", "--scrape-token-to-host-network"},
			wantVols: []string{"scrape-token"}, wantReader: true},
		{name: "token without the reader role", set: []string{"scrapeTLS.bearerToken.enabled=true", "scrapeTLS.bearerToken.metricsReader=false"},
			wantArgs: []string{"--scrape-bearer-token-file=/var/run/secrets/inference-metrics-adapter/scrape-token/token"}, wantVols: []string{"scrape-token"}},
		{name: "client certificate", set: []string{"scrapeTLS.clientCertSecret=adapter-client"},
			wantArgs: []string{"--scrape-client-cert-file=/etc/inference-metrics-adapter/scrape-client/tls.crt", "--scrape-client-key-file=/etc/inference-metrics-adapter/scrape-client/tls.key"},
			wantVols: []string{"scrape-client"}},
		{name: "insecure", set: []string{"scrapeTLS.insecureSkipVerify=true"}, wantArgs: []string{"--scrape-insecure-skip-verify"}},
		{name: "insecure with a CA", set: []string{"scrapeTLS.insecureSkipVerify=true", "scrapeTLS.caSecret=x"}, wantErr: "insecureSkipVerify cannot go with"},
		{name: "two CAs", set: []string{"scrapeTLS.caSecret=x", "scrapeTLS.caConfigMap=y"}, wantErr: "not both"},
		{name: "unknown key", set: []string{"scrapeTLS.caFile=x"}, wantErr: "caFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			for _, s := range tc.set {
				extra = append(extra, "--set", s)
			}
			out, err := render(t, helm, "", extra...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("render: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			pod, c := deployment(t, objs)
			var args []string
			for _, a := range c["args"].([]any) {
				if s, _ := a.(string); strings.HasPrefix(s, "--scrape-ca") || strings.HasPrefix(s, "--scrape-insecure") || strings.HasPrefix(s, "--scrape-bearer") || strings.HasPrefix(s, "--scrape-token") || strings.HasPrefix(s, "--scrape-client") {
					args = append(args, s)
				}
			}
			if !slices.Equal(args, tc.wantArgs) {
				t.Errorf("scrape TLS args %q, want %q", args, tc.wantArgs)
			}
			var vols []string
			for _, v := range pod["volumes"].([]any) {
				if name, _ := v.(map[string]any)["name"].(string); strings.HasPrefix(name, "scrape-") {
					vols = append(vols, name)
				}
			}
			if !slices.Equal(vols, tc.wantVols) {
				t.Errorf("scrape volumes %q, want %q", vols, tc.wantVols)
			}
			var mounts []string
			for _, m := range c["volumeMounts"].([]any) {
				if name, _ := m.(map[string]any)["name"].(string); strings.HasPrefix(name, "scrape-") {
					mounts = append(mounts, name)
				}
			}
			if !slices.Equal(mounts, tc.wantVols) {
				t.Errorf("scrape mounts %q, want %q", mounts, tc.wantVols)
			}
			var reader []object
			for _, o := range objs {
				if strings.HasSuffix(str(o, "metadata", "name"), "-metrics-reader") {
					reader = append(reader, o)
				}
			}
			if !tc.wantReader {
				if len(reader) != 0 {
					t.Errorf("%d metrics-reader objects, want none", len(reader))
				}
				return
			}
			if len(reader) != 2 {
				t.Fatalf("%d metrics-reader objects, want a ClusterRole and its binding", len(reader))
			}
			for _, o := range reader {
				if o.kind() != "ClusterRole" {
					continue
				}
				rules, _ := json.Marshal(o["rules"])
				if string(rules) != `[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]` {
					t.Errorf("metrics-reader rules %s, want get on /metrics alone", rules)
				}
			}
		})
	}
}
