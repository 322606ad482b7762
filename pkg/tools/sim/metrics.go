// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder receives what the engine does. Calls come from the engine's
// goroutine only.
type recorder interface {
	// state is called after every step and when the engine goes idle.
	state(running, waiting, usedBlocks, totalBlocks int)
	// step is called after a step that computed tokens, of which
	// promptTokens belong to requests that emitted their first token and
	// genTokens were generated.
	step(tokens, promptTokens, genTokens int)
	preempted()
	firstToken(ttft time.Duration)
	interToken(itl time.Duration)
	finished(f finishedRequest)
	// adapters is called, with LoRA adapters configured, after the first
	// step and whenever the adapters with running or waiting requests
	// change; each list is in the order of the adapters' first request.
	adapters(running, waiting []string)
}

type finishedRequest struct {
	reason                  string
	promptTokens, genTokens int
	maxTokens               int
	e2e, queue, inference   time.Duration
	prefill, decode         time.Duration
}

type nopRecorder struct{}

func (nopRecorder) state(int, int, int, int) {}
func (nopRecorder) step(int, int, int)       {}
func (nopRecorder) preempted()               {}
func (nopRecorder) firstToken(time.Duration) {}
func (nopRecorder) interToken(time.Duration) {}
func (nopRecorder) finished(finishedRequest) {}
func (nopRecorder) adapters(_, _ []string)   {}

var _ recorder = nopRecorder{}

// Metrics is the /metrics page of one simulated server in one format. Every
// field is optional: a format fills in the families its server exposes.
type Metrics struct {
	running, waiting         []prometheus.Gauge
	kvUsage                  []prometheus.Gauge // fraction 0..1
	usedTokens, maxTokensNow prometheus.Gauge   // sglang num_used_tokens, tgi batch max tokens
	preemptions              prometheus.Counter
	promptTokens, genTokens  prometheus.Counter
	prefixQueries            []prometheus.Counter
	requests                 prometheus.Counter // tgi_request_count, counted when a request finishes
	success                  map[string]prometheus.Counter
	ttft, itl                prometheus.Observer
	e2e, queue, inference    prometheus.Observer
	prefill, decode          prometheus.Observer
	prefillPerToken          prometheus.Observer
	reqPrompt, reqGen        prometheus.Observer
	reqMaxGen, paramsN       prometheus.Observer
	paramsMaxTokens          prometheus.Observer
	iterationTokens          prometheus.Observer
	blockSize                int

	// vLLM V1's vllm:lora_requests_info, with LoRA adapters only.
	loraInfo *prometheus.GaugeVec
	maxLoRA  string
	loraLast float64          // the latest value set, unix seconds
	now      func() time.Time // wall clock of loraInfo's values
}

var _ recorder = (*Metrics)(nil)

// NewMetrics creates the metrics of cfg.MetricsFormat and registers them
// into reg. start is the creation time written into vLLM V1's _created
// families.
func NewMetrics(cfg Config, reg prometheus.Registerer, start time.Time) (*Metrics, error) {
	b := &builder{reg: reg, created: float64(start.UnixNano()) / 1e9}
	m := &Metrics{blockSize: cfg.BlockSize, now: time.Now}
	switch cfg.MetricsFormat {
	case FormatVLLMV1:
		b.labels = prometheus.Labels{"engine": cfg.Engine, "model_name": cfg.Model}
		b.withCreated = true
		buildVLLMV1(b, m, cfg)
	case FormatVLLMV0:
		b.labels = prometheus.Labels{"model_name": cfg.Model}
		buildVLLMV0(b, m, cfg)
	case FormatTGI:
		buildTGI(b, m)
	case FormatSGLang:
		b.labels = prometheus.Labels{"model_name": cfg.Model}
		buildSGLang(b, m)
	default:
		return nil, fmt.Errorf("unknown metrics format %q", cfg.MetricsFormat)
	}
	if b.err != nil {
		return nil, fmt.Errorf("registering %s metrics: %w", cfg.MetricsFormat, b.err)
	}
	return m, nil
}

// builder creates and registers metrics with a common label set, keeping
// the first error.
type builder struct {
	reg         prometheus.Registerer
	labels      prometheus.Labels
	withCreated bool    // emit prometheus_client's <name>_created gauges
	created     float64 // unix seconds
	err         error
}

func (b *builder) register(c prometheus.Collector) {
	if b.err == nil {
		b.err = b.reg.Register(c)
	}
}

func (b *builder) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: b.labels})
	b.register(g)
	return g
}

// createdGauge adds the <base>_created gauge prometheus_client writes next
// to each counter and histogram.
func (b *builder) createdGauge(base, help string, extra prometheus.Labels) {
	if !b.withCreated {
		return
	}
	labels := prometheus.Labels{}
	for k, v := range b.labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: base + "_created", Help: help, ConstLabels: labels})
	g.Set(b.created)
	b.register(g)
}

