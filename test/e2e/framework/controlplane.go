// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names the control plane's certificates carry.
const (
	FrontProxyClientName = "front-proxy-client"
	AdminUser            = "e2e-admin"
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	stopGrace            = 10 * time.Second
)

// ControlPlane is etcd, kube-apiserver and kube-controller-manager running
// on 127.0.0.1 with certificates made for this run.
type ControlPlane struct {
	// Dir holds certificates, kubeconfigs and data; LogDir the process logs.
	Dir, LogDir string
	// CA signs the API server's serving certificate and all client
	// certificates; FrontProxyCA signs the aggregator's proxy client certificate.
	CA, FrontProxyCA *CA
	// FrontProxyClient is the certificate kube-apiserver presents to
	// aggregated API servers.
	FrontProxyClient *KeyPair
	// Admin is a client certificate in group system:masters.
	Admin *KeyPair
	// URL is the API server's address; AdminKubeconfig a kubeconfig for Admin.
	URL             string
	AdminKubeconfig string
	// Config, Client and Dynamic talk to the API server as Admin; Metrics
	// reads the metrics APIs as Admin, with the HPA's typed clients.
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Metrics *MetricsClient

	etcd, apiserver, kcm *Process
	// etcdURL and adminHTTP let StartEtcd and StartAPIServer wait for readiness.
	etcdURL   string
	adminHTTP *http.Client
}

// FeatureGates are the feature gates kube-apiserver and
// kube-controller-manager run with. HPAScaleToZero lets an HPA with an
// Object or External metric have minReplicas 0 (alpha and off by default
// before Kubernetes 1.37, beta and on by default from 1.37: set here so the
// scale-to-zero test says what it needs).
const FeatureGates = "HPAScaleToZero=true"

// StartControlPlane starts etcd, kube-apiserver and kube-controller-manager
// from binDir and waits until they are ready. On error it stops what it
// started. dir must exist; logs go to dir/logs. kcmArgs follow the
// harness's kube-controller-manager flags, so they override them (e.g.
// --horizontal-pod-autoscaler-sync-period for a time-compressed run).
func StartControlPlane(ctx context.Context, binDir, dir string, kcmArgs ...string) (cp *ControlPlane, err error) {
	started := &ControlPlane{Dir: dir, LogDir: filepath.Join(dir, "logs")}
	cp = started
	defer func() {
		if err != nil {
			err = errors.Join(err, started.Stop()) // cp is nil on error returns
		}
	}()
	pki := filepath.Join(dir, "pki")
	for _, d := range []string{cp.LogDir, pki} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	f, err := cp.makePKI(pki)
	if err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	cp.etcdURL = etcdURL
	cp.etcd, err = StartProcess("etcd", cp.LogDir, filepath.Join(binDir, "etcd"), []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, cp.etcd, http.DefaultClient, etcdURL+"/health", 30*time.Second); err != nil {
		return nil, err
	}

	cp.apiserver, err = StartProcess("kube-apiserver", cp.LogDir, filepath.Join(binDir, "kube-apiserver"), []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + f.apiserver.CertFile,
		"--tls-private-key-file=" + f.apiserver.KeyFile,
		"--client-ca-file=" + f.caFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + f.saPub,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--requestheader-client-ca-file=" + f.frontProxyCAFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cp.FrontProxyClient.CertFile,
		"--proxy-client-key-file=" + cp.FrontProxyClient.KeyFile,
		"--feature-gates=" + FeatureGates,
		"--profiling=false",
		"--v=1",
	}, nil)
	if err != nil {
		return nil, err
	}
	adminHTTP, err := cp.httpClient(cp.Admin)
	if err != nil {
		return nil, err
	}
	cp.adminHTTP = adminHTTP
	if err := waitHTTP(ctx, cp.apiserver, adminHTTP, cp.URL+"/readyz", 60*time.Second); err != nil {
		return nil, err
	}

	cp.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.AdminKubeconfig, cp.URL, cp.CA.CertPEM, cp.Admin, ""); err != nil {
		return nil, err
	}
	kcmKubeconfig := filepath.Join(dir, "kcm.kubeconfig")
	if err := WriteKubeconfig(kcmKubeconfig, cp.URL, cp.CA.CertPEM, f.kcmClient, ""); err != nil {
		return nil, err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig); err != nil {
		return nil, fmt.Errorf("load %s: %w", cp.AdminKubeconfig, err)
	}
	cp.Config.QPS, cp.Config.Burst = 100, 200
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	if cp.Metrics, err = NewMetricsClient(cp.Config); err != nil {
		return nil, fmt.Errorf("create metrics client: %w", err)
	}

	cp.kcm, err = StartProcess("kube-controller-manager", cp.LogDir, filepath.Join(binDir, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--tls-cert-file=" + f.kcmServing.CertFile,
		"--tls-private-key-file=" + f.kcmServing.KeyFile,
		"--controllers=horizontal-pod-autoscaler-controller,deployment-controller,replicaset-controller,serviceaccount-controller,garbage-collector-controller,namespace-controller",
		"--use-service-account-credentials",
		"--service-account-private-key-file=" + f.saKey,
		"--root-ca-file=" + f.caFile,
		"--horizontal-pod-autoscaler-sync-period=1s",
		"--leader-elect=false",
		"--feature-gates=" + FeatureGates,
		"--profiling=false",
		"--v=1",
	}, kcmArgs...), nil)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, cp.kcm, adminHTTP, "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", 60*time.Second); err != nil {
		return nil, err
	}
	// The service account controller is running once "default" has its
	// ServiceAccount; pods cannot be admitted in a namespace before that.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	if err != nil {
		return nil, fmt.Errorf("wait for kube-controller-manager to create ServiceAccount default/default: %w\n%s", err, cp.kcm.Tail(30))
	}
	return cp, nil
}

