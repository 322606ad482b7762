// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TraceRequest is one request of a recorded trace: when it arrived, since
// the trace's first request, and its prompt and output lengths in tokens.
type TraceRequest struct {
	At           time.Duration
	PromptTokens int
	OutputTokens int
	// Source is the index, among the files given, of the file the request
	// came from in a merged trace (ReadMergedTraceFiles); 0 otherwise.
	Source int
}

// traceTimeLayout is the TIMESTAMP format of the Azure LLM inference
// traces, e.g. "2023-11-16 18:17:03.9799600".
const traceTimeLayout = "2006-01-02 15:04:05.999999999"

// maxTraceRows bounds a trace file.
const maxTraceRows = 10_000_000

// ReadTrace reads a trace in the CSV columns of the Azure LLM inference
// traces: a header naming TIMESTAMP, ContextTokens and GeneratedTokens (in
// any order, other columns ignored), then one row per request in arrival
// order. Arrival times are made relative to the first row.
func ReadTrace(r io.Reader) ([]TraceRequest, error) {
	reqs, _, err := readTrace(r)
	return reqs, err
}

// readTrace is ReadTrace that also returns the first row's TIMESTAMP.
func readTrace(r io.Reader) ([]TraceRequest, time.Time, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("trace header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	var missing []string
	for _, want := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if _, ok := col[want]; !ok {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return nil, time.Time{}, fmt.Errorf("trace header %v lacks %v", head, missing)
	}
	var (
		out   []TraceRequest
		first time.Time
		prev  time.Duration
	)
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("trace line %d: %w", line, err)
		}
		if len(out) >= maxTraceRows {
			return nil, time.Time{}, fmt.Errorf("trace has more than %d rows", maxTraceRows)
		}
		ts, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[col["TIMESTAMP"]]))
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("trace line %d: TIMESTAMP: %w", line, err)
		}
		prompt, err1 := strconv.Atoi(strings.TrimSpace(rec[col["ContextTokens"]]))
		output, err2 := strconv.Atoi(strings.TrimSpace(rec[col["GeneratedTokens"]]))
		if err := errors.Join(err1, err2); err != nil {
			return nil, time.Time{}, fmt.Errorf("trace line %d: %w", line, err)
		}
		if prompt < 1 || output < 1 {
			return nil, time.Time{}, fmt.Errorf("trace line %d: prompt and output must be at least 1 token, got %d and %d", line, prompt, output)
		}
		if len(out) == 0 {
			first = ts
		}
		at := ts.Sub(first)
		if at < prev {
			return nil, time.Time{}, fmt.Errorf("trace line %d: TIMESTAMP %s is before the previous row's: rows must be in arrival order", line, ts.Format(traceTimeLayout))
		}
		prev = at
		out = append(out, TraceRequest{At: at, PromptTokens: prompt, OutputTokens: output})
	}
	if len(out) == 0 {
		return nil, time.Time{}, errors.New("trace has no requests")
	}
	return out, first, nil
}

// ReadTraceFile reads a trace file with ReadTrace; a name ending in .gz is
// gunzipped first.
func ReadTraceFile(path string) ([]TraceRequest, error) {
	reqs, _, err := readTraceFile(path)
	return reqs, err
}

func readTraceFile(path string) ([]TraceRequest, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("trace %s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	reqs, first, err := readTrace(r)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("trace %s: %w", path, err)
	}
	return reqs, first, nil
}

// ReadMergedTraceFiles reads several trace files with ReadTraceFile and
// merges them into one trace by their TIMESTAMPs, as if one server had
// received every file's requests: arrival times are made relative to the
// earliest first row of all files, and requests at the same instant keep
// the order of the files given. Each request's Source is its file's index
// in paths. Taken by their first rows, every file must
// start before the files that started earlier have all ended (a merge of
// traces recorded apart would replay the gap between them): otherwise it
// is an error that names the file, its span and where the others ended.
func ReadMergedTraceFiles(paths ...string) ([]TraceRequest, error) {
	if len(paths) == 0 {
		return nil, errors.New("no trace file to merge")
	}
	type part struct {
		path  string
		reqs  []TraceRequest
		first time.Time
	}
	last := func(p part) time.Time { return p.first.Add(p.reqs[len(p.reqs)-1].At) }
	parts := make([]part, 0, len(paths))
	total := 0
	for _, p := range paths {
		reqs, first, err := readTraceFile(p)
		if err != nil {
			return nil, err
		}
		total += len(reqs)
		if total > maxTraceRows {
			return nil, fmt.Errorf("merged trace has more than %d rows", maxTraceRows)
		}
		parts = append(parts, part{p, reqs, first})
	}
	byStart := slices.Clone(parts)
	slices.SortStableFunc(byStart, func(a, b part) int { return a.first.Compare(b.first) })
	end := last(byStart[0])
	for _, p := range byStart[1:] {
		if p.first.After(end) {
			return nil, fmt.Errorf("trace %s (%s to %s) starts after every earlier file has ended (%s): merged, the replay would wait out the gap; give traces recorded over the same time",
				p.path, p.first.Format(traceTimeLayout), last(p).Format(traceTimeLayout), end.Format(traceTimeLayout))
		}
		if l := last(p); l.After(end) {
			end = l
		}
	}
	earliest := byStart[0].first
	out := make([]TraceRequest, 0, total)
	for i, p := range parts {
		off := p.first.Sub(earliest)
		for _, r := range p.reqs {
			r.At += off
			r.Source = i
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b TraceRequest) int { return cmp.Compare(a.At, b.At) })
	return out, nil
}
