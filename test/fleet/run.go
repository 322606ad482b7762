// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// Where the fleet's pods live in the API server.
const (
	namespace = "fleet"
	appLabel  = "fleet"
	metric    = "inference_queue_size"
	podImage  = "fleet-page" // never run: the fleet processes stand in for it
)

func podName(i int) string { return fmt.Sprintf("fleet-%05d", i) }

// env is what run starts.
type env struct {
	run     *framework.RunDir
	cp      *framework.ControlPlane
	fleet   fleets
	procs   []*framework.Process
	adapter *framework.Adapter
	// client talks to the API server without client-go's rate limiter, so
	// that the latency measured is the aggregator's and the adapter's.
	client kubernetes.Interface
	// viaAPIServer asks the latency runs' questions of kube-apiserver;
	// direct asks the adapter itself, as the aggregator does.
	viaAPIServer, direct askers
	// metrics reads the answers' values with the HPA's typed client.
	metrics *framework.MetricsClient
	// decoder decodes one answer of each latency run, to check it.
	decoder *answerDecoder
	// cgroup holds the adapter with --enforce-memory-limit; nil otherwise.
	cgroup *memCgroup
	// pki is the pods' serving certificate and its CA with
	// --scrape-scheme=https; nil otherwise.
	pki *podPKI
}

// podPKI is what an https fleet is served and verified with: a test CA
// (the adapter's --scrape-ca-file) and one serving certificate, for
// *.fleet.pod, that every fake pod presents.
type podPKI struct {
	caFile, certFile, keyFile string
}

// podServerName is the name the serving certificate is issued for: the
// wildcard over the pods' DNS names <ip with dashes>.fleet.pod, the name
// the adapter verifies an https pod's certificate for when the pod does
// not set inference-metrics-adapter/tls-server-name.
const podServerName = "*." + namespace + ".pod"

// newPodPKI makes a test CA and the pods' serving certificate and writes
// them to dir.
func newPodPKI(dir string) (*podPKI, error) {
	ca, err := framework.NewCA("fleet-pod-ca")
	if err != nil {
		return nil, err
	}
	caFile, err := ca.WriteCA(dir, "fleet-pod-ca")
	if err != nil {
		return nil, err
	}
	kp, err := ca.Issue(framework.CertSpec{CommonName: "fleet-pods", DNSNames: []string{podServerName}, Server: true})
	if err != nil {
		return nil, err
	}
	if err := kp.Write(dir, "fleet-pods"); err != nil {
		return nil, err
	}
	return &podPKI{caFile: caFile, certFile: kp.CertFile, keyFile: kp.KeyFile}, nil
}

// run sets everything up, measures, prints the table and tears down.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, "fleet: "+format+"\n", args...) }
	rd, err := framework.NewRunDir("fleet")
	if err != nil {
		return err
	}
	e := &env{run: rd}
	defer func() { err = rd.Close(err, o.keep, func() error { return e.teardown(say) }, say) }()
	start := time.Now()
	if err := e.setup(ctx, o, say); err != nil {
		return err
	}
	say("ready in %s", time.Since(start).Round(100*time.Millisecond))
	res, err := measure(ctx, e, o, say)
	if res != nil {
		res.print(out, o)
		printGoals(out, judge(res, o))
	}
	return err
}

