// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/dialect"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// ScrapeTLSOptions are the flags of HTTPS scraping: how targets'
// certificates are verified and the credentials the adapter presents.
// Which targets are scraped over HTTPS, and which get the token, the
// targets say (their annotations, or their server's entry in
// --server-config).
type ScrapeTLSOptions struct {
	CAFile             string
	InsecureSkipVerify bool
	BearerTokenFile    string
	TokenToHostNetwork bool
	ClientCertFile     string
	ClientKeyFile      string
	// MaxKeptConnections bounds the HTTPS scrape connections kept for the
	// next scrape, over all targets (scrape.Config.MaxKeptTLSConnections).
	MaxKeptConnections int
}

func (s *ScrapeTLSOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.CAFile, "scrape-ca-file", s.CAFile, "PEM bundle of the CAs that HTTPS targets' certificates (prometheus.io/scheme: https) must chain to, re-read when it changes (looked at every 5s at most, and after a failed verification). Empty means the system's roots.")
	fs.BoolVar(&s.InsecureSkipVerify, "scrape-insecure-skip-verify", s.InsecureSkipVerify, "Accept any certificate from HTTPS targets: their pages are encrypted but not authenticated, and the bearer token is never sent. Logged as a warning at start; cannot go with --scrape-ca-file.")
	fs.StringVar(&s.BearerTokenFile, "scrape-bearer-token-file", s.BearerTokenFile, "File holding a bearer token (e.g. a projected service-account token), re-read when it changes, sent as Authorization: Bearer to HTTPS targets that ask for it (inference-metrics-adapter/scrape-auth: bearer, or auth: bearer in --server-config), never over plain HTTP, never on a redirect (not followed).")
	fs.BoolVar(&s.TokenToHostNetwork, "scrape-token-to-host-network", s.TokenToHostNetwork, "Also send the bearer token to host-network pods that ask for it. Off: such a pod's scrape fails, since any process of its node could listen on its address.")
	fs.StringVar(&s.ClientCertFile, "scrape-client-cert-file", s.ClientCertFile, "PEM client certificate presented to HTTPS targets that ask for one (mTLS), reloaded when it changes. Needs --scrape-client-key-file.")
	fs.StringVar(&s.ClientKeyFile, "scrape-client-key-file", s.ClientKeyFile, "PEM private key of --scrape-client-cert-file, reloaded when it changes.")
	fs.IntVar(&s.MaxKeptConnections, "scrape-max-kept-tls-connections", s.MaxKeptConnections, "Most HTTPS scrape connections kept open for the next scrape, over all targets (one per pod at most), about 80 KiB each: the start-up memory check counts them, whether or not any pod is scraped over HTTPS (any pod can ask for it with prometheus.io/scheme: https). A pod past it has its connection closed after each scrape, so each of its scrapes pays a TLS handshake (a resumed session where the server allows: several times the CPU of a scrape on a kept connection). 0 keeps none. Plain HTTP connections are not bounded.")
}

// validate lists every problem: a certificate without its key (or a key
// without its certificate), files that cannot be read or parsed,
// contradictory settings and a negative bound of kept connections.
func (s *ScrapeTLSOptions) validate() []error {
	var errs []error
	if s.InsecureSkipVerify && s.CAFile != "" {
		errs = append(errs, fmt.Errorf("--scrape-insecure-skip-verify cannot go with --scrape-ca-file, which it would ignore"))
	}
	if s.TokenToHostNetwork && s.BearerTokenFile == "" {
		errs = append(errs, fmt.Errorf("--scrape-token-to-host-network needs --scrape-bearer-token-file"))
	}
	if s.MaxKeptConnections < 0 {
		errs = append(errs, fmt.Errorf("--scrape-max-kept-tls-connections must not be negative, got %d", s.MaxKeptConnections))
	}
	if s.ClientCertFile != "" && s.ClientKeyFile == "" {
		errs = append(errs, fmt.Errorf("--scrape-client-cert-file needs --scrape-client-key-file"))
	}
	if s.ClientKeyFile != "" && s.ClientCertFile == "" {
		errs = append(errs, fmt.Errorf("--scrape-client-key-file needs --scrape-client-cert-file"))
	}
	for _, c := range []struct {
		flag string
		cfg  scrape.TLSConfig
	}{
		{"--scrape-ca-file", scrape.TLSConfig{CAFile: s.CAFile}},
		{"--scrape-bearer-token-file", scrape.TLSConfig{BearerTokenFile: s.BearerTokenFile}},
	} {
		for _, err := range c.cfg.Check() {
			errs = append(errs, fmt.Errorf("%s: %w", c.flag, err))
		}
	}
	if s.ClientCertFile != "" && s.ClientKeyFile != "" {
		for _, err := range (scrape.TLSConfig{ClientCertFile: s.ClientCertFile, ClientKeyFile: s.ClientKeyFile}).Check() {
			errs = append(errs, fmt.Errorf("--scrape-client-cert-file, --scrape-client-key-file: %w", err))
		}
	}
	return errs
}

// config is the scraper's TLSConfig.
func (s *ScrapeTLSOptions) config() scrape.TLSConfig {
	return scrape.TLSConfig{
		CAFile:             s.CAFile,
		InsecureSkipVerify: s.InsecureSkipVerify,
		ClientCertFile:     s.ClientCertFile,
		ClientKeyFile:      s.ClientKeyFile,
		BearerTokenFile:    s.BearerTokenFile,
		TokenToHostNetwork: s.TokenToHostNetwork,
	}
}

// serverScrapeSettings turns --server-config's scheme and auth into the
// tracker's.
func serverScrapeSettings(in map[string]dialect.Scrape) map[string]targets.ScrapeSettings {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]targets.ScrapeSettings, len(in))
	for name, s := range in {
		out[name] = targets.ScrapeSettings{Scheme: s.Scheme, Auth: s.Auth}
	}
	return out
}
