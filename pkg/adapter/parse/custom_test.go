// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"math"
	"strings"
	"testing"
)

// testServers is a custom table with two servers; see the pages below.
func testServers(t testing.TB) *Servers {
	t.Helper()
	s, err := NewServers([]CustomServer{
		{Name: "my-server", ModelLabel: "model",
			Queue:     Series{Name: "my_server_queue_depth"},
			Batch:     Series{Name: "my_server_requests", Labels: map[string]string{"state": "running"}},
			KVCache:   Series{Name: "my_server_kv_percent", Scale: 0.01},
			BatchFill: Series{Name: "slots", Labels: map[string]string{"kind": "decode", "state": "used"}}},
		{Name: "vllm-fork", ModelLabel: "served_model",
			Queue: Series{Name: "vllm:num_requests_waiting"},
			Batch: Series{Name: "fork_running"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseCustom(t *testing.T) {
	servers := testServers(t)
	my, _ := servers.ByName("my-server")
	fork, _ := servers.ByName("vllm-fork")
	tests := []struct {
		name  string
		page  string
		force Server
		want  Page
	}{
		{"detected, per model, summed and maxed, scaled, filtered", `# HELP my_server_queue_depth waiting
my_server_queue_depth{model="a",worker="0"} 2
my_server_queue_depth{model="a",worker="1"} 3
my_server_queue_depth{model="b"} 1
my_server_requests{model="a",state="running"} 4
my_server_requests{model="a",state="running",worker="1"} 5
my_server_requests{model="a",state="waiting"} 99
my_server_kv_percent{model="a",worker="0"} 40
my_server_kv_percent{model="a",worker="1"} 60
my_server_kv_percent{model="b"} 10
slots{kind="decode",state="used",model="a"} 0.5
slots{kind="prefill",state="used",model="a"} 0.9
slots{state="used",model="a"} 0.8
`, Unknown, Page{Server: my, Models: []Model{
			m("a", sQ, 5.0, sB, 9.0, sKV, 0.6, sFill, 0.5),
			m("b", sQ, 1.0, sKV, 0.1),
		}}},
		{"a page with built-in names stays built-in", `vllm:num_requests_waiting{model_name="x"} 1
fork_running{served_model="x"} 7
fork_running{served_model="y"} 8
`, Unknown, Page{Server: VLLMV0, Models: []Model{m("x", sQ, 1.0)}}},
		{"forced: a custom server reads a built-in name with its own model label", `vllm:num_requests_waiting{model_name="x",served_model="s"} 1
fork_running{served_model="s"} 7
`, fork, Page{Server: fork, Models: []Model{m("s", sQ, 1.0, sB, 7.0)}}},
		{"forced built-in ignores custom names", "my_server_queue_depth 3\ntgi_queue_size 1\n", TGI,
			Page{Server: TGI, Models: []Model{m("", sQ, 1.0)}}},
		{"the custom server with most lines wins", "fork_running 1\nmy_server_queue_depth 2\nmy_server_kv_percent 50\n", Unknown,
			Page{Server: my, Models: []Model{m("", sQ, 2.0, sKV, 0.5)}}},
		{"ties go to the first custom server", "fork_running 1\nmy_server_queue_depth 2\n", Unknown,
			Page{Server: my, Models: []Model{m("", sQ, 2.0)}}},
		{"a short name; an absent filter label is no match, and unmatched lines do not count", "slots{state=\"used\"} 0.3\nslots 0.2\n", Unknown,
			Page{}},
		{"NaN and overflow after scale are absent", "my_server_kv_percent NaN\nmy_server_queue_depth 1\n", Unknown,
			Page{Server: my, Models: []Model{m("", sQ, 1.0)}, Rejected: rej(RejectNonFinite, 1)}},
		{"escaped model name", `my_server_queue_depth{model="a\"b"} 1`, Unknown,
			Page{Server: my, Models: []Model{m(`a"b`, sQ, 1.0)}}},
	}
	p := NewParserFor(servers)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.ParseAs([]byte(tt.page), tt.force)
			if err != nil {
				t.Fatalf("ParseAs: %v", err)
			}
			if diff := diffPage(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A filter value of "" selects series without the label, as in PromQL; the
// same name can carry two signals; a scale applies before aggregation.
func TestParseCustomFilters(t *testing.T) {
	servers, err := NewServers([]CustomServer{{Name: "x",
		Queue: Series{Name: "reqs", Labels: map[string]string{"state": "waiting", "pool": ""}},
		Batch: Series{Name: "reqs", Labels: map[string]string{"state": "running"}, Scale: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	page := `reqs{state="waiting"} 1
reqs{state="waiting",pool="b"} 10
reqs{state="running",pool="b"} 3
reqs{pool="a",state="running"} 4
reqs 100
`
	got, err := NewParserFor(servers).Parse([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	want := Page{Server: Server(numBuiltin), Models: []Model{m("", sQ, 1.0, sB, 14.0)}}
	if diff := diffPage(want, *got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseCustomErrors(t *testing.T) {
	p := NewParserFor(testServers(t))
	for _, page := range []string{
		"my_server_queue_depth{model=\"a} 1\n",
		"slots{kind=\"decode\" 1\n",
		"slots abc\n",
	} {
		if got, err := p.Parse([]byte(page)); err == nil {
			t.Errorf("%q: no error, page %+v", page, *got)
		}
	}
	// A malformed line the built-in parser does not need is skipped there.
	if _, err := NewParser().Parse([]byte("slots abc\n")); err != nil {
		t.Errorf("built-in parser: %v", err)
	}
}

func TestParseCustomZeroAllocs(t *testing.T) {
	page := []byte(`my_server_queue_depth{model="a"} 2
my_server_requests{model="a",state="running"} 4
my_server_kv_percent{model="a\"x"} 40
slots{kind="d\\ecode",state="used",model="a"} 0.5
slots{kind="decode",state="used",model="a"} 0.5
` + strings.Repeat("other_series{a=\"b\"} 1\n", 50))
	p := NewParserFor(testServers(t))
	if _, err := p.Parse(page); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = p.Parse(page) }); n != 0 {
		t.Errorf("%v allocs per page, want 0", n)
	}
}

func TestServersNames(t *testing.T) {
	s := testServers(t)
	for _, tt := range []struct {
		name string
		want Server
		ok   bool
	}{
		{"vllm-v1", VLLMV1, true},
		{"jetstream", JetStream, true},
		{"my-server", Server(numBuiltin), true},
		{"vllm-fork", Server(numBuiltin + 1), true},
		{"unknown", Unknown, false},
		{"", Unknown, false},
		{"other", Unknown, false},
	} {
		got, ok := s.ByName(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ByName(%q) = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok && s.Name(got) != tt.name {
			t.Errorf("Name(ByName(%q)) = %q", tt.name, s.Name(got))
		}
	}
	var none *Servers
	if got, ok := none.ByName("my-server"); ok {
		t.Errorf("nil Servers knows my-server as %v", got)
	}
	if got, ok := none.ByName("tgi"); !ok || got != TGI {
		t.Errorf("nil Servers: ByName(tgi) = %v, %v", got, ok)
	}
	if s.Custom() != 2 || none.Custom() != 0 {
		t.Errorf("Custom() = %d, %d; want 2, 0", s.Custom(), none.Custom())
	}
	if _, err := NewParser().ParseAs(nil, Server(numBuiltin)); err == nil {
		t.Error("a built-in parser accepted a custom server")
	}
}

func TestNewServersErrors(t *testing.T) {
	q := Series{Name: "my_queue"}
	tests := []struct {
		name   string
		custom []CustomServer
		msg    string
	}{
		{"upper case name", []CustomServer{{Name: "My", Queue: q}}, "DNS label"},
		{"empty name", []CustomServer{{Queue: q}}, "DNS label"},
		{"built-in name", []CustomServer{{Name: "tgi", Queue: q}}, "built-in"},
		{"unknown is reserved", []CustomServer{{Name: "unknown", Queue: q}}, "built-in"},
		{"duplicate", []CustomServer{{Name: "a", Queue: q}, {Name: "a", Queue: q}}, "twice"},
		{"no signals", []CustomServer{{Name: "a"}}, "no series"},
		{"labels without series", []CustomServer{{Name: "a", Queue: q, Batch: Series{Scale: 2}}}, "no series"},
		{"bad metric name", []CustomServer{{Name: "a", Queue: Series{Name: "my-queue"}}}, "not a metric name"},
		{"bad label name", []CustomServer{{Name: "a", Queue: Series{Name: "q", Labels: map[string]string{"a.b": "x"}}}}, "not a label name"},
		{"bad model label", []CustomServer{{Name: "a", ModelLabel: "1x", Queue: q}}, "model label"},
		{"negative scale", []CustomServer{{Name: "a", Queue: Series{Name: "q", Scale: -1}}}, "scale"},
		{"NaN scale", []CustomServer{{Name: "a", Queue: Series{Name: "q", Scale: math.NaN()}}}, "scale"},
		{"too many", make([]CustomServer, MaxCustomServers+1), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServers(tt.custom)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want one containing %q", err, tt.msg)
			}
		})
	}
}