// setup builds the adapter, starts the control plane and the fleet,
// creates the pods and starts the adapter.
func (e *env) setup(ctx context.Context, o options, say func(string, ...any)) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	say("building the adapter; starting etcd, kube-apiserver and kube-controller-manager from %s", o.binDir)
	adapterBin, err := e.run.Build(ctx, framework.ComponentAdapter)
	if err != nil {
		return err
	}
	if o.enforceMemoryLimit {
		if e.cgroup, err = newMemCgroup(cgroupRoot, o.memoryLimitBytes); err != nil {
			return err
		}
		say("the adapter runs in memory cgroup %s, limited to %s", e.cgroup.dir, o.memoryLimit)
		if err := dropPageCache(adapterBin); err != nil {
			return err
		}
		if adapterBin, err = e.cgroup.wrap(adapterBin); err != nil {
			return err
		}
	}
	if e.cp, err = framework.StartControlPlane(ctx, o.binDir, e.run.Dir); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	cfg := framework.Unthrottled(e.cp.Config)
	if e.viaAPIServer, err = newAskers(*cfg); err != nil {
		return fmt.Errorf("clients of kube-apiserver: %w", err)
	}
	e.client = e.viaAPIServer.gzip
	if e.metrics, err = framework.NewMetricsClient(cfg); err != nil {
		return err
	}
	if e.decoder, err = newAnswerDecoder(); err != nil {
		return err
	}
	if o.scrapeScheme == schemeHTTPS {
		if e.pki, err = newPodPKI(e.run.Dir); err != nil {
			return fmt.Errorf("the pods' certificates: %w", err)
		}
	}
	say("starting %d fake-fleet process(es) serving %d pods on 127.2.x.y:%d over %s", o.procs, o.pods, pagePort, o.scrapeScheme)
	if err := e.startFleet(ctx, o, filepath.Join(root, "pkg", "adapter", "parse", "testdata", "vllm-v1.prom")); err != nil {
		return err
	}
	say("creating %d pods in namespace %s", o.pods, namespace)
	if err := e.createPods(ctx, o.pods, o.podAnnotations()); err != nil {
		return err
	}
	timeout := min(3*time.Second, o.interval*8/10)
	args := []string{
		"--scrape-interval=" + o.interval.String(),
		"--scrape-timeout=" + timeout.String(),
		"--max-age=" + (3 * o.interval).String(),
	}
	if e.pki != nil {
		// Every pod keeps its TLS connection, as in the measured runs
		// (docs/performance.md); --adapter-args, later, may set another bound.
		args = append(args, "--scrape-ca-file="+e.pki.caFile, fmt.Sprintf("--scrape-max-kept-tls-connections=%d", o.pods))
	}
	say("starting the adapter (%s %s)", strings.Join(args, " "), strings.Join(o.adapterArgs, " "))
	e.adapter, err = framework.StartAdapter(ctx, e.cp, framework.AdapterConfig{
		Binary:    adapterBin,
		Namespace: framework.AdapterNamespace,
		Service:   framework.AdapterService,
		Env:       o.adapterEnv(),
		// The latency runs also ask the sum over the N pods, an external
		// metric.
		EnableExternalMetrics: true,
		Args: slices.Concat(args, []string{
			"--gpu-agent-namespace=" + framework.AdapterNamespace,
			"--shutdown-delay=0s",
		}, o.adapterArgs),
	})
	if err != nil {
		return fmt.Errorf("start adapter: %w", err)
	}
	if e.direct, err = newAskers(directConfig(e.adapter, e.cp.FrontProxyClient)); err != nil {
		return fmt.Errorf("clients of the adapter: %w", err)
	}
	return nil
}

// askers are one server's two clients for the latency runs, neither
// rate-limited: gzip accepts gzip, as kubectl asks, and plain does not, as
// the HPA controller asks (kube-controller-manager sets DisableCompression
// on its clients).
type askers struct {
	gzip, plain kubernetes.Interface
}

func newAskers(cfg rest.Config) (askers, error) {
	cfg.QPS, cfg.Burst = 1e6, 1e6
	var a askers
	var err error
	if a.gzip, err = kubernetes.NewForConfig(&cfg); err != nil {
		return a, fmt.Errorf("client: %w", err)
	}
	cfg.DisableCompression = true
	if a.plain, err = kubernetes.NewForConfig(&cfg); err != nil {
		return a, fmt.Errorf("client without compression: %w", err)
	}
	return a, nil
}

// directConfig reaches adapter a itself as kube-apiserver's aggregator
// does: over TLS verified against a's CA, presenting the front-proxy
// client certificate, with the user (the fleet's admin, in
// system:masters) in the X-Remote-* headers, over HTTP/2.
func directConfig(a *framework.Adapter, frontProxy *framework.KeyPair) rest.Config {
	return rest.Config{
		Host:    a.URL(),
		Timeout: 30 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: a.ServerName,
			CAData:     a.CA.CertPEM,
			CertData:   frontProxy.CertPEM,
			KeyData:    frontProxy.KeyPEM,
		},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return transport.NewAuthProxyRoundTripper(framework.AdminUser, "", []string{"system:masters"}, nil, rt)
		},
	}
}

