// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"slices"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// role says what one wanted series contributes to a model's signals.
type role uint8

const (
	roleQueue      role = iota // summed into QueueSize
	roleBatch                  // summed into BatchSize
	roleKV                     // maxed into KVCacheUsage
	roleKVFallback             // maxed into KVCacheUsage, only when the model has no roleKV series at all
	roleFill                   // maxed into BatchFill
	roleBatchMax               // summed; BatchFill = BatchSize / this when no roleFill series

	// A front door's (the endpoint picker's) gauges under their deprecated
	// names: each counts only when the model has no series at all under the
	// current name (roleQueue, roleBatch, roleSaturation), so that a page
	// exporting both is counted once, and the current name wins.
	roleQueueOld
	roleBatchOld
	roleSaturation    // maxed into BatchFill; may exceed 1 (an oversubscribed pool)
	roleSaturationOld // roleSaturation under its deprecated name

	// Counters, summed over a model's series: the rate signals' sources.
	roleGenTokens    // catalog.GenerationTokens
	rolePromptTokens // catalog.PromptTokens
	roleRequests     // catalog.Requests
	rolePreempt      // catalog.Preemptions

	// Histogram buckets (the le label), summed bucket by bucket over a
	// model's series: the percentile signals' sources.
	roleTTFT        // catalog.TimeToFirstToken
	roleITL         // catalog.InterTokenLatency
	roleITLFallback // catalog.InterTokenLatency, only when the model has no roleITL series at all
	roleQueueTime   // catalog.QueueTime
	roleE2E         // catalog.E2ELatency

	// vllm:lora_requests_info: the line with the latest value (a
	// timestamp) wins; its adapter-list labels are counted into the two
	// roles after it, which no series has.
	roleLoRA
	roleLoRARunning
	roleLoRAWaiting
	numRoles

	numGaugeRoles = roleGenTokens
)

// isCounter reports whether r is a counter.
func (r role) isCounter() bool { return r >= roleGenTokens && r <= rolePreempt }

// counter returns the signals counter of a counter role.
func (r role) counter() catalog.Counter { return catalog.Counter(r - roleGenTokens) }

// bucket returns the histogram slot of a bucket role, and whether r is one.
func (r role) bucket() (int, bool) {
	if r >= roleTTFT && r <= roleE2E {
		return int(r - roleTTFT), true
	}
	return 0, false
}

// numHistSlots is the number of bucket roles; slot i holds role roleTTFT+i.
const numHistSlots = int(roleE2E - roleTTFT + 1)

// loraKeys are the labels of vllm:lora_requests_info the parser reads.
var loraKeys = []string{"running_lora_adapters", "waiting_lora_adapters"}

// slotLatency maps histogram slots to the latency they measure.
var slotLatency = [numHistSlots]catalog.Latency{
	catalog.TimeToFirstToken, catalog.InterTokenLatency, catalog.InterTokenLatency, catalog.QueueTime, catalog.E2ELatency,
}

// roleAgg is how a role combines over a model's series (engines, pids, versions).
var roleAgg = [numRoles]catalog.Aggregation{
	roleQueue:      catalog.Sum,
	roleBatch:      catalog.Sum,
	roleKV:         catalog.Max,
	roleKVFallback: catalog.Max,
	roleFill:       catalog.Max,
	roleBatchMax:   catalog.Sum,

	roleQueueOld:      catalog.Sum,
	roleBatchOld:      catalog.Sum,
	roleSaturation:    catalog.Max,
	roleSaturationOld: catalog.Max,

	roleGenTokens:    catalog.Sum,
	rolePromptTokens: catalog.Sum,
	roleRequests:     catalog.Sum,
	rolePreempt:      catalog.Sum,
}

// series is one wanted series: a metric name and, where one name carries
// several signals, the exact label values that select this one.
type series struct {
	name    string
	role    role
	filters []labelMatch // every one must hold; none: every series of the name counts
	scale   float64      // each sample is multiplied by this; 0 means 1
}

// labelMatch selects series whose label key has the value value; an absent
// label counts as "", as in PromQL.
type labelMatch struct {
	key, value string
}

// is is a one-label filter, for the table below.
func is(key, value string) []labelMatch { return []labelMatch{{key, value}} }

// dialect is one server's wanted series and its model label.
type dialect struct {
	name       string // the annotation spelling; "" for built-ins (see serverNames)
	modelLabel string // "" when the server has no model label
	series     []series
}

