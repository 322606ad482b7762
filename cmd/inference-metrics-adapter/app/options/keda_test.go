// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKEDAScalerFlags(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		wantErr string
		want    string // the server config's address, when valid
		// the server config's grants and opt-out, when valid
		wantGrants int
		wantUnauth bool
	}{
		{name: "off by default", want: ""},
		{name: "address alone answers anyone: refused", args: []string{"--keda-scaler-address=:9443"}, wantErr: "--keda-scaler-allow-unauthenticated"},
		{name: "address, unauthenticated accepted", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-allow-unauthenticated"}, want: ":9443", wantUnauth: true},
		{name: "client CA without a rule", args: []string{"--keda-scaler-address=127.0.0.1:9443", "--keda-scaler-client-ca-file=" + ca}, wantErr: "needs --keda-scaler-grant or --keda-scaler-subject-access-review"},
		{name: "client CA with grants", args: []string{"--keda-scaler-address=127.0.0.1:9443", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-grant=user:keda-operator=*", "--keda-scaler-grant=group:team-a=team-a,team-a-dev"}, want: "127.0.0.1:9443", wantGrants: 2},
		{name: "client CA with SubjectAccessReviews", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-subject-access-review"}, want: ":9443"},
		{name: "client CA and unauthenticated", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-grant=user:k=*", "--keda-scaler-allow-unauthenticated"}, wantErr: "cannot go with --keda-scaler-client-ca-file"},
		{name: "grant without client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-grant=user:k=*"}, wantErr: "need --keda-scaler-client-ca-file"},
		{name: "SubjectAccessReview without client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-subject-access-review", "--keda-scaler-allow-unauthenticated"}, wantErr: "need --keda-scaler-client-ca-file"},
		{name: "bad grant", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-grant=keda-operator=*"}, wantErr: "--keda-scaler-grant"},
		{name: "grant of a bad namespace", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-grant=user:k=Team_A"}, wantErr: "not a namespace name"},
		{name: "plaintext alone: refused", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext"}, wantErr: "--keda-scaler-allow-unauthenticated"},
		{name: "plaintext, unauthenticated accepted", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext", "--keda-scaler-allow-unauthenticated"}, want: ":9443", wantUnauth: true},
		{name: "no port", args: []string{"--keda-scaler-address=localhost", "--keda-scaler-allow-unauthenticated"}, wantErr: "must be host:port"},
		{name: "missing client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca + ".missing", "--keda-scaler-grant=user:k=*"}, wantErr: "--keda-scaler-client-ca-file"},
		{name: "plaintext with client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext", "--keda-scaler-client-ca-file=" + ca, "--keda-scaler-grant=user:k=*"}, wantErr: "cannot go with --keda-scaler-plaintext"},
		{name: "plaintext without address", args: []string{"--keda-scaler-plaintext"}, wantErr: "need --keda-scaler-address"},
		{name: "grant without address", args: []string{"--keda-scaler-grant=user:k=*"}, wantErr: "need --keda-scaler-address"},
		{name: "unauthenticated without address", args: []string{"--keda-scaler-allow-unauthenticated"}, wantErr: "need --keda-scaler-address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, fs := parsed(t, tc.args)
			o.Complete(fs)
			err := o.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.KEDAScaler.Address != tc.want {
				t.Errorf("address %q, want %q", cfg.KEDAScaler.Address, tc.want)
			}
			if len(cfg.KEDAScaler.Grants) != tc.wantGrants || cfg.KEDAScaler.AllowUnauthenticated != tc.wantUnauth {
				t.Errorf("grants %v, unauthenticated %v; want %d grants, %v", cfg.KEDAScaler.Grants, cfg.KEDAScaler.AllowUnauthenticated, tc.wantGrants, tc.wantUnauth)
			}
		})
	}
}
