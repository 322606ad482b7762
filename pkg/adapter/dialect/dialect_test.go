// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package dialect

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

const good = `# Two custom servers.
servers:
  - name: my-server
    modelLabel: model
    queue:     {series: my_server_queue_depth}
    batch:     {series: my_server_active_requests, labels: {state: running}}
    kvCache:   {series: my_server_kv_ratio, scale: 0.01}
    batchFill: {series: my_server_slots_used}
  - name: tiny
    batch:
      series: requests
      labels:
        phase: decode
        pool: ""
        version: 2
      scale: 1
`

func TestDecodeGood(t *testing.T) {
	got, err := Decode("servers.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []parse.CustomServer{
		{Name: "my-server", ModelLabel: "model",
			Queue:     parse.Series{Name: "my_server_queue_depth"},
			Batch:     parse.Series{Name: "my_server_active_requests", Labels: map[string]string{"state": "running"}},
			KVCache:   parse.Series{Name: "my_server_kv_ratio", Scale: 0.01},
			BatchFill: parse.Series{Name: "my_server_slots_used"}},
		{Name: "tiny", Batch: parse.Series{Name: "requests", Labels: map[string]string{"phase": "decode", "pool": "", "version": "2"}, Scale: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = Decode("none.yaml", []byte("servers: []\n"))
	if err != nil || len(got) != 0 {
		t.Errorf("servers: [] gave %v, %v; want no servers and no error", got, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each must appear in the error, with "f.yaml:LINE: "
	}{
		{"empty file", "", []string{"f.yaml: the file is empty"}},
		{"only comments", "# nothing yet\n", []string{"f.yaml: the file is empty"}},
		{"null document", "---\n~\n", []string{"f.yaml:2: the file is empty"}},
		{"unknown top-level key", "servers: []\nserver: []\n", []string{`f.yaml:2: unknown key "server" in the file (known keys: servers)`}},
		{"missing servers", "{}\n", []string{`f.yaml:1: missing key "servers"`}},
		{"servers not a list", "servers:\n  name: x\n", []string{`f.yaml:2: "servers" must be a list`}},
		{"servers null", "servers:\n", []string{`f.yaml:1: "servers" must be a list`}},
		{"unknown server key", "servers:\n  - name: a\n    queue: {series: q}\n    modelLable: model\n",
			[]string{`f.yaml:4: unknown key "modelLable" in a server (known keys: name, modelLabel, scheme, auth, queue, batch, kvCache, batchFill)`}},
		{"unknown series key", "servers:\n  - name: a\n    queue:\n      series: q\n      label: {a: b}\n",
			[]string{`f.yaml:5: unknown key "label" in queue (known keys: series, labels, scale)`}},
		{"missing series", "servers:\n  - name: a\n    queue: {labels: {a: b}}\n", []string{`f.yaml:3: queue has no "series"`}},
		{"missing name", "servers:\n  - queue: {series: q}\n", []string{`f.yaml:2: server has no "name"`}},
		{"no signals", "servers:\n  - name: a\n    modelLabel: m\n", []string{`f.yaml:2: server "a" has no signals`}},
		{"duplicate name", "servers:\n  - name: a\n    queue: {series: q}\n  - name: a\n    batch: {series: b}\n",
			[]string{`f.yaml:4: server name "a" is already used at line 2`}},
		{"name clashes with a built-in", "servers:\n  - name: vllm-v1\n    queue: {series: q}\n", []string{`f.yaml:2: server name "vllm-v1" is a built-in server`}},
		{"upper-case name", "servers:\n  - name: MyServer\n    queue: {series: q}\n", []string{`f.yaml:2: server name "MyServer": want a lower-case DNS label`}},
		{"name not a string", "servers:\n  - name: 12\n    queue: {series: q}\n", []string{`f.yaml:2: name must be a string`}},
		{"zero scale", "servers:\n  - name: a\n    kvCache: {series: q, scale: 0}\n", []string{`f.yaml:3: kvCache.scale must be a positive finite number, got 0`}},
		{"negative scale", "servers:\n  - name: a\n    kvCache: {series: q, scale: -0.5}\n", []string{`f.yaml:3: kvCache.scale must be a positive finite number`}},
		{"infinite scale", "servers:\n  - name: a\n    kvCache: {series: q, scale: .inf}\n", []string{`f.yaml:3: kvCache.scale must be a positive finite number`}},
		{"scale as a string", "servers:\n  - name: a\n    kvCache: {series: q, scale: \"0.01\"}\n", []string{`f.yaml:3: kvCache.scale must be a number`}},
		{"bad metric name", "servers:\n  - name: a\n    queue: {series: my-queue}\n", []string{`f.yaml:3: queue.series "my-queue" is not a Prometheus metric name`}},
		{"bad label name", "servers:\n  - name: a\n    queue:\n      series: q\n      labels: {a.b: c}\n", []string{`f.yaml:5: "a.b" is not a Prometheus label name`}},
		{"label without value", "servers:\n  - name: a\n    queue:\n      series: q\n      labels:\n        state:\n", []string{`f.yaml:6: label "state" needs a value`}},
		{"repeated key", "servers:\n  - name: a\n    queue: {series: q}\n    queue: {series: r}\n", []string{`f.yaml:4: key "queue" repeated`}},
		{"bad model label", "servers:\n  - name: a\n    modelLabel: model-name\n    queue: {series: q}\n", []string{`f.yaml:3: modelLabel "model-name" is not a Prometheus label name`}},
		{"alias", "servers:\n  - name: a\n    queue: &q {series: q}\n    batch: *q\n", []string{`f.yaml:4: aliases (*q) are not supported`}},
		{"signal not a mapping", "servers:\n  - name: a\n    queue: my_queue\n", []string{`f.yaml:3: queue must be a mapping with the keys series, labels, scale`}},
		{"second document", "servers: []\n---\nservers: []\n", []string{`f.yaml:2: a second YAML document`}},
		{"YAML syntax", "servers:\n  - name: a\n    queue: {series: q\n", []string{"f.yaml: yaml: line "}},
		{"bad scheme", "servers:\n  - name: a\n    scheme: HTTPS\n    queue: {series: q}\n", []string{`f.yaml:3: scheme "HTTPS": want http or https`}},
		{"bad auth", "servers:\n  - name: a\n    scheme: https\n    auth: token\n    queue: {series: q}\n", []string{`f.yaml:4: auth "token": want bearer or none`}},
		{"bearer over http", "servers:\n  - name: a\n    scheme: http\n    auth: bearer\n    queue: {series: q}\n", []string{`f.yaml:4: auth bearer needs scheme: https`}},
		{"bearer without a scheme", "servers:\n  - name: a\n    auth: bearer\n    queue: {series: q}\n", []string{`f.yaml:3: auth bearer needs scheme: https`}},
		{"every problem is reported", "servers:\n  - name: A\n    queue: {series: q}\n  - name: b\n    queu: {series: q}\n",
			[]string{`f.yaml:2: server name "A"`, `f.yaml:5: unknown key "queu"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode("f.yaml", []byte(tt.file))
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

// TestDecodeScrapeSettings: a server's scheme and auth keys come back by
// name; a server without either is not in the map.
func TestDecodeScrapeSettings(t *testing.T) {
	file := "servers:\n" +
		"  - name: tls-server\n    scheme: https\n    auth: bearer\n    queue: {series: q}\n" +
		"  - name: tls-only\n    scheme: https\n    queue: {series: q}\n" +
		"  - name: plain\n    queue: {series: q}\n"
	f, err := DecodeFile("f.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Scrape{
		"tls-server": {Scheme: "https", Auth: "bearer"},
		"tls-only":   {Scheme: "https"},
	}
	if len(f.Scrape) != len(want) {
		t.Fatalf("scrape settings %+v, want %+v", f.Scrape, want)
	}
	for name, w := range want {
		if f.Scrape[name] != w {
			t.Errorf("%s: %+v, want %+v", name, f.Scrape[name], w)
		}
	}
	if len(f.Servers) != 3 {
		t.Errorf("%d servers, want 3", len(f.Servers))
	}
}

// Load reads a file and gives servers a parser can use.
func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.yaml")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	servers, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	my, ok := servers.ByName("my-server")
	if !ok {
		t.Fatal("my-server not found")
	}
	page := "my_server_queue_depth{model=\"m\"} 4\nmy_server_active_requests{model=\"m\",state=\"running\"} 2\nmy_server_kv_ratio{model=\"m\"} 25\n"
	got, err := parse.NewParserFor(servers).Parse([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != my || len(got.Models) != 1 {
		t.Fatalf("got %+v", *got)
	}
	for s, want := range map[catalog.Signal]float64{catalog.QueueSize: 4, catalog.BatchSize: 2, catalog.KVCacheUsage: 0.25} {
		if v, ok := got.Models[0].Value(s); !ok || v != want {
			t.Errorf("%s = %v, %v; want %v", s, v, ok, want)
		}
	}

	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: error %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("servers:\n  - name: tgi\n    queue: {series: q}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad+":2: ") {
		t.Errorf("bad file: error %v, want one at %s:2", err, bad)
	}
}

// The example in docs/servers.md is a valid file, and its example page gives
// the values the page says.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "servers.md"))
	if err != nil {
		t.Fatal(err)
	}
	yamlBlock := regexp.MustCompile("(?s)```yaml\n(servers:.*?|#[^\n]*\nservers:.*?)```").FindSubmatch(doc)
	pageBlock := regexp.MustCompile("(?s)```text\n(my_server_queue_depth.*?)```").FindSubmatch(doc)
	if yamlBlock == nil || pageBlock == nil {
		t.Fatal("docs/servers.md lacks the ```yaml example or the ```text example page")
	}
	custom, err := Decode("docs/servers.md example", yamlBlock[1])
	if err != nil {
		t.Fatal(err)
	}
	servers, err := parse.NewServers(custom)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parse.NewParserFor(servers).Parse(pageBlock[1])
	if err != nil {
		t.Fatal(err)
	}
	if servers.Name(got.Server) != "my-server" || len(got.Models) != 1 || got.Models[0].Name != "llama" {
		t.Fatalf("page read as %s with models %+v, want my-server with model llama", servers.Name(got.Server), got.Models)
	}
	mod := got.Models[0]
	for s, want := range map[catalog.Signal]float64{catalog.QueueSize: 5, catalog.BatchSize: 9, catalog.KVCacheUsage: 0.65} {
		if v, ok := mod.Value(s); !ok || math.Abs(v-want) > 1e-12 {
			t.Errorf("%s = %v, %v; the docs say %v", s, v, ok, want)
		}
	}
	if _, ok := mod.Value(catalog.BatchFill); ok {
		t.Error("batch fill present; the docs say absent")
	}
}
