// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFrontEndStreamsWhileForwardingTheBody is the regression test of the
// streams the front end cut ("unexpected EOF" for about 0.2% of the
// shootout's requests, the fixed fleet included). A pod may answer before
// the front end's transport has finished reading the request body it
// forwards; by default Go's HTTP/1 server then consumes and closes that
// body as soon as the front end starts its response, the transport's next
// read of it fails, and the transport drops the pod's connection in the
// middle of the stream. Here the ordering is forced instead of left to
// chance: the pod sends its first event before it reads the body, and the
// client sends the second half of its body only after that event arrived.
// Without full duplex the front end cuts the stream (the pod reads an
// unexpected EOF, the client gets no first event).
func TestFrontEndStreamsWhileForwardingTheBody(t *testing.T) {
	const word = "abcd "
	body := strings.Repeat(word, 200)
	first, second := body[:len(body)/2], body[len(body)/2:]

	// The pod's handler reports here, not through t: it may still run when
	// a failed test has ended.
	type podResult struct {
		body string
		err  error
	}
	received := make(chan podResult, 1)
	pod := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			received <- podResult{err: fmt.Errorf("full duplex: %w", err)}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		if err := rc.Flush(); err != nil {
			received <- podResult{err: fmt.Errorf("flush: %w", err)}
			return
		}
		got, err := io.ReadAll(r.Body)
		received <- podResult{body: string(got), err: err}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go func() { _ = pod.Serve(ln) }()
	t.Cleanup(func() { _ = pod.Close() })

	fe, err := startFrontEnd(func() []string { return []string{"http://" + ln.Addr().String()} }, pickLeastLoaded, maxIdlePerPod)
	if err != nil {
		t.Fatalf("start front end: %v", err)
	}
	t.Cleanup(func() { _ = fe.Close() })

	// Bounds a hang (the failure), not a latency: a passing run takes milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	// A body read blocks the client's transport even after ctx ends: end it too.
	stop := context.AfterFunc(ctx, func() { _ = pw.CloseWithError(ctx.Err()) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fe.URL+"/v1/completions", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	go func() {
		_, _ = io.WriteString(pw, first) // the rest is sent below, after the first event
	}()
	resp, err := client.Do(req)
	if err != nil {
		_ = pw.CloseWithError(err)
		t.Fatalf("request: %v (the front end did not stream the pod's answer while it forwarded the request body)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_ = pw.Close()
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	events := bufio.NewReader(resp.Body)
	readEvent := func() (string, error) {
		line, err := events.ReadString('\n')
		if err != nil {
			return "", err
		}
		if _, err := events.ReadString('\n'); err != nil { // the blank line that ends the event
			return "", err
		}
		return strings.TrimSpace(line), nil
	}
	got, err := readEvent()
	if err != nil || got != "data: first" {
		_ = pw.CloseWithError(fmt.Errorf("no first event"))
		t.Fatalf("first event: %q, %v; want %q (the front end held the response until it had consumed the request body)", got, err, "data: first")
	}
	if _, err := io.WriteString(pw, second); err != nil {
		t.Fatalf("send the rest of the body: %v", err)
	}
	_ = pw.Close()
	if got, err := readEvent(); err != nil || got != "data: [DONE]" {
		t.Fatalf("second event: %q, %v; want %q", got, err, "data: [DONE]")
	}
	select {
	case res := <-received:
		if res.err != nil {
			t.Fatalf("pod: %v", res.err)
		}
		if res.body != body {
			t.Errorf("the pod received %d bytes of body, want the %d sent", len(res.body), len(body))
		}
	case <-ctx.Done():
		t.Fatal("the pod never finished reading the body")
	}
}

// TestFrontEndKeepsTheConnectionWhenItCannotForward is the regression
// test of the front end's "invalid concurrent Body.Read call" panics, each
// when a pod being stopped refused the forwarded request
// (golang/go#68560). The reverse proxy never reads the body of a request
// it could not forward; with full duplex on, Go's server then reads the
// rest of it only after the handler returned, and the end of the body
// starts the connection's background read after the server stopped it: the
// next read of the connection panics and the connection is dropped. Here
// two requests with a body go over one keep-alive connection to a front
// end that cannot forward them (its pod refuses connections, or it has no
// Ready pod): both must get their error status on that connection.
func TestFrontEndKeepsTheConnectionWhenItCannotForward(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	deadURL := "http://" + dead.Addr().String()
	_ = dead.Close() // nothing listens there now: connections are refused

	for _, tc := range []struct {
		name      string
		endpoints []string
		want      int
	}{
		{name: "pod refuses", endpoints: []string{deadURL}, want: http.StatusBadGateway},
		{name: "no Ready pod", endpoints: nil, want: http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe, err := startFrontEnd(func() []string { return tc.endpoints }, pickLeastLoaded, maxIdlePerPod)
			if err != nil {
				t.Fatalf("start front end: %v", err)
			}
			t.Cleanup(func() { _ = fe.Close() })

			conn, err := net.DialTimeout("tcp", strings.TrimPrefix(fe.URL, "http://"), 5*time.Second)
			if err != nil {
				t.Fatalf("dial front end: %v", err)
			}
			defer conn.Close()
			// Bounds a hang (the failure), not a latency: a passing run takes milliseconds.
			if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			body := `{"model":"m","prompt":"hello","max_tokens":4,"stream":true}`
			request := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: front-end\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			responses := bufio.NewReader(conn)
			for i := 1; i <= 2; i++ {
				if _, err := io.WriteString(conn, request); err != nil {
					t.Fatalf("request %d: send: %v", i, err)
				}
				resp, err := http.ReadResponse(responses, nil)
				if err != nil {
					t.Fatalf("request %d: %v (the front end dropped the keep-alive connection after a request it could not forward)", i, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
