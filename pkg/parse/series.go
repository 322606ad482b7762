package parse

import (
	"slices"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"
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
		{name: "nv_trt_llm_request_metrics", role: roleQueue, filters: is("request_type", "waiting")},
		{name: "nv_trt_llm_request_metrics", role: roleBatch, filters: is("request_type", "active")},
		{name: "nv_trt_llm_request_metrics", role: roleBatchMax, filters: is("request_type", "max")},
		{name: "nv_trt_llm_kv_cache_block_metrics", role: roleKV, filters: is("kv_cache_block_type", "fraction")},
	}},
	JetStream: {modelLabel: "model_name", series: []series{
		{name: "jetstream_prefill_backlog_size", role: roleQueue},
		// 1 - free/max slots, already 0..1 (JetStream orchestrator.py).
		{name: "jetstream_slots_used_percentage", role: roleFill},
	}},
}

// entry is a wanted series together with the server it belongs to. The
// entries of one server that share a name form a run; the run's entries all
// hold the same keys.
type entry struct {
	series
	server Server
	same   int      // number of entries from this one on with the same name
	keys   []string // the filter label keys of the whole run
	idx    []int    // per filter: its key's index in keys
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
	short      []entry
	shortFirst [4]uint64 // bit set of the first bytes of the short names
	maxKeys    int       // the most filter keys of any run
}

// newMatcher builds the matcher for the given servers' series; each server's
// series must be grouped by name (see groupByName).
func newMatcher(ds []dialect, servers ...Server) matcher {
	var m matcher
	for _, s := range servers {
		ss := ds[s].series
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
				e := entry{series: ss[i+k], server: s, same: n - k, keys: keys}
				for _, f := range e.filters {
					e.idx = append(e.idx, slices.Index(keys, f.key))
				}
				*dst = append(*dst, e)
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
// followed by a label set, a blank or the end), or nil. When several
// servers want the same name, the first server's run is returned.
func (m *matcher) match(line []byte) []entry {
	if len(line) >= 8 {
		w := loadWord(line)
		for gi := range m.groups {
			if g := &m.groups[gi]; g.word == w {
				if es := matchRun(g.entries, line); es != nil {
					return es
				}
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
