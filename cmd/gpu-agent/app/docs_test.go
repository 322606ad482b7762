// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
)

const docPath = "../../../docs/gpu-agent.md"

// docs/gpu-agent.md quotes --help verbatim.
func TestDocsFlags(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	help := "```\n" + Usage(NewOptions().Flags()) + "```\n"
	if !strings.Contains(string(doc), help) {
		t.Errorf("%s does not quote --help verbatim; it should contain:\n%s", docPath, help)
	}
}

// Every metric the agent can serve is in the page-contract table.
func TestDocsMetrics(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 32)
	gpuagent.New(gpuagent.Config{}).Describe(ch)
	close(ch)
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		m := nameRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		n++
		if !strings.Contains(string(doc), "| `"+m[1]+"` |") {
			t.Errorf("%s is not in the page table of %s", m[1], docPath)
		}
	}
	if n < 10 {
		t.Errorf("only %d metrics described", n)
	}
}
