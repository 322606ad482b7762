// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
)

// selectorPath is the N-pod question the HPA asks.
func selectorPath() string {
	return fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", namespace, metric)
}

// A question of the latency runs.
type question string

const (
	// questionList is the N-pod list, one value per pod: what an HPA with
	// a Pods metric asks. Its answer grows with N.
	questionList question = "list"
	// questionSum is one value, the sum over the same N pods: what an HPA
	// with an External (or Object) metric asks. Its answer does not grow
	// with N.
	questionSum question = "sum"
	// questionFloor is not a metrics question: it is the fleet's Namespace
	// object, which kube-apiserver answers by itself from its watch cache
	// (resourceVersion=0), with no aggregator proxying, no adapter and no
	// etcd. Asked by the same clients in the same way, it is the latency
	// and CPU below which no aggregated API's answer can come on this
	// machine: the floor the other two are read against.
	questionFloor question = "floor"
	// questionDirect is the N-pod list asked of the adapter itself, as
	// kube-apiserver's aggregator asks it (the front-proxy client
	// certificate, the user in X-Remote-* headers), with no kube-apiserver
	// on the request's path: the adapter's own part of the list's latency
	// and CPU. Only its authorization still involves kube-apiserver, and
	// the adapter caches that (--authorization-webhook-cache-authorized-ttl,
	// 10 s by default).
	questionDirect question = "direct"
)

// questions are the latency runs' questions, in the order --questions
// takes them by default.
var questions = []question{questionList, questionSum, questionFloor, questionDirect}

// parseQuestions parses --questions: a comma-separated subset of questions,
// each at most once.
func parseQuestions(s string) ([]question, error) { return parseSubset("--questions", s, questions) }

// describe is the question as the tables name it.
func (q question) describe(pods int) string {
	switch q {
	case questionSum:
		return fmt.Sprintf("sum over %d pods (external)", pods)
	case questionFloor:
		return "floor: kube-apiserver alone (a cached Namespace)"
	case questionDirect:
		return fmt.Sprintf("%d-pod list, the adapter alone (asked directly)", pods)
	}
	return fmt.Sprintf("%d-pod list", pods)
}

// path is the question's path: the metrics questions' (asked through the
// aggregator, or of the adapter for direct), kube-apiserver's own for the
// floor.
func (q question) path() string {
	switch q {
	case questionSum:
		return fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/%s", namespace, metric)
	case questionFloor:
		return "/api/v1/namespaces/" + namespace
	}
	return selectorPath()
}

// params are the question's query parameters: the pods' selector for the
// metrics questions; for the floor, resourceVersion=0, which lets
// kube-apiserver answer from its watch cache without reading etcd, as the
// adapter answers from its store.
func (q question) params() map[string]string {
	if q == questionFloor {
		return map[string]string{"resourceVersion": "0"}
	}
	return map[string]string{"labelSelector": "app=" + appLabel}
}

// ask GETs q's answer in enc (from kube-apiserver, but for direct) and
// returns it with its Content-Type, undecoded: the latency runs time the
// servers, not the client's decoding of a 1,000-item list on the same
// cores (checkAnswer decodes one answer before each run). The client
// accepts gzip when enc says so.
func (e *env) ask(ctx context.Context, q question, enc encoding) ([]byte, string, error) {
	c := e.viaAPIServer
	if q == questionDirect {
		c = e.direct
	}
	client := c.plain
	if enc.gzip() {
		client = c.gzip
	}
	req := client.CoreV1().RESTClient().Get().AbsPath(q.path()).SetHeader("Accept", enc.mediaType())
	for k, v := range q.params() {
		req = req.Param(k, v)
	}
	var contentType string
	body, err := req.Do(ctx).ContentType(&contentType).Raw()
	return body, contentType, err
}

