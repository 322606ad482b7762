// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"fmt"
)

// BytesPerToken is how many bytes of prompt text count as one token. The
// simulator has no tokenizer: a text of n bytes is ceil(n/4) tokens (at
// least 1), which is close to what BPE tokenizers give for English.
const BytesPerToken = 4

// Chat-template overhead, in tokens, of each message and of the reply header.
const (
	tokensPerMessage = 4
	tokensPerReply   = 3
)

// TextTokens is the simulated token count of a text.
func TextTokens(text string) int {
	return max(1, (len(text)+BytesPerToken-1)/BytesPerToken)
}

// promptTokens counts the tokens of a /v1/completions prompt: a string, an
// array of strings (one prompt), an array of token ids, or an array of one
// array of token ids.
func promptTokens(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return TextTokens(s), nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) != 1 {
			return 0, fmt.Errorf("prompt: exactly one prompt is supported, got %d", len(ss))
		}
		return TextTokens(ss[0]), nil
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return 0, fmt.Errorf("prompt: token list must not be empty")
		}
		return len(ids), nil
	}
	var idss [][]int64
	if err := json.Unmarshal(raw, &idss); err == nil {
		if len(idss) != 1 || len(idss[0]) == 0 {
			return 0, fmt.Errorf("prompt: exactly one non-empty token list is supported, got %d lists", len(idss))
		}
		return len(idss[0]), nil
	}
	return 0, fmt.Errorf("prompt must be a string, an array of strings, or an array of token ids")
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// chatTokens counts the tokens of chat messages: their text plus a fixed
// template overhead per message and for the reply.
func chatTokens(msgs []chatMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, fmt.Errorf("messages must not be empty")
	}
	n := tokensPerReply
	for i, m := range msgs {
		if m.Role == "" {
			return 0, fmt.Errorf("messages[%d].role is required", i)
		}
		n += tokensPerMessage
		if len(m.Content) == 0 || string(m.Content) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			n += (len(s) + BytesPerToken - 1) / BytesPerToken
			continue
		}
		var parts []contentPart
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return 0, fmt.Errorf("messages[%d].content must be a string or an array of content parts", i)
		}
		for _, p := range parts {
			n += (len(p.Text) + BytesPerToken - 1) / BytesPerToken
		}
	}
	return n, nil
}

// vocabulary of generated tokens: plain ASCII words that need no JSON escaping.
var vocabulary = []string{
	" the", " of", " and", " to", " in", " a", " is", " that", " for", " it",
	" as", " was", " with", " be", " by", " on", " not", " he", " this", " are",
	" or", " his", " from", " at", " which", " but", " have", " an", " had", " they",
	" you", " were", " their", " one", " all", " we", " can", " her", " has", " there",
	" been", " if", " more", " when", " will", " would", " who", " so", " no", " model",
	" token", " batch", " queue", " cache", " GPU", " server", " scale", " load", " time", " step",
	" fast", " slow", ".", ",",
}

// tokenText is the text of the i-th generated token: deterministic in seed
// and i, the same for every request.
func tokenText(seed int64, i int) string {
	x := uint64(seed) + uint64(i)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return vocabulary[x%uint64(len(vocabulary))]
}
