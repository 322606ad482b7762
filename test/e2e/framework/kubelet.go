// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
)

// SimImage is the container image the kubelet stand-in runs: a pod whose
// first container has this image gets an inference-sim process.
const SimImage = "inference-sim"

// defaultSimPort is the port a sim listens on when its container declares none.
const defaultSimPort = 8000

// Kubelet is a stand-in for the kubelet. For every pod whose first container
// has an image it knows (SimImage; GPUAgentImage after EnableGPUs) it
// allocates a loopback address 127.0.0.N, starts the image's binary
// listening on it at the container's port, with the container's args and
// literal env values, and reports the pod Running and Ready with that pod
// IP. It stops the process when the pod goes away. Pods are never bound to
// a node, so the API server deletes them at once.
//
// A container with an HTTP readiness probe is reported Running but not
// Ready until the probe's path answers 2xx or 3xx; the stand-in probes every
// 100 ms (faster than a kubelet's 1 s minimum period, so that a
// time-compressed run is not held back by it), and once Ready a pod stays
// Ready. Endpoints leaves out pods that are not Ready, as a Service does.
//
// After EnableGPUs the node also has FakeGPUs fake GPUs: a pod whose
// containers request GPUResource gets that many before its process starts,
// and the allocations are served on a pod-resources socket that gpu-agent
// pods are pointed at. AddGPUNode models further nodes, each with its own
// FakeGPUs GPUs and socket; a pod bound to one (spec.nodeName) takes that
// node's GPUs, and a gpu-agent pod bound to one reads that node's socket.
// Pods bound to NodeName or to no node take the first node's.
type Kubelet struct {
	client kubernetes.Interface
	logDir string
	lister corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	runners map[string]podRunner   // by image
	gpus    *gpuDevices            // NodeName's; nil until EnableGPUs
	nodes   map[string]*gpuDevices // AddGPUNode's, by node name
	pods    map[string]*simPod     // by namespace/name
	nextIP  int
}

// podRunner says how the stand-in runs the pods of one image.
type podRunner struct {
	binary string
	// name prefixes the process's name (and log file).
	name string
	// listenFlag is the flag the binary takes its listen address by.
	listenFlag  string
	defaultPort int32
	// gpuAgent: the binary is the gpu-agent, given its node's
	// pod-resources socket after the listen flag and, on the sim
	// backend, the node's GPU map in the environment.
	gpuAgent bool
}

type simPod struct {
	uid    types.UID
	ip     string
	port   int32
	labels labels.Set
	proc   *Process
	killed bool
	// ready is false until the readiness probe, if any, succeeds; stop
	// ends the prober when the pod goes away.
	ready bool
	stop  chan struct{}
}

// probeEvery is how often the stand-in runs a readiness probe.
const probeEvery = 100 * time.Millisecond

// StartKubelet starts the stand-in and waits for its pod cache to sync.
func StartKubelet(ctx context.Context, client kubernetes.Interface, simBin, logDir string) (*Kubelet, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods()
	k := &Kubelet{
		client: client,
		logDir: logDir,
		runners: map[string]podRunner{
			SimImage: {binary: simBin, name: "sim", listenFlag: "--listen", defaultPort: defaultSimPort},
		},
		lister: podInformer.Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second)),
		cancel: cancel,
		pods:   map[string]*simPod{},
		nextIP: 2,
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubelet stand-in: add pod handler: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), podInformer.Informer().HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, errors.New("kubelet stand-in: pod cache did not sync within 30s")
	}
	const workers = 4
	for range workers {
		k.wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}
	k.wg.Go(func() {
		<-ctx.Done()
		k.queue.ShutDown()
		factory.Shutdown()
	})
	return k, nil
}

// EnableGPUs gives the node FakeGPUs fake GPUs of FakeGPUProfile, serves
// their allocations on a pod-resources socket in dir, and runs pods whose
// first container has image GPUAgentImage as agentBin with the container's
// args, --listen-address=<pod IP>:<port> (the port named "metrics", else
// "http", else the first, else 9410) and --pod-resources-socket=<that
// socket>. Such pods choose the fake backend themselves, e.g. args
// [--testing-fake-nvml=h100-busy, --interval=1s].
func (k *Kubelet) EnableGPUs(agentBin, dir string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gpus != nil {
		return errors.New("kubelet stand-in: GPUs already enabled")
	}
	gpus, err := startGPUDevices(NodeName, dir)
	if err != nil {
		return err
	}
	k.gpus = gpus
	k.runners[GPUAgentImage] = podRunner{
		binary: agentBin, name: "gpu-agent", listenFlag: "--listen-address", defaultPort: defaultGPUAgentPort, gpuAgent: true,
	}
	return nil
}

