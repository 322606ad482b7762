// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuagent_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
)

// serve runs gpuagent.NewServer(h, l) on a limited listener on 127.0.0.1
// until the test ends, and returns its address.
func serve(t *testing.T, h http.Handler, l gpuagent.ServerLimits, connState func(net.Conn, http.ConnState)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := gpuagent.NewServer(h, l)
	srv.ConnState = connState
	served := make(chan error, 1)
	go func() { served <- srv.Serve(gpuagent.LimitListener(lis, l.MaxConnections)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// shortLimits cut clients off quickly, so that the tests end quickly.
func shortLimits() gpuagent.ServerLimits {
	return gpuagent.ServerLimits{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       300 * time.Millisecond,
		WriteTimeout:      300 * time.Millisecond,
		IdleTimeout:       300 * time.Millisecond,
		MaxHeaderBytes:    4 << 10,
		MaxConnections:    4,
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })

// trickle writes prefix, then one byte every 10ms until a write fails or
// stop is closed.
func trickle(prefix string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, stop <-chan struct{}) {
		if _, err := io.WriteString(c, prefix); err != nil {
			return
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	}
}

// A client that sends its request slowly, or keeps an idle connection, is
// cut off: the server closes the connection.
// Was wrong: with no read, write or idle timeouts, such a client held a connection and a goroutine.
func TestSlowClientsAreCutOff(t *testing.T) {
	tests := []struct {
		name string
		send func(c net.Conn, stop <-chan struct{})
	}{
		{"headers byte by byte", trickle("GET /metrics HTTP/1.1\r\nHost: agent\r\nX-Slow: ")},
		{"headers never finished", func(c net.Conn, _ <-chan struct{}) {
			_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n")
		}},
		{"body byte by byte", trickle("POST /metrics HTTP/1.1\r\nHost: agent\r\nContent-Length: 100000\r\n\r\n")},
		{"idle keep-alive connection", func(c net.Conn, _ <-chan struct{}) {
			_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serve(t, okHandler, shortLimits(), nil)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				_, _ = io.Copy(io.Discard, c) // until the server closes the connection
			}()
			stop := make(chan struct{})
			sent := make(chan struct{})
			go func() { defer close(sent); tt.send(c, stop) }()
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				t.Error("the server still holds the connection after 30s")
				_ = c.Close()
				<-closed
			}
			close(stop)
			<-sent
		})
	}
}

// A client that asks for the page and never reads the answer is cut off by
// the write timeout: the handler's write fails instead of blocking for ever.
// Was wrong: with no write timeout, the handler blocked for as long as the client liked.
func TestUnreadResponseIsCutOff(t *testing.T) {
	writeErr := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for i := 0; i < 256; i++ { // far more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	})
	addr := serve(t, big, shortLimits(), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler is still writing to a client that reads nothing after 30s")
	}
}

// Over MaxConnections, a connection waits until one of those served closes.
// Was wrong: the agent served any number of connections at once.
func TestConnectionsOverTheLimitWait(t *testing.T) {
	l := gpuagent.DefaultServerLimits() // timeouts far longer than the test
	l.MaxConnections = 2
	accepted := make(chan struct{}, 16)
	addr := serve(t, okHandler, l, func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted <- struct{}{}
		}
	})
	var held []net.Conn
	for i := 0; i < l.MaxConnections; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
		<-accepted
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	select {
	case r := <-got:
		t.Fatalf("a connection over the limit was served at once: %q %v", r.body, r.err)
	case <-time.After(300 * time.Millisecond):
	}

	_ = held[0].Close()
	select {
	case r := <-got:
		if r.err != nil || !strings.Contains(r.body, "ok") {
			t.Fatalf("after a slot freed: %q %v", r.body, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting connection was not served within 30s of a slot freeing")
	}
}

// Closing the listener ends an Accept that waits for a slot.
func TestLimitListenerCloseEndsWaitingAccept(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := gpuagent.LimitListener(lis, 1)
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ll.Accept()
		done <- err
	}()
	_ = ll.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