// counter registers a counter; name ends in _total.
func (b *builder) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: b.labels})
	b.register(c)
	b.createdGauge(name[:len(name)-len("_total")], help, nil)
	return c
}

// reasonCounters registers a counter with a finished_reason label and one
// series per reason, all present from the start.
func (b *builder) reasonCounters(name, help string, reasons ...string) map[string]prometheus.Counter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: b.labels}, []string{"finished_reason"})
	b.register(vec)
	out := map[string]prometheus.Counter{}
	for _, r := range reasons {
		out[r] = vec.WithLabelValues(r)
	}
	for _, r := range reasons {
		b.createdGauge(name[:len(name)-len("_total")], help, prometheus.Labels{"finished_reason": r})
	}
	return out
}

func (b *builder) histogram(name, help string, buckets []float64) prometheus.Observer {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: b.labels, Buckets: buckets})
	b.register(h)
	b.createdGauge(name, help, nil)
	return h
}

// Bucket boundaries of vLLM V1 (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	prefillPerTokenBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0}
	iterationBuckets       = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	nBuckets               = []float64{1, 2, 5, 10, 20}
)

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max.
func buckets125(max int) []float64 {
	var out []float64
	for exp := 1.0; ; exp *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * exp
			if v > float64(max) {
				return out
			}
			out = append(out, v)
		}
	}
}

func buildVLLMV1(b *builder, m *Metrics, cfg Config) {
	m.running = []prometheus.Gauge{b.gauge("vllm:num_requests_running", "Number of requests in model execution batches.")}
	m.waiting = []prometheus.Gauge{b.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")}
	m.kvUsage = []prometheus.Gauge{
		b.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead."),
	}
	m.prefixQueries = []prometheus.Counter{
		b.counter("vllm:gpu_prefix_cache_queries_total", "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead."),
	}
	b.counter("vllm:gpu_prefix_cache_hits_total", "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.")
	m.kvUsage = append(m.kvUsage, b.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."))
	m.prefixQueries = append(m.prefixQueries, b.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."))
	b.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.preemptions = b.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.promptTokens = b.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = b.counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.success = b.reasonCounters("vllm:request_success_total", "Count of successfully processed requests.", ReasonStop, ReasonLength, ReasonAbort)
	tokenBuckets := buckets125(cfg.MaxModelLen)
	m.reqPrompt = b.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets)
	m.reqGen = b.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets)
	m.iterationTokens = b.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationBuckets)
	m.reqMaxGen = b.histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tokenBuckets)
	m.paramsN = b.histogram("vllm:request_params_n", "Histogram of the n request parameter.", nBuckets)
	m.paramsMaxTokens = b.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokenBuckets)
	m.ttft = b.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = b.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpotBuckets)
	m.prefillPerToken = b.histogram("vllm:time_per_prefill_token_request_seconds", "Time spent per token during prefill  phase in seconds", prefillPerTokenBuckets)
	m.e2e = b.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", latencyBuckets)
	m.queue = b.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", latencyBuckets)
	m.inference = b.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", latencyBuckets)
	m.prefill = b.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", latencyBuckets)
	m.decode = b.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", latencyBuckets)

	info := prometheus.Labels{
		"block_size": strconv.Itoa(cfg.BlockSize), "cache_dtype": "auto", "calculate_kv_scales": "False",
		"cpu_kvcache_space_bytes": "None", "cpu_offload_gb": "0", "enable_prefix_caching": "False",
		"engine": cfg.Engine, "gpu_memory_utilization": "0.9", "is_attention_free": "False",
		"num_cpu_blocks": "0", "num_gpu_blocks": strconv.Itoa(cfg.NumGPUBlocks), "num_gpu_blocks_override": "None",
		"prefix_caching_hash_algo": "builtin", "sliding_window": "None", "swap_space": "4", "swap_space_bytes": "4294967296",
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig", ConstLabels: info})
	g.Set(1)
	b.register(g)

	if cfg.LoRAAdapters != "" {
		// As in vLLM: no engine or model_name label.
		m.loraInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:lora_requests_info", Help: "Running stats on lora requests."},
			[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"})
		m.maxLoRA = strconv.Itoa(cfg.MaxLoRAs)
		b.register(m.loraInfo)
	}
}

func buildVLLMV0(b *builder, m *Metrics, cfg Config) {
	m.running = []prometheus.Gauge{b.gauge("vllm:num_requests_running", "Number of requests currently running on GPU.")}
	m.waiting = []prometheus.Gauge{b.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")}
	b.gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.")
	m.kvUsage = []prometheus.Gauge{b.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.")}
	b.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.")
	m.preemptions = b.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.promptTokens = b.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = b.counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.ttft = b.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets[:16])
	m.itl = b.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpotBuckets[:13])
	m.e2e = b.histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
		[]float64{1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0})
	tokenBuckets := buckets125(min(cfg.MaxModelLen, 2048))
	m.reqPrompt = b.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets)
	m.reqGen = b.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets)
	m.paramsN = b.histogram("vllm:request_params_n", "Histogram of the n request parameter.", nBuckets)
	m.success = b.reasonCounters("vllm:request_success_total", "Count of successfully processed requests.", ReasonStop, ReasonLength, ReasonAbort)
}