// dialects lists the wanted series of each built-in server (the table in
// docs/parser.md). Series sharing a name must be adjacent.
var dialects = [...]dialect{
	Unknown: {},
	VLLMV1: {modelLabel: "model_name", series: []series{
		{name: "vllm:num_requests_waiting", role: roleQueue},
		{name: "vllm:num_requests_running", role: roleBatch},
		{name: "vllm:kv_cache_usage_perc", role: roleKV},
		{name: "vllm:gpu_cache_usage_perc", role: roleKVFallback},
		{name: "vllm:generation_tokens_total", role: roleGenTokens},
		{name: "vllm:prompt_tokens_total", role: rolePromptTokens},
		{name: "vllm:request_success_total", role: roleRequests},
		{name: "vllm:num_preemptions_total", role: rolePreempt},
		{name: "vllm:time_to_first_token_seconds_bucket", role: roleTTFT},
		{name: "vllm:inter_token_latency_seconds_bucket", role: roleITL},
		{name: "vllm:time_per_output_token_seconds_bucket", role: roleITLFallback},
		{name: "vllm:request_queue_time_seconds_bucket", role: roleQueueTime},
		{name: "vllm:e2e_request_latency_seconds_bucket", role: roleE2E},
		{name: "vllm:lora_requests_info", role: roleLoRA},
	}},
	VLLMV0: {modelLabel: "model_name", series: []series{
		{name: "vllm:num_requests_waiting", role: roleQueue},
		{name: "vllm:num_requests_running", role: roleBatch},
		{name: "vllm:gpu_cache_usage_perc", role: roleKV},
		{name: "vllm:generation_tokens_total", role: roleGenTokens},
		{name: "vllm:prompt_tokens_total", role: rolePromptTokens},
		{name: "vllm:request_success_total", role: roleRequests},
		{name: "vllm:num_preemptions_total", role: rolePreempt},
		{name: "vllm:time_to_first_token_seconds_bucket", role: roleTTFT},
		{name: "vllm:time_per_output_token_seconds_bucket", role: roleITL},
		// From vLLM 0.6 on; older V0 releases have no queue-time histogram.
		{name: "vllm:request_queue_time_seconds_bucket", role: roleQueueTime},
		{name: "vllm:e2e_request_latency_seconds_bucket", role: roleE2E},
		{name: "vllm:lora_requests_info", role: roleLoRA},
	}},
	TGI: {series: []series{
		{name: "tgi_queue_size", role: roleQueue},
		{name: "tgi_batch_current_size", role: roleBatch},
		// TGI counts tokens only in per-request histograms: their sums are counters.
		{name: "tgi_request_generated_tokens_sum", role: roleGenTokens},
		{name: "tgi_request_input_length_sum", role: rolePromptTokens},
		{name: "tgi_request_success", role: roleRequests},
		// A per-request mean, not per token: see docs/metrics.md.
		{name: "tgi_request_mean_time_per_token_duration_bucket", role: roleITL},
		{name: "tgi_request_queue_duration_bucket", role: roleQueueTime},
		{name: "tgi_request_duration_bucket", role: roleE2E},
	}},
	SGLang: {modelLabel: "model_name", series: []series{
		{name: "sglang:num_queue_reqs", role: roleQueue},
		{name: "sglang:num_running_reqs", role: roleBatch},
		{name: "sglang:token_usage", role: roleKV},
		{name: "sglang:generation_tokens_total", role: roleGenTokens},
		{name: "sglang:prompt_tokens_total", role: rolePromptTokens},
		{name: "sglang:num_requests_total", role: roleRequests},
		{name: "sglang:num_retracted_requests_total", role: rolePreempt},
		{name: "sglang:time_to_first_token_seconds_bucket", role: roleTTFT},
		{name: "sglang:inter_token_latency_seconds_bucket", role: roleITL},
		{name: "sglang:time_per_output_token_seconds_bucket", role: roleITLFallback},
		{name: "sglang:queue_time_seconds_bucket", role: roleQueueTime},
		{name: "sglang:e2e_request_latency_seconds_bucket", role: roleE2E},
	}},
	TRTLLMServe: {modelLabel: "model_name", series: []series{
		{name: "trtllm_num_requests_waiting", role: roleQueue},
		{name: "trtllm_num_requests_running", role: roleBatch},
		{name: "trtllm_kv_cache_utilization", role: roleKV},
		{name: "trtllm_request_success_total", role: roleRequests},
		{name: "trtllm_time_to_first_token_seconds_bucket", role: roleTTFT},
		{name: "trtllm_time_per_output_token_seconds_bucket", role: roleITL},
		{name: "trtllm_request_queue_time_seconds_bucket", role: roleQueueTime},
		{name: "trtllm_e2e_request_latency_seconds_bucket", role: roleE2E},
	}},
	TritonTRTLLM: {modelLabel: "model", series: []series{
		{name: "nv_trt_llm_request_metrics", role: roleQueue, filters: is("request_type", "waiting")},
		{name: "nv_trt_llm_request_metrics", role: roleBatch, filters: is("request_type", "active")},
		{name: "nv_trt_llm_request_metrics", role: roleBatchMax, filters: is("request_type", "max")},
		{name: "nv_trt_llm_kv_cache_block_metrics", role: roleKV, filters: is("kv_cache_block_type", "fraction")},
	}},
	JetStream: {modelLabel: "model_name", series: []series{
		{name: "jetstream_prefill_backlog_size", role: roleQueue},
		// 1 - free/max slots, already 0..1 (JetStream orchestrator.py).
		{name: "jetstream_slots_used_percentage", role: roleFill},
		{name: "jetstream_request_success_count_total", role: roleRequests},
		{name: "jetstream_time_to_first_token_bucket", role: roleTTFT},
		// A per-request mean, not per token: see docs/metrics.md.
		{name: "jetstream_time_per_output_token_bucket", role: roleITL},
		{name: "jetstream_queue_duration_bucket", role: roleQueueTime},
		{name: "jetstream_time_per_request_bucket", role: roleE2E},
	}},
	// Front doors: the requests they hold, not yet sent to a model server,
	// are their queue (docs/scale-to-zero.md). The EPP's gauge is per
	// fairness_id, priority and inference_pool: summed. Its requests in
	// flight (dispatched, not finished) are its batch, and its pool's
	// saturation its batch fill (docs/metrics.md, front door). Names as
	// registered in pkg/epp/metrics of the Gateway API Inference Extension
	// (inference_extension_*, inference_objective_*) and of llm-d's router,
	// which renamed them (llm_d_router_epp_*, then llm_d_epp_*) and keeps
	// the old ones, marked deprecated, beside them: the current names win.
	GIEEPP: {modelLabel: "model_name", series: []series{
		{name: "llm_d_epp_flow_control_queue_size", role: roleQueue},
		{name: "llm_d_router_epp_flow_control_queue_size", role: roleQueue},
		{name: "inference_extension_flow_control_queue_size", role: roleQueueOld},
		{name: "llm_d_epp_request_running", role: roleBatch},
		{name: "llm_d_router_epp_running_requests", role: roleBatch},
		{name: "inference_objective_running_requests", role: roleBatchOld},
		// One per pool; newer llm-d splits it by stage (prefill, decode, and
		// effective = the larger, which gates dispatch): effective is read.
		{name: "llm_d_epp_flow_control_pool_saturation", role: roleSaturation, filters: is("stage", "effective")},
		{name: "llm_d_epp_flow_control_pool_saturation", role: roleSaturation, filters: is("stage", "")},
		{name: "llm_d_router_epp_flow_control_pool_saturation", role: roleSaturation},
		{name: "inference_extension_flow_control_pool_saturation", role: roleSaturationOld, filters: is("stage", "effective")},
		{name: "inference_extension_flow_control_pool_saturation", role: roleSaturationOld, filters: is("stage", "")},
	}},
	FrontDoor: {modelLabel: "model_name", series: []series{
		{name: "inference_front_door_pending_requests", role: roleQueue},
	}},
}

// entry is a wanted series together with the server it belongs to. The
// entries of one server that share a name form a run; the run's entries all
// hold the same keys.
type entry struct {
	series
	server Server
	same   int      // number of entries from this one on with the same name
	keys   []string // the filter label keys of the whole run, and "le" for bucket runs
	idx    []int    // per filter: its key's index in keys
	le     int      // for a bucket role: the index of "le" in keys
}

// wordGroup holds the entries whose names start with the same 8 bytes.
type wordGroup struct {
	word    uint64
	entries []entry
}

// matcher finds wanted series by name. Comparing a line's first 8 bytes
// against a few words rejects almost every unwanted line with one load.
// Names shorter than 8 bytes (possible in custom tables only) are compared
// one by one.
type matcher struct {
	groups     []wordGroup
	slots      []int32 // open-addressing table of groups by word: index+1, 0 empty; a power of two long
	short      []entry
	shortFirst [4]uint64 // bit set of the first bytes of the short names
	maxKeys    int       // the most filter keys of any run
}

// newMatcher builds the matcher for the given servers' series; each server's
// series must be grouped by name (see groupByName). Without hist it leaves
// the histogram bucket series out.
func newMatcher(ds []dialect, hist bool, servers ...Server) matcher {
	var m matcher
	for _, s := range servers {
		ss := ds[s].series
		if !hist {
			ss = slices.DeleteFunc(slices.Clone(ss), func(se series) bool { _, ok := se.role.bucket(); return ok })
		}
		for i := 0; i < len(ss); i++ {
			n := 1
			for i+n < len(ss) && ss[i+n].name == ss[i].name {
				n++
			}
			var keys []string
			for k := range n {
				for _, f := range ss[i+k].filters {
					if !slices.Contains(keys, f.key) {
						keys = append(keys, f.key)
					}
				}
				if _, ok := ss[i+k].role.bucket(); ok && !slices.Contains(keys, "le") {
					keys = append(keys, "le")
				}
				if ss[i+k].role == roleLoRA {
					for _, lk := range loraKeys {
						if !slices.Contains(keys, lk) {
							keys = append(keys, lk)
						}
					}
				}
			}
			m.maxKeys = max(m.maxKeys, len(keys))
			dst := &m.short
			if len(ss[i].name) >= 8 {
				dst = &m.group(firstWord(ss[i].name)).entries
			} else {
				c := ss[i].name[0]
				m.shortFirst[c>>6] |= 1 << (c & 63)
			}
			for k := range n {
				e := entry{series: ss[i+k], server: s, same: n - k, keys: keys, le: slices.Index(keys, "le")}
				for _, f := range e.filters {
					e.idx = append(e.idx, slices.Index(keys, f.key))
				}
				*dst = append(*dst, e)
			}
			i += n - 1
		}
	}
	m.index()
	return m
}

