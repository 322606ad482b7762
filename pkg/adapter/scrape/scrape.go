// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scrape owns fetching the /metrics pages of model servers and of
// gpu-agents (targets of Kind GPUAgent, whose pages go to the AgentSink set
// with Manager.SetAgentSink instead of the Sink): one loop per target at a
// fixed interval with a random start delay, all run by one scheduler (a
// loop is a small struct, not a goroutine; see sched.go), a bounded
// pool of workers shared by all loops (one namespace's loops hold at most a
// share of it, so one tenant's hanging pages cannot stall the others' scrapes),
// a second small pool for on-demand
// scrapes (ScrapeNow), per-request timeouts, a body-size limit, an HTTP/1.1
// client of its own that keeps one connection per target, never follows
// redirects and runs on the scrape's worker goroutine (no goroutine per
// connection), and gzip. Each fetched
// page is parsed with pkg/adapter/parse, within the scrape's deadline, and handed to
// a Sink together with the scrape's start time; a failed scrape is handed
// over as an *Error whose Reason says why.
//
// Memory does not grow with the number of targets times the page size: each
// of the Config.Concurrency + Config.FirstConcurrency workers owns one
// reusable body buffer, one gzip reader and one parse.Parser, and a scrape
// borrows a worker only for its own duration. A body buffer that grew past
// RetainBufferSize for a large page is released after that scrape, so the
// worst case, (Concurrency + FirstConcurrency) × MaxBodySize, is only reached
// while that many large pages are read at once; in steady state a worker
// holds about one typical page.
package scrape

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// Kind says what serves a target's page.
type Kind uint8

const (
	// ModelServer is an inference server's own page, parsed with pkg/adapter/parse
	// and handed to the Sink.
	ModelServer Kind = iota
	// GPUAgent is a gpu-agent's page of per-pod GPU activity, parsed with
	// pkg/adapter/agentpage and handed to the AgentSink.
	GPUAgent
)

// Target is one pod's metrics endpoint.
type Target struct {
	Pod    types.NamespacedName
	URL    string       // e.g. http://10.0.0.5:8000/metrics or https://10.0.0.5:8443/metrics
	Server parse.Server // forced dialect; parse.Unknown means detect from the page
	Kind   Kind
	// TLSServerName is the name an https target's certificate must be
	// valid for (and the SNI sent); empty means the URL's host.
	TLSServerName string
	// Auth is the credential the target asks for; AuthBearer is refused
	// over http, without Config.TLS.BearerTokenFile, with
	// InsecureSkipVerify, and for a HostNetwork pod unless
	// TokenToHostNetwork.
	Auth Auth
	// HostNetwork: the pod shares its node's network namespace.
	HostNetwork bool
}

// AgentSink stores the outcome of each scrape of a gpu-agent: the per-pod
// GPU activity of one node. pods is nil when err != nil and only valid
// during the call.
type AgentSink interface {
	RecordAgent(agent types.NamespacedName, at time.Time, pods []agentpage.PodGPU, err error)
}

// Sink stores the outcome of each scrape. at is the time the scrape started.
// page is nil when err != nil, and is only valid during the call: copy what
// you keep. Record is called from the scrape workers, concurrently for
// different pods, and holds a worker while it runs, so it must be quick.
type Sink interface {
	Record(pod types.NamespacedName, at time.Time, page *parse.Page, err error)
}

