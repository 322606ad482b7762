// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"flag"
	"fmt"
	"io"

	"k8s.io/klog/v2"
)

// LogTo sends klog's output (the harness's and client-go's) to w only, so
// that a program printing a table (the demo, the fleet benchmark) stays
// readable.
func LogTo(w io.Writer) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("klog flag %s: %w", k, err)
		}
	}
	klog.SetOutput(w)
	return nil
}
