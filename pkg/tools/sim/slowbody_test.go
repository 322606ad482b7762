// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSlowBodyTimesOut: a client that sends its headers and then trickles
// (or never finishes) its body held a connection and a goroutine of the
// simulator's API, or a held request of the front door, without end: the
// servers bound only the headers' read time. Reading a body now has a
// deadline, and the request is answered 400 when it passes.
func TestSlowBodyTimesOut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	s, err := NewServer(DefaultConfig(), NewScaledClock(1))
	if err != nil {
		t.Fatal(err)
	}
	s.bodyTimeout = timeout
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	f, err := NewFrontDoor(FrontDoorConfig{Backend: "http://127.0.0.1:1", Model: "m", Pool: "p", MaxHold: time.Minute, ProbeEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.bodyTimeout = timeout
	front := httptest.NewServer(f.Handler())
	t.Cleanup(front.Close)

	tests := []struct {
		name, base, path string
	}{
		{"completions", api.URL, "/v1/completions"},
		{"chat completions", api.URL, "/v1/chat/completions"},
		{"front door", front.URL, "/v1/completions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", tc.base[len("http://"):])
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// 1000 bytes announced, 10 sent.
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":", tc.path); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is incomplete: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
			if got := f.Pending(); got != 0 {
				t.Errorf("front door holds %d requests, want 0", got)
			}
		})
	}
}