// Config tunes a Manager.
type Config struct {
	// Interval is the time between two scrapes of one target.
	Interval time.Duration
	// Timeout bounds one scrape (connect, request, body); at most Interval.
	Timeout time.Duration
	// MaxBodySize is the largest page accepted, in bytes after gzip
	// decompression. A larger page fails with ReasonBodyTooLarge; it is never
	// parsed truncated. A worker's buffer grows up to the page it reads and
	// is released after the scrape when larger than RetainBufferSize, so the
	// worst case is (Concurrency + FirstConcurrency) × MaxBodySize bytes.
	MaxBodySize int64
	// Concurrency is the number of background-loop scrapes that may run at
	// once across all targets (the number of loop workers). A target that
	// hangs holds one worker for at most Timeout. Size it so that targets ×
	// typical scrape time fits in Interval × Concurrency.
	Concurrency int
	// NamespaceConcurrency is the most loop workers the targets of one
	// namespace may hold at once, so that one namespace's slow or hanging
	// pages cannot take every worker from the others; its other loops wait
	// without holding a worker. 0 means half of Concurrency (at least 1).
	NamespaceConcurrency int
	// FirstConcurrency is the number of on-demand scrapes (ScrapeNow) that
	// may run at once: a pool of its own, so on-demand scrapes never take a
	// loop worker and cannot starve the loops.
	FirstConcurrency int
	// FirstNamespaceConcurrency is the most on-demand workers the pods of
	// one namespace may hold at once, so that one namespace asking about
	// many new pods whose pages hang cannot take the whole pool from the
	// other namespaces' first scrapes; its other scrapes wait, without a
	// worker, within their caller's deadline. 0 means half of
	// FirstConcurrency (at least 1), as for NamespaceConcurrency.
	FirstNamespaceConcurrency int
	// Jitter is the fraction of Interval, in [0, 1], over which each new
	// loop's first scrape is delayed at random: a loop waits a uniformly
	// random time in [0, Jitter×Interval) before its first scrape and then
	// scrapes every Interval. 1 spreads targets over the whole interval (the
	// steadiest load); 0 scrapes every new target at once.
	Jitter float64
	// RequestGzip asks servers for gzip-compressed pages. Off by default:
	// compressing on every scrape costs the model server CPU (prometheus
	// client libraries gzip on the fly) and the adapter about twice the CPU
	// per scrape, to save bandwidth that in-cluster pages rarely need. A
	// gzip body sent unasked is decompressed either way.
	RequestGzip bool
	// Servers are the servers the workers' parsers know: the built-in ones
	// and the custom ones of --server-config. nil means the built-in ones.
	Servers *parse.Servers
	// Histograms, when set, says for each model-server page whether its
	// latency histograms' bucket lines are parsed: it is called with the
	// target's pod before each parse, on the worker's goroutine, and must
	// be cheap and safe for concurrent use. It replaces Servers' own switch
	// (parse.Servers.WithHistograms). nil leaves that switch in charge.
	Histograms func(pod types.NamespacedName) bool
	// TLS verifies HTTPS targets and holds the credentials presented to
	// them; NewManager loads its files and fails when one cannot be.
	TLS TLSConfig
	// MaxKeptTLSConnections bounds the HTTPS connections kept for the next
	// scrape, over all targets: a target that holds one keeps it from one
	// scrape to the next (while it is in use too); past the bound a
	// target's connection is closed after its scrape, so each of its
	// scrapes pays a TLS handshake (a resumed session when the server
	// allows). Each kept TLS connection costs about KeptTLSConnectionBytes.
	// 0 keeps none. Plain HTTP connections are not bounded: one per target.
	MaxKeptTLSConnections int

	// dispatchSlack replaces dispatchSlack(Interval) when set: for the
	// benchmark that compares slacks.
	dispatchSlack time.Duration
}

// namespaceConcurrency is NamespaceConcurrency with its default applied.
func (c Config) namespaceConcurrency() int {
	if c.NamespaceConcurrency > 0 {
		return c.NamespaceConcurrency
	}
	return max(1, c.Concurrency/2)
}

// firstNamespaceConcurrency is FirstNamespaceConcurrency with its default
// applied.
func (c Config) firstNamespaceConcurrency() int {
	if c.FirstNamespaceConcurrency > 0 {
		return c.FirstNamespaceConcurrency
	}
	return max(1, c.FirstConcurrency/2)
}

// RetainBufferSize is the largest body buffer a worker keeps from one
// scrape to the next; a larger one, grown for a large page, is released.
const RetainBufferSize = 1 << 20

// DefaultConfig returns the defaults of the command-line flags: a 5 s
// interval, a 3 s timeout, a 4 MiB body limit, 32 loop workers, 4 on-demand
// workers and full jitter. Their worst case, (32 + 4) × 4 MiB = 144 MiB,
// fits the chart's 512 MiB memory limit with room.
func DefaultConfig() Config {
	return Config{
		Interval:         5 * time.Second,
		Timeout:          3 * time.Second,
		MaxBodySize:      4 << 20,
		Concurrency:      32,
		FirstConcurrency: 4,
		Jitter:           1,

		MaxKeptTLSConnections: DefaultMaxKeptTLSConnections,
	}
}

// DefaultMaxKeptTLSConnections is the default of
// Config.MaxKeptTLSConnections: 100 × KeptTLSConnectionBytes = 8,000 KiB,
// which fits beside the other defaults' worst case (page buffers, the KEDA
// port, the forecast's histories) in half of the Go memory limit the
// chart's 512Mi gives (416 MiB).
const DefaultMaxKeptTLSConnections = 100

