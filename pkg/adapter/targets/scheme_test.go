// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

// TestSchemeAndCredentialSelection: a pod's scheme, TLS server name and
// credential come from its annotations, else from its server's entry in
// --server-config, else http without credentials; bad values are refused
// with a reason naming the annotation.
func TestSchemeAndCredentialSelection(t *testing.T) {
	servers, err := parse.NewServers([]parse.CustomServer{
		{Name: "secure", Queue: parse.Series{Name: "q"}},
		{Name: "tls-only", Queue: parse.Series{Name: "q"}},
		{Name: "plain", Queue: parse.Series{Name: "q"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Servers: servers, ServerScrape: map[string]ScrapeSettings{
		"secure":   {Scheme: SchemeHTTPS, Auth: AuthBearer},
		"tls-only": {Scheme: SchemeHTTPS},
	}}
	port := corev1.ContainerPort{Name: "metrics", ContainerPort: 8443}
	for _, tc := range []struct {
		name        string
		ann         map[string]string
		hostNetwork bool
		wantURL     string
		wantName    string
		wantAuth    scrape.Auth
		wantErr     string
	}{
		{name: "default", wantURL: "http://10.0.0.1:8443/metrics"},
		{name: "https annotation", ann: map[string]string{AnnotationScheme: "https"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod"},
		{name: "explicit http", ann: map[string]string{AnnotationScheme: "http"}, wantURL: "http://10.0.0.1:8443/metrics"},
		{name: "server name annotation", ann: map[string]string{AnnotationScheme: "https", AnnotationTLSServerName: "vllm.ns.svc"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "vllm.ns.svc"},
		{name: "bearer over https", ann: map[string]string{AnnotationScheme: "https", AnnotationScrapeAuth: "bearer"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod", wantAuth: scrape.AuthBearer},
		{name: "host network keeps the flag", ann: map[string]string{AnnotationScheme: "https", AnnotationScrapeAuth: "bearer"}, hostNetwork: true,
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod", wantAuth: scrape.AuthBearer},
		{name: "server config", ann: map[string]string{AnnotationServer: "secure"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod", wantAuth: scrape.AuthBearer},
		{name: "server config, tls only", ann: map[string]string{AnnotationServer: "tls-only"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod"},
		{name: "server config without scrape keys", ann: map[string]string{AnnotationServer: "plain"}, wantURL: "http://10.0.0.1:8443/metrics"},
		{name: "annotation wins over server config", ann: map[string]string{AnnotationServer: "secure", AnnotationScrapeAuth: "none"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10-0-0-1.ns.pod"},
		{name: "http annotation against a bearer server", ann: map[string]string{AnnotationServer: "secure", AnnotationScheme: "http"},
			wantErr: `--server-config server "secure" sets auth: bearer: the bearer token is only sent over https, and the scheme is http (from annotation prometheus.io/scheme="http"`},
		{name: "bearer over http", ann: map[string]string{AnnotationScrapeAuth: "bearer"}, wantErr: "only sent over https"},
		{name: "unknown scheme", ann: map[string]string{AnnotationScheme: "ftp"}, wantErr: `annotation prometheus.io/scheme="ftp": want http or https`},
		{name: "upper-case scheme", ann: map[string]string{AnnotationScheme: "HTTPS"}, wantErr: "want http or https"},
		{name: "unknown auth", ann: map[string]string{AnnotationScheme: "https", AnnotationScrapeAuth: "basic"}, wantErr: "want bearer or none"},
		{name: "wildcard server name", ann: map[string]string{AnnotationScheme: "https", AnnotationTLSServerName: "*.ns.svc"}, wantErr: "not a DNS name"},
		{name: "server name with a newline", ann: map[string]string{AnnotationScheme: "https", AnnotationTLSServerName: "a\nb"}, wantErr: "not a DNS name"},
		{name: "server name too long", ann: map[string]string{AnnotationScheme: "https", AnnotationTLSServerName: strings.Repeat("a.", 200)}, wantErr: "1 to 253 bytes"},
		{name: "IP server name", ann: map[string]string{AnnotationScheme: "https", AnnotationTLSServerName: "10.0.0.1"},
			wantURL: "https://10.0.0.1:8443/metrics", wantName: "10.0.0.1"},
		{name: "server name ignored over http", ann: map[string]string{AnnotationTLSServerName: "vllm.ns.svc"}, wantURL: "http://10.0.0.1:8443/metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPod("p", tc.ann, port)
			p.Spec.HostNetwork = tc.hostNetwork
			got, err := targetFor(p, cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("target %+v, error %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tc.wantURL || got.TLSServerName != tc.wantName || got.Auth != tc.wantAuth || got.HostNetwork != tc.hostNetwork {
				t.Fatalf("target %+v; want URL %q, server name %q, auth %v, host network %v", got, tc.wantURL, tc.wantName, tc.wantAuth, tc.hostNetwork)
			}
		})
	}
}

func TestPodDNSName(t *testing.T) {
	for ip, want := range map[string]string{"10.0.0.5": "10-0-0-5.llm.pod", "fd00::5": "fd00--5.llm.pod"} {
		p := testPod("p", nil)
		p.Namespace, p.Status.PodIP = "llm", ip
		if got := PodDNSName(p); got != want {
			t.Errorf("PodDNSName(%s) = %q, want %q", ip, got, want)
		}
	}
}
