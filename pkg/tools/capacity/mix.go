// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// ReadPrompts reads a JSONL request mix: one object per line with "prompt"
// (a string) and "max_tokens" (at least 1). Blank lines are skipped. Every
// bad line is reported with its number.
func ReadPrompts(r io.Reader) ([]loadgen.Prompt, error) {
	var out []loadgen.Prompt
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var rec struct {
			Prompt    *string `json:"prompt"`
			MaxTokens *int    `json:"max_tokens"`
		}
		if err := json.Unmarshal([]byte(text), &rec); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		switch {
		case rec.Prompt == nil || *rec.Prompt == "":
			errs = append(errs, fmt.Errorf("line %d: want a non-empty \"prompt\" string", line))
		case rec.MaxTokens == nil || *rec.MaxTokens < 1:
			errs = append(errs, fmt.Errorf("line %d: want \"max_tokens\" of at least 1", line))
		default:
			out = append(out, loadgen.Prompt{Text: *rec.Prompt, MaxTokens: *rec.MaxTokens})
		}
		if len(errs) >= 10 {
			errs = append(errs, errors.New("more errors not shown"))
			break
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("after line %d: %w", line, err))
	}
	if len(errs) == 0 && len(out) == 0 {
		errs = append(errs, errors.New("no prompts"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ParseRates parses a step plan: a list "1,2,4.5" or a ramp "START:STOP:STEP"
// (inclusive of STOP where the steps land on it).
func ParseRates(list, ramp string) ([]float64, error) {
	if (list == "") == (ramp == "") {
		return nil, errors.New("give the step plan as exactly one of --rates and --ramp")
	}
	if ramp != "" {
		parts := strings.Split(ramp, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("ramp %q: want START:STOP:STEP", ramp)
		}
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("ramp %q: %q is not a positive number", ramp, p)
			}
			v[i] = f
		}
		if v[1] < v[0] {
			return nil, fmt.Errorf("ramp %q: STOP is below START", ramp)
		}
		// Count in floats: a tiny STEP overflows an int.
		steps := math.Floor((v[1]-v[0])/v[2]+1e-9) + 1
		if steps > 1000 {
			return nil, fmt.Errorf("ramp %q: %.4g steps, at most 1000", ramp, steps)
		}
		n := int(steps)
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Round((v[0]+float64(i)*v[2])*1e6) / 1e6
		}
		return out, nil
	}
	var out []float64
	for _, p := range strings.Split(list, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0) {
			return nil, fmt.Errorf("rates %q: %q is not a positive number", list, p)
		}
		out = append(out, f)
	}
	return out, nil
}