// KeptTLSConnectionBytes is the memory one kept TLS scrape connection
// costs: 80 KiB, from the make fleet measurement at 1,000 pods at 1 s
// (docs/performance.md, "Scraping over TLS"), where the adapter's VmRSS
// was 182 MiB over https against 102 MiB over plain http, with every
// pod's connection kept: 80 MiB for 1,000 connections (their buffers and
// TLS state; not profiled).
const KeptTLSConnectionBytes = 80 << 10

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("scrape interval must be positive, got %v", c.Interval)
	case c.Timeout <= 0:
		return fmt.Errorf("scrape timeout must be positive, got %v", c.Timeout)
	case c.Timeout > c.Interval:
		return fmt.Errorf("scrape timeout (%v) must not exceed the scrape interval (%v)", c.Timeout, c.Interval)
	case c.MaxBodySize <= 0:
		return fmt.Errorf("maximum body size must be positive, got %d", c.MaxBodySize)
	case c.Concurrency <= 0:
		return fmt.Errorf("scrape concurrency must be positive, got %d", c.Concurrency)
	case c.NamespaceConcurrency < 0 || c.NamespaceConcurrency > c.Concurrency:
		return fmt.Errorf("per-namespace scrape concurrency must be in [0, %d] (the scrape concurrency), got %d", c.Concurrency, c.NamespaceConcurrency)
	case c.FirstConcurrency <= 0:
		return fmt.Errorf("first-scrape concurrency must be positive, got %d", c.FirstConcurrency)
	case c.FirstNamespaceConcurrency < 0 || c.FirstNamespaceConcurrency > c.FirstConcurrency:
		return fmt.Errorf("per-namespace first-scrape concurrency must be in [0, %d] (the first-scrape concurrency), got %d", c.FirstConcurrency, c.FirstNamespaceConcurrency)
	case !(c.Jitter >= 0 && c.Jitter <= 1): // also rejects NaN
		return fmt.Errorf("scrape jitter must be a fraction in [0, 1], got %v", c.Jitter)
	case c.MaxKeptTLSConnections < 0:
		return fmt.Errorf("the most kept TLS connections must not be negative, got %d", c.MaxKeptTLSConnections)
	}
	return nil
}

// Reasons a scrape fails, the Reason of an Error and the `reason` label of
// the inference_metrics_adapter_scrape_failures_total metric.
const (
	// ReasonTimeout: the scrape, parse included, did not finish within
	// Config.Timeout.
	ReasonTimeout = "timeout"
	// ReasonConnection: the connection could not be made or broke (refused,
	// reset, DNS, an invalid URL, a body cut short).
	ReasonConnection = "connection"
	// ReasonHTTPStatus: the server answered with a status other than 200.
	ReasonHTTPStatus = "http_status"
	// ReasonBodyTooLarge: the page (after decompression) exceeded Config.MaxBodySize.
	ReasonBodyTooLarge = "body_too_large"
	// ReasonRedirect: the server answered with a redirect; redirects are never followed.
	ReasonRedirect = "redirect"
	// ReasonParse: the body could not be decompressed or parsed.
	ReasonParse = "parse"
	// ReasonLimit: the page exceeds one of the parser's bounds
	// (parse.ErrLimit), e.g. too many series or too long a label value.
	ReasonLimit = "limit"
	// ReasonCanceled: the caller's context ended first (shutdown, a removed
	// target, or the deadline of ScrapeNow). It says nothing about the target.
	ReasonCanceled = "canceled"
)

// Reasons lists every Reason, in the order of the constants.
func Reasons() []string {
	return []string{ReasonTimeout, ReasonConnection, ReasonHTTPStatus, ReasonBodyTooLarge,
		ReasonRedirect, ReasonParse, ReasonLimit, ReasonCanceled}
}

// Error is the error (possibly wrapped) of a failed scrape. Reason is one of
// the Reason constants.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of the *Error in err's chain, or "" if there is none.
func ReasonOf(err error) string {
	if err == nil {
		return "" // without allocating e, which escapes into errors.As
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// logURL is u for errors and log lines: as it is when it is printable
// ASCII, else quoted. A Target's URL is built from a pod's annotations
// (pkg/adapter/targets refuses a path with a byte that is not valid in a URL), but
// a newline or an ESC in one would forge a log line or drive a terminal.
func logURL(u string) string {
	for i := range len(u) {
		if u[i] <= ' ' || u[i] >= 0x7f {
			return strconv.Quote(u)
		}
	}
	return u
}
