// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// gracefulStopTimeout is how long Serve lets calls end once its context is
// done. The server's bounds are in limits.go.
const gracefulStopTimeout = 5 * time.Second

// CertKeySource gives the current serving certificate and key, PEM
// encoded (the API server's dynamiccertificates.CertKeyContentProvider
// implements it).
type CertKeySource interface {
	CurrentCertKeyContent() (cert []byte, key []byte)
}

// ServerTLS returns the TLS configuration of the scaler's port: the
// certificate certs currently holds (read at each handshake, so that a
// renewed API server certificate is used without a restart), and, with
// clientCAFile set, client certificates required and verified against it.
func ServerTLS(certs CertKeySource, clientCAFile string) (*tls.Config, error) {
	cc := &certCache{src: certs}
	if _, err := cc.get(nil); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cc.get}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the client CA file %s holds no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// certCache parses the source's certificate again only when it changes.
type certCache struct {
	src CertKeySource

	mu        sync.Mutex
	cert, key []byte
	parsed    *tls.Certificate
}

func (c *certCache) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, key := c.src.CurrentCertKeyContent()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parsed != nil && bytes.Equal(cert, c.cert) && bytes.Equal(key, c.key) {
		return c.parsed, nil
	}
	if len(cert) == 0 || len(key) == 0 {
		return nil, errors.New("no serving certificate")
	}
	kp, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("parsing the serving certificate: %w", err)
	}
	c.cert, c.key, c.parsed = cert, key, &kp
	return c.parsed, nil
}

// Server is the scaler on its own gRPC port.
type Server struct {
	lis  net.Listener
	grpc *grpc.Server
}

// Listen opens address and builds the gRPC server for scaler: TLS with
// tlsConfig, plaintext when it is nil, within DefaultLimits unless options
// say otherwise. Requests are counted in reg by method and code, and what
// the limits refused by limit. Serve serves it.
func Listen(address string, tlsConfig *tls.Config, scaler *Scaler, reg prometheus.Registerer, options ...Option) (*Server, error) {
	limits := DefaultLimits()
	for _, o := range options {
		o(&limits)
	}
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("the KEDA scaler's limits: %w", err)
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "inference_metrics_adapter",
		Name:      "keda_scaler_requests_total",
		Help:      "Calls to the KEDA external scaler, by method and gRPC code (NotFound: no measured value).",
	}, []string{"method", "code"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "inference_metrics_adapter",
		Name:      "keda_scaler_refused_total",
		Help:      "Connections and calls the KEDA external scaler's port refused at its limits (limit: connections, streams).",
	}, []string{"limit"})
	for _, c := range []prometheus.Collector{requests, refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the KEDA scaler metrics: %w", err)
		}
	}
	calls := newCallLimiter(limits.MaxStreams, refused.WithLabelValues("streams"))
	opts := append(limits.serverOptions(calls),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			resp, err := handler(ctx, req)
			requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
			return err
		}),
	)
	if tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening for the KEDA scaler on %s: %w", address, err)
	}
	lis = newConnLimiter(lis, limits.MaxConnections, refused.WithLabelValues("connections"))
	g := grpc.NewServer(opts...)
	scaler.Register(g)
	return &Server{lis: lis, grpc: g}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Serve serves until ctx is done, then stops: gracefully for a few
// seconds, then closing open streams.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(s.lis) }()
	klog.InfoS("Serving the KEDA external scaler", "address", s.lis.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serving the KEDA scaler: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	t := time.NewTimer(gracefulStopTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.grpc.Stop() // ends open StreamIsActive streams
		<-stopped
	}
	if err := <-errc; err != nil { // nil once Stop or GracefulStop ran
		return fmt.Errorf("serving the KEDA scaler: %w", err)
	}
	return nil
}