func buildTGI(b *builder, m *Metrics) {
	m.waiting = []prometheus.Gauge{b.gauge("tgi_queue_size", "Current queue size")}
	m.running = []prometheus.Gauge{b.gauge("tgi_batch_current_size", "Current batch size")}
	m.maxTokensNow = b.gauge("tgi_batch_current_max_tokens", "Maximum tokens for the current batch")
	m.requests = b.counterPlain("tgi_request_count", "Total number of requests")
	m.success = map[string]prometheus.Counter{ReasonLength: b.counterPlain("tgi_request_success", "Number of successful requests")}
	m.success[ReasonStop] = m.success[ReasonLength]
}

// counterPlain registers a counter whose name has no _total suffix (TGI).
func (b *builder) counterPlain(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: b.labels})
	b.register(c)
	return c
}

func buildSGLang(b *builder, m *Metrics) {
	m.promptTokens = b.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = b.counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.kvUsage = []prometheus.Gauge{b.gauge("sglang:token_usage", "The token usage")}
	b.gauge("sglang:cache_hit_rate", "The cache hit rate")
	m.ttft = b.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
		[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 25.0, 30.0})
	m.e2e = b.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
		[]float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0})
	m.itl = b.histogram("sglang:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
		[]float64{0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5})
	m.running = []prometheus.Gauge{b.gauge("sglang:num_running_reqs", "The number of running requests")}
	m.usedTokens = b.gauge("sglang:num_used_tokens", "The number of used tokens")
	m.waiting = []prometheus.Gauge{b.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue")}
}

func setAll(gs []prometheus.Gauge, v float64) {
	for _, g := range gs {
		g.Set(v)
	}
}

func observe(o prometheus.Observer, v float64) {
	if o != nil {
		o.Observe(v)
	}
}

func add(c prometheus.Counter, v float64) {
	if c != nil && v > 0 {
		c.Add(v)
	}
}

func (m *Metrics) state(running, waiting, usedBlocks, totalBlocks int) {
	setAll(m.running, float64(running))
	setAll(m.waiting, float64(waiting))
	setAll(m.kvUsage, float64(usedBlocks)/float64(totalBlocks))
	if m.usedTokens != nil {
		m.usedTokens.Set(float64(usedBlocks * m.blockSize))
	}
	if m.maxTokensNow != nil {
		m.maxTokensNow.Set(float64(usedBlocks * m.blockSize))
	}
}

func (m *Metrics) step(tokens, promptTokens, genTokens int) {
	observe(m.iterationTokens, float64(tokens))
	add(m.promptTokens, float64(promptTokens))
	add(m.genTokens, float64(genTokens))
	for _, c := range m.prefixQueries {
		add(c, float64(promptTokens))
	}
}

func (m *Metrics) preempted() {
	add(m.preemptions, 1)
}

func (m *Metrics) firstToken(ttft time.Duration) { observe(m.ttft, ttft.Seconds()) }

func (m *Metrics) interToken(itl time.Duration) { observe(m.itl, itl.Seconds()) }

func (m *Metrics) finished(f finishedRequest) {
	add(m.requests, 1)
	if c, ok := m.success[f.reason]; ok {
		add(c, 1)
	}
	observe(m.e2e, f.e2e.Seconds())
	observe(m.queue, f.queue.Seconds())
	observe(m.inference, f.inference.Seconds())
	observe(m.prefill, f.prefill.Seconds())
	observe(m.decode, f.decode.Seconds())
	if f.genTokens > 0 {
		observe(m.prefillPerToken, f.prefill.Seconds()/float64(f.promptTokens))
	}
	observe(m.reqPrompt, float64(f.promptTokens))
	observe(m.reqGen, float64(f.genTokens))
	observe(m.reqMaxGen, float64(f.maxTokens))
	observe(m.paramsN, 1)
	observe(m.paramsMaxTokens, float64(f.maxTokens))
}

// adapters sets the vllm:lora_requests_info line of these lists to the
// current unix time, as vLLM's set_to_current_time does: every list pair
// seen keeps its line, and the line with the latest value is the current
// state. Values strictly increase, so that two changes within the clock's
// resolution still order.
func (m *Metrics) adapters(running, waiting []string) {
	if m.loraInfo == nil {
		return
	}
	v := max(float64(m.now().UnixNano())/1e9, math.Nextafter(m.loraLast, math.Inf(1)))
	m.loraLast = v
	m.loraInfo.WithLabelValues(m.maxLoRA, strings.Join(running, ","), strings.Join(waiting, ",")).Set(v)
}
