// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package dialect

import (
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// FuzzDecode decodes any --server-config file. It holds that Decode never
// panics; that every error names the file; and that a file it accepts
// passes parse.NewServers' own checks (Load relies on Decode checking the
// same rules), with every custom server found by its name.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(good))
	for _, s := range []string{
		"", "# nothing yet\n", "---\n~\n", "servers: []\n", "servers: []\nserver: []\n", "{}\n",
		"servers:\n  name: x\n",
		"servers:\n  - name: a\n    queue: {series: q}\n    modelLable: model\n",
		"servers:\n  - name: a\n    queue:\n      series: q\n      label: {a: b}\n",
		"servers:\n  - name: a\n    modelLabel: m\n",
		"servers:\n  - name: a\n    queue: {series: q}\n  - name: a\n    batch: {series: b}\n",
		"servers:\n  - name: vllm-v1\n    queue: {series: q}\n",
		"servers:\n  - name: 12\n    queue: {series: q}\n",
		"servers:\n  - name: a\n    kvCache: {series: q, scale: .inf}\n",
		"servers:\n  - name: a\n    kvCache: {series: q, scale: \"0.01\"}\n",
		"servers:\n  - name: a\n    queue:\n      series: q\n      labels: {a.b: c}\n",
		"servers:\n  - name: a\n    queue:\n      series: q\n      labels:\n        state:\n",
		"servers:\n  - name: a\n    queue: &q {series: q}\n    batch: *q\n",
		"servers: []\n---\nservers: []\n",
		"servers:\n  - name: a\n    queue: {series: q\n",
		"servers:\n  - name: a\n    modelLabel: model\n    queue: {series: q, labels: {model: x}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		custom, err := Decode("f.yaml", data)
		if err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("an error line does not name the file: %q", line)
				}
			}
			return
		}
		servers, err := parse.NewServers(custom)
		if err != nil {
			t.Fatalf("Decode accepted the file, parse.NewServers refused it: %v\n%s", err, data)
		}
		for _, c := range custom {
			s, ok := servers.ByName(c.Name)
			if !ok || servers.Name(s) != c.Name {
				t.Fatalf("custom server %q not found by its name", c.Name)
			}
		}
	})
}
