// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CustomMetricsGroup is the API group the adapter serves.
const CustomMetricsGroup = "custom.metrics.k8s.io"

// CustomMetricsVersions returns the versions registered as APIServices.
func CustomMetricsVersions() []string { return []string{"v1beta1", "v1beta2"} }

// ExternalMetricsGroup and ExternalMetricsVersion name the APIService an
// adapter with AdapterConfig.EnableExternalMetrics registers.
const (
	ExternalMetricsGroup   = "external.metrics.k8s.io"
	ExternalMetricsVersion = "v1beta1"
)

func apiServiceGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
}

// AdapterConfig says how to run and register the adapter.
type AdapterConfig struct {
	// Binary is the inference-metrics-adapter executable.
	Binary string
	// Namespace and Service name the ExternalName Service the APIServices
	// point at; the serving certificate is for Service.Namespace.svc.
	Namespace, Service string
	// Kubeconfig is the identity the adapter runs as. Empty means the
	// control plane's admin kubeconfig; a later setup can pass one with a
	// ServiceAccount token (see WriteKubeconfig) and the RBAC it needs.
	Kubeconfig string
	// Args are added after the harness's flags (e.g. --scrape-interval).
	Args []string
	// EnableExternalMetrics runs the adapter with --enable-external-metrics
	// and registers it as v1beta1.external.metrics.k8s.io too (verified
	// TLS, the same caBundle). Off by default: only one adapter in a
	// cluster can own that API.
	EnableExternalMetrics bool
	// SkipCustomMetrics leaves custom.metrics.k8s.io unregistered, for a
	// second adapter next to one that already owns it (e.g. one started
	// only to serve external metrics). Service must then differ too.
	SkipCustomMetrics bool
	// Env is added to the adapter's environment, e.g. MEMORY_LIMIT_BYTES as
	// the chart's downward API sets it.
	Env []string
}

// Adapter is the inference-metrics-adapter process registered with the
// control plane as custom.metrics.k8s.io.
type Adapter struct {
	Port int
	// ServerName is the DNS name in the adapter's serving certificate.
	ServerName string
	// CA signed the serving certificate; it is the APIServices' caBundle.
	CA      *CA
	Process *Process

	cp  *ControlPlane
	cfg AdapterConfig
}