// AddGPUNode models another node, name, with FakeGPUs GPUs of its own,
// like NodeName's (on the sim backend too, after UseSimGPUs, with its own
// map file dir/sim-gpus.json), its allocations served on dir/kubelet.sock.
// Pods bound to name take its GPUs; a gpu-agent pod bound to name reads
// its socket, as a DaemonSet's pod on that node would. Call it after
// EnableGPUs (and UseSimGPUs), with a dir of its own.
func (k *Kubelet) AddGPUNode(name, dir string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.gpus == nil:
		return errors.New("kubelet stand-in: AddGPUNode before EnableGPUs")
	case name == "" || name == NodeName || k.nodes[name] != nil:
		return fmt.Errorf("kubelet stand-in: node name %q is empty or taken", name)
	}
	g, err := startGPUDevices(name, dir)
	if err != nil {
		return err
	}
	k.gpus.mu.Lock()
	g.profile = k.gpus.profile
	sim := k.gpus.mapFile != ""
	k.gpus.mu.Unlock()
	if sim {
		g.mapFile = filepath.Join(dir, "sim-gpus.json")
		if err := g.publishLocked(); err != nil {
			g.close()
			return err
		}
	}
	if k.nodes == nil {
		k.nodes = map[string]*gpuDevices{}
	}
	k.nodes[name] = g
	return nil
}

// nodeGPUs returns the GPUs of the node a pod is bound to: NodeName's for
// NodeName or no node, nil before EnableGPUs, and an error for a node the
// stand-in does not model; k.mu is held.
func (k *Kubelet) nodeGPUs(node string) (*gpuDevices, error) {
	if k.gpus == nil || node == "" || node == NodeName {
		return k.gpus, nil
	}
	if g, ok := k.nodes[node]; ok {
		return g, nil
	}
	return nil, fmt.Errorf("kubelet stand-in: no node %q with GPUs (AddGPUNode)", node)
}

// UseSimGPUs makes the node's fake GPUs follow the simulators that hold
// them: their UUIDs become GPU-fake-sim-<i>, the stand-in writes which
// simulator holds which GPU to dir/sim-gpus.json as it allocates them, and
// gpu-agent pods get that path in the environment, so that an agent run
// with --testing-fake-nvml=sim reads each GPU's utilization and SM activity
// from its simulator's busy time. Call it after EnableGPUs, before any pod
// holds a GPU.
func (k *Kubelet) UseSimGPUs(dir string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gpus == nil {
		return errors.New("kubelet stand-in: UseSimGPUs before EnableGPUs")
	}
	g := k.gpus
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) > 0 {
		return errors.New("kubelet stand-in: UseSimGPUs after GPUs were allocated")
	}
	if len(k.nodes) > 0 {
		return errors.New("kubelet stand-in: UseSimGPUs after AddGPUNode")
	}
	g.profile = nvml.FakeSimProfile
	g.mapFile = filepath.Join(dir, "sim-gpus.json")
	return g.publishLocked()
}

// Stop stops the workers, every process and the pod-resources server.
func (k *Kubelet) Stop() error {
	k.cancel()
	k.wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for key, sp := range k.pods {
		errs = append(errs, sp.proc.Stop(5*time.Second))
		delete(k.pods, key)
	}
	if k.gpus != nil {
		k.gpus.close()
	}
	for _, g := range k.nodes {
		g.close()
	}
	return errors.Join(errs...)
}

// Endpoints returns the base URLs (http://IP:port) of the live simulators
// of pods in namespace that match selector, sorted. Pods whose simulator was
// killed are left out, as a Service would after a failed readiness probe,
// and so are pods whose readiness probe has not succeeded yet.
func (k *Kubelet) Endpoints(namespace string, selector labels.Selector) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key, sp := range k.pods {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		if ns != namespace || sp.killed || !sp.ready || !selector.Matches(sp.labels) {
			continue
		}
		if exited, _ := sp.proc.Exited(); exited {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(sp.ip, strconv.Itoa(int(sp.port))))
	}
	sort.Strings(out)
	return out
}

// Endpoint returns the base URL of one pod's simulator.
func (k *Kubelet) Endpoint(namespace, name string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	sp, ok := k.pods[namespace+"/"+name]
	if !ok {
		return "", false
	}
	return "http://" + net.JoinHostPort(sp.ip, strconv.Itoa(int(sp.port))), true
}

