// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// StandInConfig says how a MetricsStandIn serves its page.
type StandInConfig struct {
	// Addr is the ip:port it listens on (a loopback address).
	Addr string
	// Page is the body of every 200 answer.
	Page []byte
	// Cert, when set, makes it serve TLS with this certificate; else plain HTTP.
	Cert *KeyPair
	// ClientCA, when set (with Cert), makes the handshake require a client
	// certificate that chains to it (a mesh's STRICT mTLS).
	ClientCA *CA
	// Reviewer, when set, makes it serve the page only to a bearer token
	// that the control plane authenticates (TokenReview) and authorizes for
	// get on the non-resource URL /metrics (SubjectAccessReview), as
	// kube-rbac-proxy does: 401 without an authenticated token, 403 when
	// the token's user may not get /metrics. It needs the right to create
	// both reviews (system:auth-delegator, or the admin's client).
	Reviewer kubernetes.Interface
}

// MetricsStandIn is a model server's /metrics page served by the test
// itself on a loopback address, over HTTP or TLS, optionally behind a
// client certificate or a token. It records every Authorization header it
// is sent, the status of every answer and the server's errors (failed
// handshakes), so that a test can check who got what.
type MetricsStandIn struct {
	cfg  StandInConfig
	srv  *http.Server
	addr string

	mu       sync.Mutex
	auths    []string
	statuses map[int]int
	errs     []string
}

// StartMetricsStandIn listens on cfg.Addr and serves until Close.
func StartMetricsStandIn(cfg StandInConfig) (*MetricsStandIn, error) {
	if cfg.ClientCA != nil && cfg.Cert == nil {
		return nil, errors.New("metrics stand-in: a client CA needs a serving certificate")
	}
	s := &MetricsStandIn{cfg: cfg, statuses: map[int]int{}}
	s.srv = &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler:           http.HandlerFunc(s.serve),
		ErrorLog:          log.New(errorRecorder{s}, "", 0),
	}
	if cfg.Cert != nil {
		pair, err := tls.X509KeyPair(cfg.Cert.CertPEM, cfg.Cert.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("metrics stand-in %s: load certificate: %w", cfg.Addr, err)
		}
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if cfg.ClientCA != nil {
			pool := x509.NewCertPool()
			pool.AddCert(cfg.ClientCA.Cert)
			s.srv.TLSConfig.ClientCAs = pool
			s.srv.TLSConfig.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics stand-in: listen on %s: %w", cfg.Addr, err)
	}
	s.addr = l.Addr().String()
	if s.srv.TLSConfig != nil {
		l = tls.NewListener(l, s.srv.TLSConfig)
	}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Addr is the address it listens on (cfg.Addr with its port chosen when
// that was 0).
func (s *MetricsStandIn) Addr() string { return s.addr }

// Scheme is https when the stand-in serves TLS, else http.
func (s *MetricsStandIn) Scheme() string {
	if s.cfg.Cert != nil {
		return "https"
	}
	return "http"
}

func (s *MetricsStandIn) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	s.mu.Lock()
	if auth != "" {
		s.auths = append(s.auths, auth)
	}
	s.mu.Unlock()
	status, why := http.StatusOK, ""
	switch {
	case r.URL.Path != "/metrics":
		status, why = http.StatusNotFound, "no page at "+r.URL.Path
	case s.cfg.Reviewer != nil:
		status, why = s.review(r.Context(), auth)
	}
	s.mu.Lock()
	s.statuses[status]++
	s.mu.Unlock()
	if status != http.StatusOK {
		http.Error(w, why, status)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write(s.cfg.Page)
}

// review checks a bearer token as kube-rbac-proxy does: TokenReview, then
// a SubjectAccessReview of get on /metrics for the token's user.
func (s *MetricsStandIn) review(ctx context.Context, auth string) (int, string) {
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, "no bearer token"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr, err := s.cfg.Reviewer.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, "token review: " + err.Error()
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "token not authenticated: " + tr.Status.Error
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := s.cfg.Reviewer.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, "subject access review: " + err.Error()
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("%s may not get /metrics", u.Username)
	}
	return http.StatusOK, ""
}

// Authorizations returns every Authorization header sent to it, in order.
func (s *MetricsStandIn) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// Answers returns how many answers it gave, by HTTP status.
func (s *MetricsStandIn) Answers() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.statuses))
	for k, v := range s.statuses {
		out[k] = v
	}
	return out
}

// Errors returns what the server logged: failed TLS handshakes, say.
func (s *MetricsStandIn) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// Close stops serving at once.
func (s *MetricsStandIn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	return errors.Join(err, s.srv.Close())
}

// errorRecorder keeps the stand-in's server log lines.
type errorRecorder struct{ s *MetricsStandIn }