// startFleet starts o.procs children of this binary, each serving a share
// of the pods, and waits until each takes commands.
func (e *env) startFleet(ctx context.Context, o options, pagePath string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	httpc := &http.Client{Timeout: 10 * time.Second}
	for k := range o.procs {
		from, to := k*o.pods/o.procs, (k+1)*o.pods/o.procs
		port, err := framework.FreePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{
			"--serve-from=" + strconv.Itoa(from), "--serve-to=" + strconv.Itoa(to),
			"--serve-page=" + pagePath, "--serve-control=" + addr}
		if e.pki != nil {
			args = append(args, "--serve-cert="+e.pki.certFile, "--serve-key="+e.pki.keyFile)
		}
		p, err := framework.StartProcess(fmt.Sprintf("fleet-%d", k), e.cp.LogDir, self, args, nil)
		if err != nil {
			return err
		}
		e.procs = append(e.procs, p)
		c := &fleetClient{from: from, to: to, url: "http://" + addr, http: httpc}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			if exited, werr := p.Exited(); exited {
				return false, fmt.Errorf("fleet process %d exited: %v\n%s", k, werr, p.Tail(20)) //nolint:errorlint // werr is nil on a clean exit
			}
			return c.get(ctx, "/healthz", nil) == nil, nil
		})
		if err != nil {
			return fmt.Errorf("fleet process %d (pods %d..%d) not ready: %w", k, from, to-1, err)
		}
		e.fleet = append(e.fleet, c)
	}
	return nil
}

// createPods creates n pods labelled app=fleet, annotated with
// annotations, and reports each Running and Ready at its fake address, as
// a kubelet would.
func (e *env) createPods(ctx context.Context, n int, annotations map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	const workers = 16
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range next {
				if errs[w] == nil {
					errs[w] = e.createPod(ctx, i, annotations)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (e *env) createPod(ctx context.Context, i int, annotations map[string]string) error {
	pods := e.client.CoreV1().Pods(namespace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(i), Labels: map[string]string{"app": appLabel}, Annotations: annotations},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name:  "server",
				Image: podImage,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: pagePort}},
			}},
		},
	}
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", podName(i), err)
	}
	if _, err := framework.ReportRunning(ctx, e.client, pod, podIP(i)); err != nil {
		return err
	}
	return nil
}

// teardown stops every process it started, by PID: the adapter (after
// deleting its APIServices), the fleet, the control plane.
func (e *env) teardown(say func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	say("stopping the adapter, the fleet and the control plane")
	var errs []error
	if e.adapter != nil {
		errs = append(errs, e.adapter.Stop(ctx))
	}
	for _, p := range e.procs {
		errs = append(errs, p.Stop(10*time.Second))
	}
	if e.cp != nil {
		errs = append(errs, e.cp.Stop())
	}
	if e.cgroup != nil {
		errs = append(errs, e.cgroup.remove())
	}
	return errors.Join(errs...)
}

// podAnnotations are the fake pods' annotations: with --scrape-scheme=https,
// prometheus.io/scheme: https (their server name is the default, the pod's
// DNS name, which the serving certificate's wildcard covers).
func (o options) podAnnotations() map[string]string {
	if o.scrapeScheme != schemeHTTPS {
		return nil
	}
	return map[string]string{targets.AnnotationScheme: targets.SchemeHTTPS}
}

// adapterEnv is the adapter's environment beyond this tool's own.
func (o options) adapterEnv() []string {
	env := slices.Clone(o.adapterEnvVars)
	if o.memoryLimitBytes > 0 {
		env = append(env, "MEMORY_LIMIT_BYTES="+fmt.Sprint(o.memoryLimitBytes))
	}
	return env
}
