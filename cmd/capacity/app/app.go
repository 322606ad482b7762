// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/capacity"
)

// usage heads --help, above the flags printed section by section.
const usage = `Usage: capacity --rates RATES|--ramp START:STOP:STEP [flags]
       capacity --from-json FILE [flags]

Measures what one replica of an OpenAI-compatible model server sustains under latency SLOs, step by step, and recommends an HPA (or a KEDA ScaledObject) from it. See docs/capacity.md.
`

// Main runs capacity with args until it is done or SIGINT or SIGTERM, and
// returns the process exit code: 2 for a bad command line, 1 for a failure.
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Main("capacity", args, stdout, stderr, run)
}

// run parses args, builds the configuration and probes (or reads the
// recorded run of --from-json); a bad command line is a cli.UsageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := NewOptions()
	if done, err := cli.ParseSections("capacity", usage, o.Flags(), args, stdout, stderr); done || err != nil {
		return err
	}
	cfg, err := o.Config()
	if err != nil {
		return cli.Usage(err)
	}
	if cfg.recorded != nil {
		rep := capacity.NewReport(cfg.setup, cfg.recorded.Steps, cfg.setup.Cost, cfg.hpa, cfg.recorded.Interrupted)
		return cfg.finish(rep, stdout, nil, nil)
	}
	var writeErr error
	onStep := func(steps []capacity.Step) {
		_ = capacity.WriteProgress(stderr, steps[len(steps)-1], len(cfg.probe.Rates))
		if err := cfg.write(capacity.NewReport(cfg.setup, steps, cfg.probe.Cost, cfg.hpa, true)); err != nil && writeErr == nil {
			writeErr = err
			_, _ = fmt.Fprintf(stderr, "capacity: %v\n", err)
		}
	}
	steps, err := capacity.Run(ctx, cfg.probe, onStep)
	interrupted := errors.Is(err, capacity.ErrInterrupted)
	if err != nil && !interrupted {
		if len(steps) == 0 {
			return err
		}
		interrupted = true // keep what was measured
	}
	rep := capacity.NewReport(cfg.setup, steps, cfg.probe.Cost, cfg.hpa, interrupted)
	var stopped error
	if interrupted {
		stopped = fmt.Errorf("stopped after %d steps (%w); partial results are above%s", len(steps), err, cfg.where())
	}
	return cfg.finish(rep, stdout, stopped, writeErr)
}

// finish writes the files, the table and the manifest --output picks, and
// says how the run ended: stopped (an interruption) first, then no
// capacity, then writeErr (a file that could not be written during the run).
func (c *Config) finish(rep *capacity.Report, stdout io.Writer, stopped, writeErr error) error {
	if err := c.write(rep); err != nil {
		return err
	}
	manifest := c.manifest(rep)
	if c.hpaOut != "" && manifest != "" {
		if err := writeFile(c.hpaOut, func(w io.Writer) error { _, e := io.WriteString(w, manifest); return e }); err != nil {
			return err
		}
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if manifest != "" && c.hpaOut == "" {
		_, _ = fmt.Fprintf(stdout, "\n%s", manifest)
	}
	switch {
	case stopped != nil:
		return stopped
	case !rep.Analysis.Found:
		return fmt.Errorf("no step met the SLOs (%s)", strings.Join(rep.Analysis.Notes, "; "))
	}
	return writeErr
}

// manifest is the YAML --output picks; empty when there is none.
func (c *Config) manifest(rep *capacity.Report) string {
	switch {
	case c.output == outputSingle && rep.Recommendation != nil:
		return rep.Recommendation.Manifest
	case c.output == outputSingle || rep.Recipe == nil:
		return ""
	case c.output == outputKEDA:
		return rep.Recipe.ScaledObject
	case c.output == outputBoth:
		return "# Two forms of one recipe: apply the HPA or the ScaledObject, not both (two autoscalers on one workload fight)\n" +
			rep.Recipe.HPA + "---\n" + rep.Recipe.ScaledObject
	}
	return rep.Recipe.HPA
}

// where names the files written, for messages.
func (c *Config) where() string {
	var files []string
	for _, f := range []string{c.json, c.svg} {
		if f != "" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return ""
	}
	return " and in " + strings.Join(files, ", ")
}

// write writes the JSON and SVG files that were asked for.
func (c *Config) write(rep *capacity.Report) error {
	if c.json != "" {
		if err := writeFile(c.json, rep.WriteJSON); err != nil {
			return err
		}
	}
	if c.svg != "" {
		if err := writeFile(c.svg, rep.WriteSVG); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes through a temporary file and renames it, so a reader
// (or an interrupted run) never sees half a file.
func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := write(tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