// checkAnswer asks q in enc once, untimed, and checks that the answer is
// in enc and decodes to what q asks: one value for the sum, the fleet's
// Namespace for the floor, and for the list wantList values (at least one
// when wantList is 0). It returns the answer's size in bytes.
func (e *env) checkAnswer(ctx context.Context, q question, enc encoding, wantList int) (int, error) {
	body, contentType, err := e.ask(ctx, q, enc)
	if err != nil {
		return 0, fmt.Errorf("ask the %s question in %s: %w", q, enc, err)
	}
	n, err := e.decoder.items(q, enc, contentType, body)
	if err != nil {
		return 0, err
	}
	want := 1 // the sum's one value, the floor's one Namespace
	if q == questionList || q == questionDirect {
		want = wantList
	}
	if n == 0 || (want > 0 && n != want) {
		return 0, fmt.Errorf("the %s answer in %s holds %d values, want %s", q, enc, n, wantText(want))
	}
	return len(body), nil
}

// wantText says how many values an answer should hold: n, or at least one
// when n is 0.
func wantText(n int) string {
	if n == 0 {
		return "at least one"
	}
	return strconv.Itoa(n)
}

// values reads the N-pod answer with the HPA's typed client and returns
// its value per pod index.
func (e *env) values(ctx context.Context) (map[int]int64, error) {
	list, err := e.metrics.Pods(ctx, namespace, metric, labels.SelectorFromSet(labels.Set{"app": appLabel}), nil)
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(list.Items))
	for _, it := range list.Items {
		var i int
		if _, err := fmt.Sscanf(it.DescribedObject.Name, "fleet-%d", &i); err != nil {
			return nil, fmt.Errorf("answer names pod %q", it.DescribedObject.Name)
		}
		out[i] = it.Value.Value()
	}
	return out, nil
}

// usage is what the adapter and the fleet did over a window.
type usage struct {
	window  time.Duration
	cpu     cpuByRole
	stolen  time.Duration // by the hypervisor, from all cores
	scrapes []int64       // per pod
}

type snapshot struct {
	at     time.Time
	cpu    cpuByRole
	stolen time.Duration
	counts []int64
}

// Roles whose CPU time is measured: every process on the answer's path.
const (
	roleAdapter   = "adapter"
	roleAPIServer = "kube-apiserver"
	roleEtcd      = "etcd"
	roleKCM       = "kube-controller-manager"
	roleClients   = "clients (this tool)"
	roleFleet     = "fake fleet"
)

// roles in the order the tables show them.
var roles = []string{roleAdapter, roleAPIServer, roleEtcd, roleKCM, roleClients, roleFleet}

// cpuByRole is CPU time used so far (or over a window) by role.
type cpuByRole map[string]time.Duration

func (a cpuByRole) minus(b cpuByRole) cpuByRole {
	out := cpuByRole{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// cpu reads the CPU time of every process on the answer's path: the
// adapter, the control plane, this tool (the latency runs' clients) and
// the fake-fleet children.
func (e *env) cpu() (cpuByRole, error) {
	out := cpuByRole{}
	pids := e.cp.PIDs()
	for role, pid := range map[string]int{roleAdapter: e.adapter.Process.PID(), roleAPIServer: pids["kube-apiserver"],
		roleEtcd: pids["etcd"], roleKCM: pids["kube-controller-manager"], roleClients: os.Getpid()} {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", role, err)
		}
		out[role] = t
	}
	for _, p := range e.procs {
		t, err := cpuTime(p.PID())
		if err != nil {
			return nil, err
		}
		out[roleFleet] += t
	}
	return out, nil
}

func (e *env) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if s.cpu, err = e.cpu(); err != nil {
		return s, err
	}
	if s.stolen, err = stolenTime(); err != nil {
		return s, err
	}
	s.counts, err = e.fleet.counts(ctx)
	return s, err
}

func since(a, b snapshot) usage {
	u := usage{window: b.at.Sub(a.at), cpu: b.cpu.minus(a.cpu), stolen: b.stolen - a.stolen}
	u.scrapes = make([]int64, len(b.counts))
	for i := range b.counts {
		u.scrapes[i] = b.counts[i] - a.counts[i]
	}
	return u
}

// perScrape is role's CPU per pod-scrape over the window (0 without
// scrapes).
func (u usage) perScrape(role string) time.Duration {
	n := u.totalScrapes()
	if n == 0 {
		return 0
	}
	return u.cpu[role] / time.Duration(n)
}