// KillSim stops one pod's simulator and leaves the pod Running and Ready in
// the API, as when a model server hangs or its metrics endpoint dies while
// the kubelet has not noticed yet.
func (k *Kubelet) KillSim(namespace, name string) error {
	k.mu.Lock()
	sp, ok := k.pods[namespace+"/"+name]
	if ok {
		sp.killed = true
	}
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("kubelet stand-in: no simulator for pod %s/%s", namespace, name)
	}
	return sp.proc.Stop(5 * time.Second)
}

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		klog.ErrorS(err, "kubelet stand-in: sync pod, will retry", "pod", key)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *Kubelet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return k.forget(key, "")
	}
	if err != nil {
		return fmt.Errorf("get pod from cache: %w", err)
	}
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	k.mu.Lock()
	runner, ok := k.runners[pod.Spec.Containers[0].Image]
	k.mu.Unlock()
	if !ok {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		if err := k.forget(key, ""); err != nil {
			return err
		}
		return k.finishDeletion(ctx, pod)
	}
	if err := k.forget(key, pod.UID); err != nil { // a new pod with an old name
		return err
	}
	sp, err := k.ensureSim(ctx, key, pod, runner)
	if err != nil {
		return err
	}
	k.mu.Lock()
	ready := sp.ready
	k.mu.Unlock()
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP == sp.ip && podReady(pod) == ready {
		return nil
	}
	return k.reportRunning(ctx, pod, sp, ready)
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probeURL is the URL of c's HTTP readiness probe at ip, and false when c
// has none.
func probeURL(c corev1.Container, ip string, port int32) (string, bool) {
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		return "", false
	}
	g := c.ReadinessProbe.HTTPGet
	if p := g.Port; p.IntValue() > 0 {
		port = int32(p.IntValue())
	} else if p.StrVal != "" {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port = cp.ContainerPort
			}
		}
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + g.Path, true
}

// probe runs sp's readiness probe every probeEvery until it answers 2xx or
// 3xx, then marks sp ready and queues key so that sync reports it; it
// returns early when the pod goes away or the stand-in stops.
func (k *Kubelet) probe(ctx context.Context, key, url string, sp *simPod) {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sp.stop:
			return
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			klog.ErrorS(err, "kubelet stand-in: readiness probe", "pod", key)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 400 {
			k.mu.Lock()
			sp.ready = true
			k.mu.Unlock()
			klog.V(2).InfoS("kubelet stand-in: readiness probe succeeded", "pod", key, "url", url)
			k.queue.Add(key)
			return
		}
	}
}

