// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"testing"
	"time"
)

// stepHook calls check when the engine records a step: after the step's
// tokens are published and before its finished requests are.
type stepHook struct {
	nopRecorder
	check func()
}

func (h stepHook) step(int, int, int) { h.check() }

// TestLastTokenPublishedWithDone: the engine published a request's last
// token before marking it done, so a streaming client that read in between
// sent that token with finish_reason null and then ended the stream with
// no finish_reason at all (seen as a flaky TestStreamingOpenAIClient under
// -race). The last token and done are now published together.
func TestLastTokenPublishedWithDone(t *testing.T) {
	tests := []struct {
		name      string
		maxTokens int
	}{
		{"one token", 1},
		{"several tokens", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &seq{prompt: 8, maxTokens: tc.maxTokens, notify: make(chan struct{}, 1)}
			st := &Stream{s: s}
			e := NewEngine(testConfig(), nil, stepHook{check: func() {
				s.mu.Lock()
				gen, done := s.generated, s.done
				s.mu.Unlock()
				if gen >= tc.maxTokens && !done {
					t.Errorf("a reader sees %d of %d tokens and not done: its last token goes out without finish_reason", gen, tc.maxTokens)
				}
			}})
			st.e = e
			e.enqueue(s, 0)
			var now time.Duration
			for steps := 0; !s.finished; steps++ {
				if steps > 100 {
					t.Fatal("request did not finish")
				}
				now += e.schedule(now)
				e.commit(now)
			}
			gen, done, reason, err := st.Wait(t.Context(), 0)
			if err != nil || gen != tc.maxTokens || !done || reason != ReasonLength {
				t.Errorf("Wait = %d, %v, %q, %v; want %d, done, length", gen, done, reason, err, tc.maxTokens)
			}
		})
	}
}