// index builds m.slots, at most half full, so that a line's word finds its
// group in about one probe whatever the number of names.
func (m *matcher) index() {
	n := 8
	for n < 2*len(m.groups) {
		n *= 2
	}
	m.slots = make([]int32, n)
	for gi := range m.groups {
		i := m.slot(m.groups[gi].word)
		for m.slots[i] != 0 {
			i = (i + 1) & (n - 1)
		}
		m.slots[i] = int32(gi + 1)
	}
}

// slot is the home slot of w in m.slots (Fibonacci hashing).
func (m *matcher) slot(w uint64) int {
	return int((w * 0x9e3779b97f4a7c15) >> 32 & uint64(len(m.slots)-1))
}

func (m *matcher) group(w uint64) *wordGroup {
	for i := range m.groups {
		if m.groups[i].word == w {
			return &m.groups[i]
		}
	}
	m.groups = append(m.groups, wordGroup{word: w})
	return &m.groups[len(m.groups)-1]
}

// match returns the entries named by the start of line (the name must be
// followed by a label set, a blank or the end), or nil. When several
// servers want the same name, the first server's run is returned.
func (m *matcher) match(line []byte) []entry {
	if len(line) >= 8 {
		w := loadWord(line)
		for i := m.slot(w); m.slots[i] != 0; i = (i + 1) & (len(m.slots) - 1) {
			if g := &m.groups[m.slots[i]-1]; g.word == w {
				if es := matchRun(g.entries, line); es != nil {
					return es
				}
				break // one group per word
			}
		}
	}
	if c := line[0]; m.shortFirst[c>>6]&(1<<(c&63)) != 0 {
		return matchRun(m.short, line)
	}
	return nil
}

// matchRun returns the run of entries whose name starts line, or nil.
func matchRun(entries []entry, line []byte) []entry {
	for k := 0; k < len(entries); k += entries[k].same {
		e := &entries[k]
		n := len(e.name)
		if len(line) >= n && string(line[:n]) == e.name && (len(line) == n || isNameEnd(line[n])) {
			return entries[k : k+e.same]
		}
	}
	return nil
}

// groupByName returns ss with series of the same name made adjacent, in
// order of each name's first appearance.
func groupByName(ss []series) []series {
	out := make([]series, 0, len(ss))
	for i, s := range ss {
		if slices.ContainsFunc(out, func(o series) bool { return o.name == s.name }) {
			continue
		}
		for _, t := range ss[i:] {
			if t.name == s.name {
				out = append(out, t)
			}
		}
	}
	return out
}

// firstWord is loadWord for a name of at least 8 bytes.
func firstWord(name string) uint64 {
	return loadWord([]byte(name))
}

// loadWord reads b[0:8] little-endian; len(b) >= 8.
func loadWord(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func isNameEnd(c byte) bool { return c == '{' || c == ' ' || c == '\t' }