func (e errorRecorder) Write(p []byte) (int, error) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if len(e.s.errs) < 1000 {
		e.s.errs = append(e.s.errs, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// StandInPodImage is the image of CreateRunningPod's pods: one the kubelet
// stand-in does not run, so the pod's page is the caller's.
const StandInPodImage = "metrics-stand-in"

// CreateRunningPod creates pod name in ns with annotations and one
// container whose port "metrics" is port, and reports it Running and Ready
// at ip (ReportRunning), as the kubelet would a pod it started; the caller
// serves its page there (StartMetricsStandIn). The pod goes with ns.
func CreateRunningPod(ctx context.Context, c kubernetes.Interface, ns, name, ip string, port int32, annotations map[string]string) (*corev1.Pod, error) {
	automount := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &automount,
			Containers: []corev1.Container{{
				Name:  "server",
				Image: StandInPodImage,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: port}},
			}},
		},
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", ns, name, err)
	}
	return ReportRunning(ctx, c, created, ip)
}

// PodDNSName is the name the adapter verifies an https pod's certificate
// for when the pod does not set inference-metrics-adapter/tls-server-name:
// <ip with dashes>.<namespace>.pod.
func PodDNSName(ip, ns string) string {
	return strings.ReplaceAll(ip, ".", "-") + "." + ns + ".pod"
}

// MetricsReaderRole names the ClusterRole CreateMetricsReader binds: get on
// the non-resource URL /metrics, the RBAC kube-rbac-proxy checks.
const MetricsReaderRole = "e2e-metrics-reader"

// ServiceAccountToken creates ServiceAccount name in ns, binds it to the
// ClusterRole MetricsReaderRole (created if missing) when bind is set, and
// returns a token for it from the TokenRequest API (an hour). The
// ClusterRoleBinding, named after ns and name, is returned for the caller
// to delete (DeleteClusterRBAC); empty when bind is not set.
func ServiceAccountToken(ctx context.Context, c kubernetes.Interface, ns, name string, bind bool) (token, binding string, err error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("create ServiceAccount %s/%s: %w", ns, name, err)
	}
	if bind {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderRole},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", fmt.Errorf("create ClusterRole %s: %w", MetricsReaderRole, err)
		}
		binding = ns + "-" + name
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: binding},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			return "", "", fmt.Errorf("create ClusterRoleBinding %s: %w", binding, err)
		}
	}
	expiry := int64(3600)
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", binding, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, binding, nil
}

// DeleteClusterRBAC deletes the ClusterRoleBinding binding (when not
// empty) and the ClusterRole MetricsReaderRole, each if present.
func DeleteClusterRBAC(ctx context.Context, c kubernetes.Interface, binding string) error {
	var errs []error
	if binding != "" {
		if err := c.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete ClusterRoleBinding %s: %w", binding, err))
		}
	}
	if err := c.RbacV1().ClusterRoles().Delete(ctx, MetricsReaderRole, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete ClusterRole %s: %w", MetricsReaderRole, err))
	}
	return errors.Join(errs...)
}

// ServeCustomMetrics points the custom.metrics.k8s.io APIServices at a (an
// adapter started with SkipCustomMetrics, so that it registered none of
// its own) instead of their current backend, waits until they are
// Available again, and returns the function that points them back, for a
// test that needs the metrics API served by an adapter with other flags.
// The suite's tests that run meanwhile get a's answers: call it only from
// a test that does not run in parallel. The Available condition may still
// be the one the old backend earned when it returns, and the aggregator
// switches a moment later: a caller first waits for an answer that only a
// can give.
func (a *Adapter) ServeCustomMetrics(ctx context.Context) (restore func(context.Context) error, err error) {
	if !a.cfg.SkipCustomMetrics {
		return nil, errors.New("adapter: ServeCustomMetrics needs an adapter started with SkipCustomMetrics")
	}
	type backend struct {
		svc  map[string]any
		ca   string
		name string
	}
	var old []backend
	restore = func(ctx context.Context) error {
		var errs []error
		for _, b := range old {
			errs = append(errs, a.pointAPIService(ctx, b.name, b.svc, b.ca))
		}
		return errors.Join(errs...)
	}
	for _, v := range CustomMetricsVersions() {
		name := v + "." + CustomMetricsGroup
		obj, err := a.cp.Dynamic.Resource(apiServiceGVR()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("adapter: get APIService %s: %w", name, err), restore(ctx))
		}
		svc, _, _ := unstructured.NestedMap(obj.Object, "spec", "service")
		ca, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
		old = append(old, backend{svc: svc, ca: ca, name: name})
		mine := map[string]any{"namespace": a.cfg.Namespace, "name": a.cfg.Service, "port": int64(a.Port)}
		if err := a.pointAPIService(ctx, name, mine, base64.StdEncoding.EncodeToString(a.CA.CertPEM)); err != nil {
			return nil, errors.Join(err, restore(ctx))
		}
	}
	return restore, nil
}

// pointAPIService sets APIService name's service and caBundle and waits
// until it is Available.
func (a *Adapter) pointAPIService(ctx context.Context, name string, svc map[string]any, caBundle string) error {
	res := a.cp.Dynamic.Resource(apiServiceGVR())
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := unstructured.SetNestedMap(obj.Object, svc, "spec", "service"); err != nil {
			return false, err
		}
		if err := unstructured.SetNestedField(obj.Object, caBundle, "spec", "caBundle"); err != nil {
			return false, err
		}
		if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("adapter: point APIService %s at %v: %w", name, svc, err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("adapter: APIService %s not Available at %v (last: %s): %w", name, svc, last, err)
	}
	return nil
}

// StandInAddr is ip:port.
func StandInAddr(ip string, port int32) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}
