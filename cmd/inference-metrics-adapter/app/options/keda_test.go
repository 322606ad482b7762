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
	}{
		{name: "off by default", want: ""},
		{name: "address", args: []string{"--keda-scaler-address=:9443"}, want: ":9443"},
		{name: "address with client CA", args: []string{"--keda-scaler-address=127.0.0.1:9443", "--keda-scaler-client-ca-file=" + ca}, want: "127.0.0.1:9443"},
		{name: "plaintext", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext"}, want: ":9443"},
		{name: "no port", args: []string{"--keda-scaler-address=localhost"}, wantErr: "must be host:port"},
		{name: "missing client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-client-ca-file=" + ca + ".missing"}, wantErr: "--keda-scaler-client-ca-file"},
		{name: "plaintext with client CA", args: []string{"--keda-scaler-address=:9443", "--keda-scaler-plaintext", "--keda-scaler-client-ca-file=" + ca}, wantErr: "cannot go with --keda-scaler-plaintext"},
		{name: "plaintext without address", args: []string{"--keda-scaler-plaintext"}, wantErr: "need --keda-scaler-address"},
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
		})
	}
}
