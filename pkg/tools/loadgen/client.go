// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PromptText is a prompt of n tokens as inference-sim counts them (4 bytes
// per token). Real servers' tokenizers give a similar count for it.
func PromptText(n int) string {
	return strings.Repeat("abc ", n)
}

// chatOverhead is the tokens inference-sim adds for a one-message chat
// (template overhead); the message text is shortened by it so the prompt
// has the drawn length.
const chatOverhead = 7

// approxTokens is the token count of text as inference-sim counts it (4
// bytes per token, rounded up, at least 1); for a real tokenizer it is an
// estimate.
func approxTokens(text string) int {
	return max(1, (len(text)+3)/4)
}

func requestBody(cfg Config, a arrival) ([]byte, error) {
	body := map[string]any{
		"model":      cfg.Model,
		"max_tokens": a.output,
		"stream":     true,
	}
	text := a.text
	if cfg.Endpoint == EndpointChat {
		if text == "" {
			text = PromptText(max(1, a.prompt-chatOverhead))
		}
		body["messages"] = []map[string]string{{"role": "user", "content": text}}
	} else {
		if text == "" {
			text = PromptText(a.prompt)
		}
		body["prompt"] = text
	}
	return json.Marshal(body)
}

func endpointPath(endpoint string) string {
	if endpoint == EndpointChat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// doRequest sends one streaming request and times its token events.
func doRequest(ctx context.Context, client *http.Client, cfg Config, a arrival) (res Result) {
	res = Result{PromptTokens: a.prompt, MaxTokens: a.output, Source: a.source}
	body, err := requestBody(cfg, a)
	if err != nil {
		res.Err = fmt.Errorf("encoding request: %w", err)
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(cfg.URL, "/")+endpointPath(cfg.Endpoint), bytes.NewReader(body))
	if err != nil {
		res.Err = fmt.Errorf("building request: %w", err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	defer func() { res.E2E = scale(time.Since(start), cfg.TimeScale) }()
	resp, err := client.Do(req)
	if err != nil {
		res.Err = fmt.Errorf("sending request: %w", err)
		return res
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		res.Err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return res
	}
	last := start
	done, err := readEvents(resp.Body, func() {
		now := time.Now()
		if res.Tokens == 0 {
			res.TTFT = scale(now.Sub(start), cfg.TimeScale)
		} else {
			res.ITL = append(res.ITL, scale(now.Sub(last), cfg.TimeScale))
		}
		last = now
		res.Tokens++
	})
	switch {
	case err != nil:
		res.Err = fmt.Errorf("reading stream: %w", err)
	case !done:
		res.Err = errors.New("stream ended without [DONE]")
	}
	return res
}

// readEvents reads server-sent events until [DONE] and calls onToken for
// each event that carries generated text. It returns whether [DONE] came.
func readEvents(r io.Reader, onToken func()) (bool, error) {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			return true, nil
		}
		if hasText(data) {
			onToken()
		}
	}
}

// hasText reports whether a completion or chat chunk carries non-empty
// generated text, without decoding the whole JSON: it looks for a "text"
// or "content" string that is not empty.
func hasText(chunk []byte) bool {
	for _, key := range [][]byte{[]byte(`"text":`), []byte(`"content":`)} {
		i := bytes.Index(chunk, key)
		if i < 0 {
			continue
		}
		rest := bytes.TrimLeft(chunk[i+len(key):], " ")
		if len(rest) >= 2 && rest[0] == '"' && rest[1] != '"' {
			return true
		}
	}
	return false
}