// finishDeletion removes a pod bound to a node once its process is stopped,
// as the kubelet does: the API server deletes an unbound pod at once, but
// keeps a bound one (spec.nodeName set) until its kubelet confirms.
func (k *Kubelet) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.NodeName == "" {
		return nil
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("finish deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// forget stops the process recorded for key unless it belongs to keepUID,
// and releases the pod's GPUs.
func (k *Kubelet) forget(key string, keepUID types.UID) error {
	k.mu.Lock()
	sp, ok := k.pods[key]
	if ok && sp.uid != keepUID {
		delete(k.pods, key)
		close(sp.stop)
	} else {
		ok = false
	}
	k.mu.Unlock()
	if !ok {
		return nil
	}
	klog.V(2).InfoS("kubelet stand-in: stopping pod process", "pod", key, "ip", sp.ip, "pid", sp.proc.PID())
	err := sp.proc.Stop(5 * time.Second)
	k.releaseGPUs(key)
	return err
}

func (k *Kubelet) ensureSim(ctx context.Context, key string, pod *corev1.Pod, runner podRunner) (*simPod, error) {
	k.mu.Lock()
	if sp, ok := k.pods[key]; ok {
		k.mu.Unlock()
		return sp, nil
	}
	c := pod.Spec.Containers[0]
	port := containerPort(c, runner.defaultPort)
	gpus, err := k.nodeGPUs(pod.Spec.NodeName)
	if err != nil {
		k.mu.Unlock()
		return nil, err
	}
	ip, err := k.allocateIP(port)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var uuids []string
	if gpus != nil {
		if uuids, err = gpus.allocate(key, pod, "http://"+net.JoinHostPort(ip, strconv.Itoa(int(port)))); err != nil {
			return nil, err
		}
	}
	args := append(append([]string{}, c.Args...), runner.listenFlag+"="+net.JoinHostPort(ip, strconv.Itoa(int(port))))
	var env []string
	if runner.gpuAgent {
		args = append(args, "--pod-resources-socket="+gpus.socket())
		gpus.mu.Lock()
		if gpus.mapFile != "" {
			env = append(env, nvml.FakeSimGPUsEnv+"="+gpus.mapFile)
		}
		gpus.mu.Unlock()
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	proc, err := StartProcess(runner.name+"-"+pod.Namespace+"-"+pod.Name, k.logDir, runner.binary, args, env)
	if err != nil {
		k.releaseGPUs(key)
		return nil, err
	}
	if err := waitListening(ctx, proc, net.JoinHostPort(ip, strconv.Itoa(int(port))), 15*time.Second); err != nil {
		stopErr := proc.Stop(2 * time.Second)
		k.releaseGPUs(key)
		return nil, errors.Join(err, stopErr)
	}
	sp := &simPod{uid: pod.UID, ip: ip, port: port, labels: labels.Set(pod.Labels), proc: proc, stop: make(chan struct{})}
	url, probed := probeURL(c, ip, port)
	sp.ready = !probed
	k.mu.Lock()
	k.pods[key] = sp
	k.mu.Unlock()
	if probed {
		k.wg.Go(func() { k.probe(ctx, key, url, sp) })
	}
	klog.V(2).InfoS("kubelet stand-in: started pod process", "pod", key, "image", c.Image, "ip", ip, "port", port, "gpus", uuids, "pid", proc.PID())
	return sp, nil
}

// releaseGPUs returns key's GPUs, if any, to their node.
func (k *Kubelet) releaseGPUs(key string) {
	k.mu.Lock()
	var nodes []*gpuDevices
	if k.gpus != nil {
		nodes = append(nodes, k.gpus)
	}
	for _, g := range k.nodes {
		nodes = append(nodes, g)
	}
	k.mu.Unlock()
	for _, g := range nodes {
		g.release(key)
	}
}

// allocateIP hands out 127.0.0.2, 127.0.0.3, … 127.0.255.254, skipping
// addresses where port is taken (another process on this machine may
// use loopback addresses too); k.mu is held.
func (k *Kubelet) allocateIP(port int32) (string, error) {
	for ; k.nextIP < 256*256; k.nextIP++ {
		if lo := k.nextIP % 256; lo == 0 || lo == 255 {
			continue
		}
		ip := fmt.Sprintf("127.0.%d.%d", k.nextIP/256, k.nextIP%256)
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
		if err != nil {
			continue
		}
		l.Close()
		k.nextIP++
		return ip, nil
	}
	return "", errors.New("kubelet stand-in: out of loopback addresses")
}

func (k *Kubelet) reportRunning(ctx context.Context, cached *corev1.Pod, sp *simPod, ready bool) error {
	pod := cached.DeepCopy()
	now := metav1.Now()
	c := pod.Spec.Containers[0]
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "127.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP:     sp.ip,
		PodIPs:    []corev1.PodIP{{IP: sp.ip}},
		StartTime: &now,
		QOSClass:  cached.Status.QOSClass,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: readyStatus, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image,
			ContainerID: "sim://" + strconv.Itoa(sp.proc.PID()),
			Ready:       ready,
			Started:     new(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if _, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("report pod %s/%s running at %s: %w", pod.Namespace, pod.Name, sp.ip, err)
	}
	return nil
}

// containerPort is the port named "metrics", else "http", else the first
// port, else def.
func containerPort(c corev1.Container, def int32) int32 {
	for _, name := range []string{"metrics", "http"} {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	if len(c.Ports) > 0 {
		return c.Ports[0].ContainerPort
	}
	return def
}

func waitListening(ctx context.Context, p *Process, addr string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("%s exited before listening on %s: %v\n%s", p.Name, addr, err, p.Tail(20)) //nolint:errorlint // err is nil on a clean exit
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			return false, nil
		}
		conn.Close()
		if exited, err := p.Exited(); exited { // someone else took addr first
			return false, fmt.Errorf("%s exited: %v\n%s", p.Name, err, p.Tail(20)) //nolint:errorlint // err is nil on a clean exit
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		return fmt.Errorf("%s not listening on %s after %s: %w\n%s", p.Name, addr, timeout, last, p.Tail(20))
	}
	return err
}

// ReportRunning sets pod's status to Running and Ready at ip, as the kubelet
// reports a pod it started, for a pod whose server the caller runs itself
// (an image the stand-in does not know). It returns the updated pod.
func ReportRunning(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip string) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		HostIP:     "127.0.0.1",
		HostIPs:    []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP:      ip,
		PodIPs:     []corev1.PodIP{{IP: ip}},
		StartTime:  &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	updated, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("report pod %s/%s running at %s: %w", pod.Namespace, pod.Name, ip, err)
	}
	return updated, nil
}