// StartAdapter issues a serving certificate, starts the adapter on a free
// port of 127.0.0.1, waits for /readyz, and registers it through an
// ExternalName Service and verified-TLS APIServices, waiting until they are
// Available. On error it stops what it started.
func StartAdapter(ctx context.Context, cp *ControlPlane, cfg AdapterConfig) (a *Adapter, err error) {
	if cfg.Namespace == "" || cfg.Service == "" {
		return nil, errors.New("adapter: namespace and service must be set")
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = cp.AdminKubeconfig
	}
	a = &Adapter{cp: cp, cfg: cfg, ServerName: cfg.Service + "." + cfg.Namespace + ".svc"}
	// The returns below set a to nil: stop what was started through started.
	started := a
	defer func() {
		if err != nil {
			err = errors.Join(err, started.Stop(context.Background()))
		}
	}()
	// One directory per Service: the adapter reloads its certificate files
	// when they change, so two adapters must never share them.
	dir := filepath.Join(cp.Dir, "adapter-"+cfg.Service)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("adapter: create %s: %w", dir, err)
	}
	if a.CA, err = NewCA("e2e-adapter-ca"); err != nil {
		return nil, err
	}
	serving, err := a.issueServing()
	if err != nil {
		return nil, err
	}
	if err := serving.Write(dir, "serving"); err != nil {
		return nil, err
	}
	if a.Port, err = FreePort(); err != nil {
		return nil, err
	}
	if a.Process, err = StartProcess(cfg.Service, cp.LogDir, cfg.Binary, cfg.processArgs(a.Port, serving), cfg.Env); err != nil {
		return nil, err
	}
	httpc, err := a.HTTPClient(cp.Admin)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, a.Process, httpc, a.URL()+"/readyz", 60*time.Second); err != nil {
		return nil, err
	}
	if err := a.register(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// issueServing issues the adapter's serving certificate from a.CA.
func (a *Adapter) issueServing() (*KeyPair, error) {
	return a.CA.Issue(CertSpec{
		CommonName: a.ServerName,
		DNSNames:   []string{a.ServerName, a.cfg.Service + "." + a.cfg.Namespace, "localhost"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1")},
		Server:     true,
	})
}

// processArgs are the flags of an adapter process serving on port with the
// certificate files of serving.
func (cfg AdapterConfig) processArgs(port int, serving *KeyPair) []string {
	args := append([]string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--kubeconfig=" + cfg.Kubeconfig,
		"--authentication-kubeconfig=" + cfg.Kubeconfig,
		"--authorization-kubeconfig=" + cfg.Kubeconfig,
	}, cfg.Args...)
	if cfg.EnableExternalMetrics {
		args = append(args, "--enable-external-metrics")
	}
	return args
}

// URL is the adapter's own address (not through the aggregator).
func (a *Adapter) URL() string { return "https://127.0.0.1:" + strconv.Itoa(a.Port) }

// HTTPClient talks to the adapter directly, verifying its certificate and
// presenting client (may be nil).
func (a *Adapter) HTTPClient(client *KeyPair) (*http.Client, error) {
	return TLSClient(a.CA.CertPEM, client, a.ServerName)
}

// Config is the configuration the adapter was started with (its Binary,
// whether it serves external metrics, ...), e.g. to start a second one.
func (a *Adapter) Config() AdapterConfig { return a.cfg }

// apiService is one APIService the adapter is registered as.
type apiService struct {
	group, version  string
	versionPriority int64
}

func (s apiService) name() string { return s.version + "." + s.group }

// apiServices lists what cfg registers: custom metrics unless skipped,
// external metrics when enabled.
func (cfg AdapterConfig) apiServices() []apiService {
	var out []apiService
	if !cfg.SkipCustomMetrics {
		for _, v := range CustomMetricsVersions() {
			priority := int64(100)
			if v == "v1beta2" {
				priority = 200
			}
			out = append(out, apiService{group: CustomMetricsGroup, version: v, versionPriority: priority})
		}
	}
	if cfg.EnableExternalMetrics {
		out = append(out, apiService{group: ExternalMetricsGroup, version: ExternalMetricsVersion, versionPriority: 100})
	}
	return out
}

func (a *Adapter) register(ctx context.Context) error {
	c := a.cp.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Namespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("adapter: create namespace %s: %w", a.cfg.Namespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Service, Namespace: a.cfg.Namespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "127.0.0.1",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(a.Port)}},
		},
	}
	if _, err := c.CoreV1().Services(a.cfg.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("adapter: create ExternalName service: %w", err)
	}
	for _, as := range a.cfg.apiServices() {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1",
			"kind":       "APIService",
			"metadata":   map[string]any{"name": as.name()},
			"spec": map[string]any{
				"group":                as.group,
				"version":              as.version,
				"groupPriorityMinimum": int64(100),
				"versionPriority":      as.versionPriority,
				"caBundle":             base64.StdEncoding.EncodeToString(a.CA.CertPEM),
				"service": map[string]any{
					"namespace": a.cfg.Namespace,
					"name":      a.cfg.Service,
					"port":      int64(a.Port),
				},
			},
		}}
		if _, err := a.cp.Dynamic.Resource(apiServiceGVR()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("adapter: create APIService %s: %w", obj.GetName(), err)
		}
	}
	for _, as := range a.cfg.apiServices() {
		name := as.name()
		var last string
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			obj, err := a.cp.Dynamic.Resource(apiServiceGVR()).Get(ctx, name, metav1.GetOptions{})
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
			return fmt.Errorf("adapter: APIService %s not Available (last: %s): %w\n%s", name, last, err, a.Process.Tail(30))
		}
	}
	return nil
}

// Stop deletes the APIServices first (so that namespace deletion and
// discovery do not hang on a dead backend), then stops the process.
func (a *Adapter) Stop(ctx context.Context) error {
	var errs []error
	for _, as := range a.cfg.apiServices() {
		err := a.cp.Dynamic.Resource(apiServiceGVR()).Delete(ctx, as.name(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("adapter: delete APIService: %w", err))
		}
	}
	if a.Process != nil {
		errs = append(errs, a.Process.Stop(stopGrace))
	}
	return errors.Join(errs...)
}
