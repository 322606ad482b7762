// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// FuzzAnnotations reads any values of the pod annotations the adapter reads
// (port, path, scrape, server, max-batch-size, front-door-for; present bits
// say which the pod has) with any container port. It holds that nothing
// panics; that every refusal is bounded (1 KiB) and printable and names what it
// refuses; and that what is accepted is what the annotation says: a URL
// that parses to the pod's IP, the port and the path given, holding no
// space or control byte; the server named; a batch size that is a positive
// finite number; the front door's trimmed name.
func FuzzAnnotations(f *testing.F) {
	type seed struct {
		present                                        uint8
		port, path, scrape, server, batch, door, cname string
		cport                                          int32
		v6                                             bool
	}
	for _, s := range []seed{
		{0b111111, "9090", "/stats", "true", "vllm-v1", "256", "my-model", "metrics", 1, false},
		{0, "", "", "", "", "", "", "http", 8000, false},
		{0, "", "", "", "", "", "", "grpc", 9000, true},
		{0b1, "http", "", "", "", "", "", "", 0, false},
		{0b1, "70000", "", "", "", "", "", "", 0, false},
		{0b11, " 1 ", "metrics", "", "", "", "", "", 0, false},
		{0b11, "1", "/" + strings.Repeat("a", MaxPathLen-1), "", "", "", "", "", 0, false},
		{0b11, "1", "/" + strings.Repeat("a", MaxPathLen), "", "", "", "", "", 0, false},
		{0b11, "8000", "/metrics?format=prometheus&name[]=x", "", "", "", "", "", 0, false},
		{0b11, "8000", "/a:b@c!$&'()*+,;=-._~%20", "", "", "", "", "", 0, false},
		{0b11, "8000", "/metrics\nI1202 10:00:00.000000       1 forged.go:1] \"Scrape recovered\"", "", "", "", "", "", 0, false},
		{0b11, "8000", "/metrics\u202e\xff%2", "", "", "", "", "", 0, false},
		{0b1001, "8000", "", "", "ollama", "", "", "", 0, false},
		{0b1001, "8000", "", "", "Ollama\x1b[2J", "", "", "", 0, false},
		{0b10000, "", "", "", "", " 8 ", "", "", 1, false},
		{0b10000, "", "", "", "", "+infinity", "", "", 1, false},
		{0b10000, "", "", "", "", "NaN", "", "", 1, false},
		{0b100000, "", "", "", "", "", " inferencepool/pool ", "", 1, false},
		{0b100000, "", "", "", "", "", " ", "", 1, false},
	} {
		f.Add(s.present, s.port, s.path, s.scrape, s.server, s.batch, s.door, s.cname, s.cport, s.v6)
	}
	custom, err := parse.NewServers([]parse.CustomServer{{Name: "ollama", Queue: parse.Series{Name: "ollama_queue"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, present uint8, port, path, scrape, server, batch, door, cname string, cport int32, v6 bool) {
		ann := map[string]string{}
		for i, kv := range []struct{ k, v string }{
			{AnnotationPort, port}, {AnnotationPath, path}, {AnnotationScrape, scrape},
			{AnnotationServer, server}, {AnnotationMaxBatchSize, batch}, {AnnotationFrontDoor, door},
		} {
			if present&(1<<i) != 0 {
				ann[kv.k] = kv.v
			}
		}
		// The API server admits container ports 1 to 65535 only.
		var ports []corev1.ContainerPort
		if cport > 0 {
			ports = append(ports, corev1.ContainerPort{Name: cname, ContainerPort: (cport-1)%65535 + 1})
		}
		pod := testPod("p", ann, ports...)
		if v6 {
			pod.Status.PodIP = "fd00::1"
		}
		// An error quotes an annotation's value cut to 64 runes (%.64q),
		// each printed as at most 10 bytes (\U000f0000).
		checkErr := func(err error, what string) {
			t.Helper()
			if msg := err.Error(); len(msg) > 1024 || escapetest.HasControl(msg) || !strings.Contains(msg, what) {
				t.Fatalf("error of %d bytes, with a control character or not naming %s: %q", len(msg), what, msg)
			}
		}

		switch u, err := Endpoint(pod); {
		case err == nil:
			checkURL(t, u, pod, ann)
		case ann[AnnotationPath] != "" && strings.Contains(err.Error(), AnnotationPath):
			checkErr(err, AnnotationPath)
		case hasKey(ann, AnnotationPort):
			checkErr(err, AnnotationPort)
		default:
			checkErr(err, "port")
		}
		switch s, err := ForcedServer(pod, custom); {
		case err != nil:
			checkErr(err, AnnotationServer)
		case ann[AnnotationServer] == "" && s != parse.Unknown:
			t.Fatalf("no server annotation read as %v", s)
		case ann[AnnotationServer] != "" && custom.Name(s) != ann[AnnotationServer]:
			t.Fatalf("server annotation %q read as %q", ann[AnnotationServer], custom.Name(s))
		}

		if v, ok := MaxBatchSize(pod); ok && (!(v > 0) || math.IsInf(v, 0)) {
			t.Fatalf("max batch size %q read as %v", batch, v)
		}
		name, ok := FrontDoorFor(pod)
		if want := strings.TrimSpace(ann[AnnotationFrontDoor]); name != want || ok != (want != "") {
			t.Fatalf("front door %q read as %q, %v", ann[AnnotationFrontDoor], name, ok)
		}
	})
}

// checkURL checks an accepted pod's scrape URL against its annotations.
func checkURL(t *testing.T, raw string, pod *corev1.Pod, ann map[string]string) {
	t.Helper()
	for i := range len(raw) {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			t.Fatalf("URL %q holds byte %#x", raw, raw[i])
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Hostname() != pod.Status.PodIP {
		t.Fatalf("URL %q: %v", raw, err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 || port > 65535 {
		t.Fatalf("URL %q: port %q", raw, u.Port())
	}
	if s, ok := ann[AnnotationPort]; ok {
		if want, err := strconv.Atoi(strings.TrimSpace(s)); err != nil || want != port {
			t.Fatalf("port annotation %q gave the URL %q", s, raw)
		}
	}
	path := DefaultPath
	if p := ann[AnnotationPath]; p != "" {
		path = p
	}
	if want := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path; raw != want || len(path) > MaxPathLen {
		t.Fatalf("URL %q, want %q (at most %d bytes of path)", raw, want, MaxPathLen)
	}
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }
