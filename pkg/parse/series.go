package parse

import "github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"

// role says what one wanted series contributes to a model's signals.
type role uint8

const (
	roleQueue      role = iota // summed into QueueSize
	roleBatch                  // summed into BatchSize
	roleKV                     // maxed into KVCacheUsage
	roleKVFallback             // maxed into KVCacheUsage, only when the model has no roleKV series at all
	roleFill                   // maxed into BatchFill
	roleBatchMax               // summed; BatchFill = BatchSize / this when no roleFill series
	numRoles
)

// roleAgg is how a role combines over a model's series (engines, pids, versions).
var roleAgg = [numRoles]signals.Aggregation{
	roleQueue:      signals.Sum,
	roleBatch:      signals.Sum,
	roleKV:         signals.Max,
	roleKVFallback: signals.Max,
	roleFill:       signals.Max,
	roleBatchMax:   signals.Sum,
}

// series is one wanted series: a metric name and, where one name carries
// several signals, the label value that selects this one.
type series struct {
	name        string
	role        role
	filterKey   string // "" when every series of the name counts
	filterValue string
}

// dialect is one server's wanted series and its model label.
type dialect struct {
	modelLabel string // "" when the server has no model label
	series     []series
}

// dialects lists the wanted series of each server (DESIGN.md, "Signals").
// Series sharing a name must be adjacent and share filterKey.
var dialects = [...]dialect{
	Unknown: {},
	VLLMV1: {modelLabel: "model_name", series: []series{
		{name: "vllm:num_requests_waiting", role: roleQueue},
		{name: "vllm:num_requests_running", role: roleBatch},
		{name: "vllm:kv_cache_usage_perc", role: roleKV},
		{name: "vllm:gpu_cache_usage_perc", role: roleKVFallback},
	}},
	VLLMV0: {modelLabel: "model_name", series: []series{
		{name: "vllm:num_requests_waiting", role: roleQueue},
		{name: "vllm:num_requests_running", role: roleBatch},
		{name: "vllm:gpu_cache_usage_perc", role: roleKV},
	}},
	TGI: {series: []series{
		{name: "tgi_queue_size", role: roleQueue},
		{name: "tgi_batch_current_size", role: roleBatch},
	}},
	SGLang: {modelLabel: "model_name", series: []series{
		{name: "sglang:num_queue_reqs", role: roleQueue},
		{name: "sglang:num_running_reqs", role: roleBatch},
		{name: "sglang:token_usage", role: roleKV},
	}},
	TRTLLMServe: {modelLabel: "model_name", series: []series{
		{name: "trtllm_num_requests_waiting", role: roleQueue},
		{name: "trtllm_num_requests_running", role: roleBatch},
		{name: "trtllm_kv_cache_utilization", role: roleKV},
	}},
	TritonTRTLLM: {modelLabel: "model", series: []series{
		{name: "nv_trt_llm_request_metrics", role: roleQueue, filterKey: "request_type", filterValue: "waiting"},
		{name: "nv_trt_llm_request_metrics", role: roleBatch, filterKey: "request_type", filterValue: "active"},
		{name: "nv_trt_llm_request_metrics", role: roleBatchMax, filterKey: "request_type", filterValue: "max"},
		{name: "nv_trt_llm_kv_cache_block_metrics", role: roleKV, filterKey: "kv_cache_block_type", filterValue: "fraction"},
	}},
	JetStream: {modelLabel: "model_name", series: []series{
		{name: "jetstream_prefill_backlog_size", role: roleQueue},
		// 1 - free/max slots, already 0..1 (JetStream orchestrator.py).
		{name: "jetstream_slots_used_percentage", role: roleFill},
	}},
}

// entry is a wanted series together with the server it belongs to.
type entry struct {
	series
	server Server
	same   int // number of entries from this one on with the same name
}

// wordGroup holds the entries whose names start with the same 8 bytes.
type wordGroup struct {
	word    uint64
	entries []entry
}

// matcher finds wanted series by name. Comparing a line's first 8 bytes
// against a few words rejects almost every unwanted line with one load.
type matcher struct {
	groups []wordGroup
}

// newMatcher builds the matcher for the given servers' series.
func newMatcher(servers ...Server) matcher {
	var m matcher
	for _, s := range servers {
		ss := dialects[s].series
		for i := 0; i < len(ss); i++ {
			w := firstWord(ss[i].name)
			g := m.group(w)
			n := 1
			for i+n < len(ss) && ss[i+n].name == ss[i].name {
				n++
			}
			for k := range n {
				g.entries = append(g.entries, entry{series: ss[i+k], server: s, same: n - k})
			}
			i += n - 1
		}
	}
	return m
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
// followed by a label set, a blank or the end), or nil.
func (m *matcher) match(line []byte) []entry {
	if len(line) < 8 {
		return nil
	}
	w := loadWord(line)
	for gi := range m.groups {
		g := &m.groups[gi]
		if g.word != w {
			continue
		}
		for k := 0; k < len(g.entries); k += g.entries[k].same {
			e := &g.entries[k]
			n := len(e.name)
			if len(line) >= n && string(line[:n]) == e.name && (len(line) == n || isNameEnd(line[n])) {
				return g.entries[k : k+e.same]
			}
		}
	}
	return nil
}

// firstWord is loadWord for a name; every wanted name is at least 8 bytes.
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