// Impersonate returns a copy of the admin config that acts as user in groups.
func (cp *ControlPlane) Impersonate(user string, groups ...string) *rest.Config {
	c := rest.CopyConfig(cp.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

// StopEtcd stops etcd (SIGTERM, then SIGKILL after a bound); StartEtcd
// starts it again on the same ports and data directory. For fault tests.
func (cp *ControlPlane) StopEtcd() error { return cp.etcd.Stop(stopGrace) }

// StartEtcd starts etcd again after StopEtcd and waits until it is healthy.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	p, err := cp.etcd.Relaunch()
	if err != nil {
		return err
	}
	cp.etcd = p
	return waitHTTP(ctx, p, http.DefaultClient, cp.etcdURL+"/health", 60*time.Second)
}

// StopAPIServer stops kube-apiserver; StartAPIServer starts it again on the
// same port with the same certificates. For fault tests.
func (cp *ControlPlane) StopAPIServer() error { return cp.apiserver.Stop(stopGrace) }

// StartAPIServer starts kube-apiserver again after StopAPIServer and waits
// until /readyz answers 200.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	p, err := cp.apiserver.Relaunch()
	if err != nil {
		return err
	}
	cp.apiserver = p
	return waitHTTP(ctx, p, cp.adminHTTP, cp.URL+"/readyz", 120*time.Second)
}

// PIDs are the control plane's running processes by name (etcd,
// kube-apiserver, kube-controller-manager), for measuring their CPU.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range []*Process{cp.etcd, cp.apiserver, cp.kcm} {
		if p != nil {
			out[p.Name] = p.PID()
		}
	}
	return out
}

// Stop stops kube-controller-manager, kube-apiserver and etcd, in that
// order. It is safe to call on a partly started control plane.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*Process{cp.kcm, cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.Stop(stopGrace))
		}
	}
	return errors.Join(errs...)
}

type pkiFiles struct {
	caFile, frontProxyCAFile string
	saKey, saPub             string
	apiserver                *KeyPair
	kcmClient, kcmServing    *KeyPair
}

func (cp *ControlPlane) makePKI(dir string) (*pkiFiles, error) {
	var f pkiFiles
	var err error
	if cp.CA, err = NewCA("e2e-ca"); err != nil {
		return nil, err
	}
	if cp.FrontProxyCA, err = NewCA("e2e-front-proxy-ca"); err != nil {
		return nil, err
	}
	if f.caFile, err = cp.CA.WriteCA(dir, "ca"); err != nil {
		return nil, err
	}
	if f.frontProxyCAFile, err = cp.FrontProxyCA.WriteCA(dir, "front-proxy-ca"); err != nil {
		return nil, err
	}
	if f.saKey, f.saPub, err = NewServiceAccountKey(dir); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
	issue := []struct {
		into **KeyPair
		ca   *CA
		name string
		spec CertSpec
	}{
		{&f.apiserver, cp.CA, "apiserver", CertSpec{CommonName: "kube-apiserver", Server: true, IPs: loopback,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}}},
		{&cp.Admin, cp.CA, "admin", CertSpec{CommonName: AdminUser, Organization: []string{"system:masters"}, Client: true}},
		{&f.kcmClient, cp.CA, "kcm-client", CertSpec{CommonName: "system:kube-controller-manager", Client: true}},
		{&f.kcmServing, cp.CA, "kcm-serving", CertSpec{CommonName: "kube-controller-manager", Server: true, IPs: loopback[:1], DNSNames: []string{"localhost"}}},
		{&cp.FrontProxyClient, cp.FrontProxyCA, "front-proxy-client", CertSpec{CommonName: FrontProxyClientName, Client: true}},
	}
	for _, c := range issue {
		kp, err := c.ca.Issue(c.spec)
		if err != nil {
			return nil, err
		}
		if err := kp.Write(dir, c.name); err != nil {
			return nil, err
		}
		*c.into = kp
	}
	return &f, nil
}

// httpClient is an HTTP client that trusts cp.CA and presents client.
func (cp *ControlPlane) httpClient(client *KeyPair) (*http.Client, error) {
	return TLSClient(cp.CA.CertPEM, client, "")
}

// TLSClient returns an HTTP client that trusts caPEM, verifies serverName
// (the URL's host when empty) and presents client when not nil.
func TLSClient(caPEM []byte, client *KeyPair, serverName string) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in PEM")
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// WriteKubeconfig writes a kubeconfig for server that authenticates with
// the client certificate cert, or with token when cert is nil.
func WriteKubeconfig(path, server string, caPEM []byte, cert *KeyPair, token string) error {
	auth := &clientcmdapi.AuthInfo{Token: token}
	if cert != nil {
		auth = &clientcmdapi.AuthInfo{ClientCertificateData: cert.CertPEM, ClientKeyData: cert.KeyPEM}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["e2e"] = auth
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// waitHTTP polls url until it answers 200, p exits, or timeout passes.
func waitHTTP(ctx context.Context, p *Process, c *http.Client, url string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, werr := p.Exited(); exited {
			return false, fmt.Errorf("%s exited: %v", p.Name, werr) //nolint:errorlint // werr is nil on a clean exit
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s at %s (last: %s): %w\n%s", p.Name, url, last, err, p.Tail(30))
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
