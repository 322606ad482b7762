// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package escapetest holds what tests need to check that tenant text
// reaches logs, errors and terminals escaped: HasControl, and CaptureLogs to
// read what klog wrote.
package escapetest

import (
	"bytes"
	"flag"
	"os"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"k8s.io/klog/v2"
)

// HasControl reports whether s holds a byte a terminal or a log reader
// could take for something else than text: a C0 control (newline, ESC,
// BEL...), DEL, a C1 control, a bidirectional control (U+202E...), or a
// byte that is not valid UTF-8.
func HasControl(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return true
			}
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return true
		}
	}
	return false
}

// LogBuffer is what klog wrote, safe for klog's concurrent writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CaptureLogs sends klog's text output, at verbosity v, to the returned
// buffer until the test ends. klog is process-wide: call it only from a
// test that is not parallel (the parallel ones wait until it is done).
func CaptureLogs(t *testing.T, v string) *LogBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	prev := map[string]string{}
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "v": v} {
		prev[name] = fs.Lookup(name).Value.String()
		if err := fs.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	buf := &LogBuffer{}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		for name, value := range prev {
			_ = fs.Set(name, value)
		}
		klog.SetOutput(os.Stderr)
	})
	return buf
}