// cores is role's CPU over the window in cores (0 without a window).
func (u usage) cores(role string) float64 {
	if u.window <= 0 {
		return 0
	}
	return u.cpu[role].Seconds() / u.window.Seconds()
}

// sortedFreshness is the freshness trials' times, sorted.
func (r *results) sortedFreshness() []time.Duration {
	f := slices.Clone(r.freshness)
	slices.Sort(f)
	return f
}

func (u usage) totalScrapes() int64 {
	var n int64
	for _, c := range u.scrapes {
		n += c
	}
	return n
}

// latencyRun is one answer-latency run with a number of clients.
type latencyRun struct {
	question question
	encoding encoding
	size     int // bytes of one answer, checked before the run
	clients  int
	answers  int
	errors   int
	firstErr error
	elapsed  time.Duration
	p50, p99 time.Duration
	max      time.Duration
	cpu      cpuByRole // over the run
	stolen   time.Duration
}

// results is everything the table shows.
type results struct {
	quiet usage
	mem   memory
	// cgroup is the adapter's memory cgroup's accounting after the last
	// latency run, with --enforce-memory-limit.
	cgroup    *cgroupStats
	freshness []time.Duration
	missed    int // trials whose change never showed within the bound
	// covered is the most pods one answer held while waiting for all.
	covered int
	// quietCounts is what the adapter's own counters say it scraped, and
	// failed to, in the quiet window; quietConns the connections the
	// fleet's pods accepted in it (none when every connection is kept).
	quietCounts scrapeCounts
	quietConns  int64
	latency     []latencyRun
}

// measure waits until every pod has a value, then measures the quiet
// window, freshness and answer latency, in that order.
func measure(ctx context.Context, e *env, o options, say func(string, ...any)) (*results, error) {
	say("waiting until the %d-pod answer holds every pod", o.pods)
	r := &results{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, waitAllBound, true, func(ctx context.Context) (bool, error) {
		v, err := e.values(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		r.covered = max(r.covered, len(v))
		last = fmt.Sprintf("%d of %d pods", len(v), o.pods)
		return len(v) == o.pods, nil
	})
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case r.covered == 0:
		return nil, fmt.Errorf("no answer ever held a pod (last: %s): %w", last, err)
	case err != nil:
		// An adapter that cannot keep up leaves stale pods out: measure it
		// anyway and say so in the table.
		say("the answer never held every pod within %s (at most %d of %d); measuring anyway", waitAllBound, r.covered, o.pods)
	}
	// Let the first round's scrapes (on demand and the loops' start) settle.
	sleep(ctx, 3*o.interval)

	say("quiet window: %s without questions", o.quiet)
	countsA, err := e.scrapeCounts(ctx)
	if err != nil {
		return nil, err
	}
	connsA, err := e.fleet.conns(ctx)
	if err != nil {
		return nil, err
	}
	a, err := e.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	prof := e.profile(ctx, o, "cpu-quiet.pprof", o.quiet)
	sleep(ctx, o.quiet)
	if err := prof.wait(); err != nil {
		return nil, err
	}
	b, err := e.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.quiet = since(a, b)
	countsB, err := e.scrapeCounts(ctx)
	if err != nil {
		return r, err
	}
	connsB, err := e.fleet.conns(ctx)
	if err != nil {
		return r, err
	}
	r.quietCounts, r.quietConns = countsB.minus(countsA), connsB-connsA
	if r.mem, err = readMemory(e.adapter.Process.PID()); err != nil {
		return r, err
	}
	if err := e.heapProfile(ctx, o); err != nil {
		return r, err
	}

	say("freshness: %d trials", o.trials)
	if err := r.measureFreshness(ctx, e, o); err != nil {
		return r, err
	}
	for _, q := range o.questions {
		for _, enc := range o.encodings {
			// Every pod, unless the adapter never held them all (measured
			// anyway, see above).
			wantList := o.pods
			if r.covered < o.pods {
				wantList = 0
			}
			size, err := e.checkAnswer(ctx, q, enc, wantList)
			if err != nil {
				return r, err
			}
			for _, c := range o.clients {
				say("answer latency, %s in %s: %d client(s) for %s, each %s", q.describe(o.pods), enc, c, o.loadDuration, paceText(o.pace))
				prof := e.profile(ctx, o, fmt.Sprintf("cpu-%s-%s-clients-%d.pprof", q, enc, c), o.loadDuration)
				lr, err := e.measureLatency(ctx, q, enc, c, o.loadDuration, o.pace)
				lr.size = size
				if perr := prof.wait(); perr != nil {
					return r, perr
				}
				if err != nil {
					return r, err
				}
				r.latency = append(r.latency, lr)
			}
		}
	}
	if e.cgroup != nil {
		s, err := e.cgroup.stats()
		if err != nil {
			return r, fmt.Errorf("read the adapter's cgroup: %w", err)
		}
		r.cgroup = &s
	}
	return r, ctx.Err()
}

// Bounds of the waits.
const (
	waitAllBound = 3 * time.Minute
	maxMissed    = 3
)

// measureFreshness changes one random pod's value per trial and polls the
// N-pod answer until it shows the new value. The change is timed from just
// before the command to the fleet to the receipt of the first answer that
// shows it; trials start at a random phase of the scrape interval.
func (r *results) measureFreshness(ctx context.Context, e *env, o options) error {
	bound := 10*o.interval + 10*time.Second
	for trial := range o.trials {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleep(ctx, rand.N(o.interval))
		pod, value := rand.IntN(o.pods), int64(1000+trial)
		start := time.Now()
		if err := e.fleet.set(ctx, pod, value); err != nil {
			return err
		}
		seen := false
		for time.Since(start) < bound && ctx.Err() == nil {
			v, err := e.values(ctx)
			if err == nil && v[pod] == value {
				r.freshness = append(r.freshness, time.Since(start))
				seen = true
				break
			}
			sleep(ctx, 20*time.Millisecond)
		}
		if !seen {
			r.missed++
			if r.missed >= maxMissed && len(r.freshness) == 0 {
				return nil // the adapter cannot keep up: the rest would miss too
			}
		}
	}
	return nil
}

// measureLatency asks q in enc from clients goroutines for d, each back to
// back, or, with a pace, each starting a question every pace (at once when
// the last answer took longer), the clients starting at random phases of
// it. An answer in another encoding than enc counts as an error.
func (e *env) measureLatency(ctx context.Context, q question, enc encoding, clients int, d, pace time.Duration) (latencyRun, error) {
	lr := latencyRun{question: q, encoding: enc, clients: clients}
	cpu0, err := e.cpu()
	if err != nil {
		return lr, err
	}
	stolen0, err := stolenTime()
	if err != nil {
		return lr, err
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			var errs int
			var first error
			if pace > 0 {
				sleep(runCtx, rand.N(pace))
			}
			for time.Now().Before(end) && runCtx.Err() == nil {
				t := time.Now()
				_, contentType, err := e.ask(runCtx, q, enc)
				if err == nil {
					err = checkContentType(enc, contentType)
				}
				switch {
				// Cut off at the end (the context's timer may fire late on a
				// loaded machine, so the clock is checked too): not counted.
				case runCtx.Err() != nil || !time.Now().Before(end):
				case err != nil:
					errs++
					if first == nil {
						first = err
					}
				default:
					mine = append(mine, time.Since(t))
				}
				if pace > 0 {
					sleep(runCtx, time.Until(t.Add(pace)))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, mine...)
			lr.errors += errs
			if lr.firstErr == nil {
				lr.firstErr = first
			}
		})
	}
	wg.Wait()
	lr.elapsed = time.Since(start)
	cpu1, err := e.cpu()
	if err != nil {
		return lr, err
	}
	lr.cpu = cpu1.minus(cpu0)
	stolen1, err := stolenTime()
	if err != nil {
		return lr, err
	}
	lr.stolen = stolen1 - stolen0
	lr.answers = len(all)
	if lr.answers == 0 {
		return lr, fmt.Errorf("no answers to the %s question in %s with %d clients: %w", q, enc, clients, errors.Join(lr.firstErr, errors.New("none succeeded")))
	}
	slices.Sort(all)
	lr.p50, lr.p99, lr.max = quantile(all, 0.50), quantile(all, 0.99), all[len(all)-1]
	return lr, nil
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func mbOrNA(b int64) string {
	if b < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d MB", b>>20)
}

func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1000) }

// msPrecise is d in milliseconds to the microsecond, for CPU per scrape.
func msPrecise(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// print writes the results as Markdown tables.
func (r *results) print(w io.Writer, o options) {
	q := r.quiet
	scrapes := q.totalScrapes()
	fmt.Fprintf(w, "\n### %d pods over %s, --scrape-interval=%s (--max-age=%s)\n\n", o.pods, strings.ToUpper(o.scrapeScheme), o.interval, 3*o.interval)
	fmt.Fprintf(w, "%d CPUs; load average (1, 5, 15 min) at the end: %s; %d fake-fleet process(es)\n\n", runtime.NumCPU(), loadAverage(), o.procs)
	fmt.Fprintln(w, "| measure | value |")
	fmt.Fprintln(w, "|---|---|")
	if n := len(r.freshness); n > 0 {
		f := r.sortedFreshness()
		fmt.Fprintf(w, "| freshness, change -> visible in the %d-pod answer (%d trials%s) | median %s, p90 %s, max %s |\n",
			o.pods, n, missedNote(r.missed), sec(quantile(f, 0.5)), sec(quantile(f, 0.9)), sec(f[n-1]))
	} else if r.missed > 0 {
		fmt.Fprintf(w, "| freshness | no change became visible in %d trials |\n", r.missed)
	}
	if scrapes > 0 {
		fmt.Fprintf(w, "| adapter CPU per pod-scrape (quiet %s) | %s (%.2f cores) |\n", q.window.Round(time.Second),
			msPrecise(q.perScrape(roleAdapter)), q.cores(roleAdapter))
		fmt.Fprintf(w, "| fake fleet CPU per pod-scrape (serving the page) | %s (%.2f cores) |\n",
			msPrecise(q.perScrape(roleFleet)), q.cores(roleFleet))
	}
	if q.window > 0 {
		fmt.Fprintf(w, "| the adapter's scrapes in the quiet window (its scrapes_total, scrape_failures_total) | %s |\n", r.quietCounts)
		fmt.Fprintf(w, "| connections the fake pods accepted in the quiet window (%s; 0 when every connection is kept) | %d |\n", o.scrapeScheme, r.quietConns)
		fmt.Fprintf(w, "| busy share of the cores in the quiet window (every process measured) | %.0f%% |\n", 100*q.busyShare())
		fmt.Fprintf(w, "| CPU stolen by the hypervisor (quiet window; /proc/stat steal) | %s of the cores' time |\n", stolenShare(q.stolen, q.window))
	}
	fmt.Fprintf(w, "| adapter RSS (VmRSS / VmHWM; VmRSS = anonymous + file) | %d MB / %d MB; %d MB + %d MB |\n", r.mem.rss>>20, r.mem.hwm>>20, r.mem.anon>>20, r.mem.file>>20)
	if c := r.cgroup; c != nil {
		hits := "n/a on cgroup v2"
		if c.limitHits >= 0 {
			hits = fmt.Sprint(c.limitHits)
		}
		fmt.Fprintf(w, "| adapter memory cgroup, limit %s enforced by the kernel (after the last latency run) | usage %d MB (anonymous %d MB + page cache %d MB + kernel %d MB), peak %s; OOM kills %d; charges that hit the limit %s |\n",
			o.memoryLimit, c.usage>>20, c.anon>>20, c.file>>20, max(c.usage-c.anon-c.file, 0)>>20, mbOrNA(c.peak), c.oomKills, hits)
	}
	if r.covered < o.pods {
		fmt.Fprintf(w, "| pods in the answer | never all: at most %d of %d within %s |\n", r.covered, o.pods, waitAllBound)
	}
	if len(q.scrapes) > 0 && q.window > 0 {
		c := slices.Clone(q.scrapes)
		slices.Sort(c)
		per := func(n int64) float64 { return float64(n) / q.window.Seconds() }
		fmt.Fprintf(w, "| scrapes per pod per second received | mean %.3f (min %.3f, max %.3f; expected %.3f) |\n",
			per(scrapes)/float64(len(c)), per(c[0]), per(c[len(c)-1]), 1/o.interval.Seconds())
	}
	if len(r.latency) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAnswer latency: each client asks %s.\n", paceText(o.pace))
	fmt.Fprintln(w, "\n| question | answer size | clients | answers/s | p50 | p99 | max | errors | adapter CPU per answer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var errs []string
	for _, l := range r.latency {
		fmt.Fprintf(w, "| %s | %s | %d | %.1f | %s | %s | %s | %d | %s |\n", l.label(o.pods), kb(l.size), l.clients, float64(l.answers)/l.elapsed.Seconds(),
			ms(l.p50), ms(l.p99), ms(l.max), l.errors, ms(q.perAnswer(l, roleAdapter)))
		if l.firstErr != nil {
			errs = append(errs, fmt.Sprintf("first error, %s with %d clients: %v", l.label(o.pods), l.clients, firstLine(l.firstErr.Error())))
		}
	}
	for _, e := range errs {
		fmt.Fprintf(w, "\n(%s)\n", e)
	}
	fmt.Fprintf(w, "\nCPU per answer by process (the quiet window's rate subtracted; the cores' capacity is %d × the run's length; time the hypervisor stole from the cores, in which runnable work here waited, is beside it):\n\n", runtime.NumCPU())
	if b := q.busyShare(); b >= saturatedShare {
		fmt.Fprintf(w, "(The quiet window already kept the cores %.0f%% busy, so the questions took CPU from scraping and serving pages: subtracting the quiet rate undercounts, and some figures below can be negative. Read the answers/s and latencies, not these.)\n\n", 100*b)
	}
	fmt.Fprintf(w, "| question | clients | %s | total | busy share of the cores | stolen by the hypervisor |\n", strings.Join(roles, " | "))
	fmt.Fprintf(w, "|---|---|%s---|---|---|\n", strings.Repeat("---|", len(roles)))
	for _, l := range r.latency {
		var cells []string
		var total, used time.Duration
		for _, role := range roles {
			d := q.perAnswer(l, role)
			total += d
			used += l.cpu[role]
			cells = append(cells, ms(d))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.0f%% | %s |\n", l.label(o.pods), l.clients, strings.Join(cells, " | "), ms(total),
			100*used.Seconds()/(l.elapsed.Seconds()*float64(runtime.NumCPU())), stolenShare(l.stolen, l.elapsed))
	}
}

// saturatedShare is the quiet window's busy share of the cores from which
// the CPU-per-answer figures are flagged as unreliable.
const saturatedShare = 0.8

// busyShare is the share of the cores' capacity that the measured
// processes used over the window.
func (u usage) busyShare() float64 {
	if u.window <= 0 {
		return 0
	}
	var used time.Duration
	for _, d := range u.cpu {
		used += d
	}
	return used.Seconds() / (u.window.Seconds() * float64(runtime.NumCPU()))
}

// stolenShare is the hypervisor's steal over a window as a share of the
// cores' capacity in it.
func stolenShare(stolen, window time.Duration) string {
	if window <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*stolen.Seconds()/(window.Seconds()*float64(runtime.NumCPU())))
}

// label names run l's question and encoding in the tables.
func (l latencyRun) label(pods int) string {
	return fmt.Sprintf("%s, %s", l.question.describe(pods), l.encoding.describe())
}

// perAnswer is role's CPU per answer of run l, less what role spent at the
// quiet window's rate (scraping, serving pages, the control plane's own
// loops) over the run.
func (q usage) perAnswer(l latencyRun, role string) time.Duration {
	if l.answers == 0 {
		return 0
	}
	extra := l.cpu[role]
	if q.window > 0 {
		extra -= time.Duration(float64(q.cpu[role]) / q.window.Seconds() * l.elapsed.Seconds())
	}
	return extra / time.Duration(l.answers)
}

func missedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d never seen within the bound", n)
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// loadAverage is /proc/loadavg's first three fields, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

// paceText says how each client asks, for the progress lines and tables.
func paceText(pace time.Duration) string {
	if pace <= 0 {
		return "back to back"
	}
	return fmt.Sprintf("one question every %s", pace)
}
