// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"strings"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
)

// TestForecastFlags: the --forecast-* flags' validation (each error names
// its flag) and what they become in the provider's configuration.
func TestForecastFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr []string // substrings; empty means valid
		want    provider.ForecastConfig
	}{
		{name: "defaults", want: provider.ForecastConfig{Method: forecast.Auto, Window: 5 * time.Minute, Horizon: 0, Z: 1.645, Alpha: 0.5, Beta: 0.3, FloorWindow: 15 * time.Minute, Bursty: 0.25, MaxWorkloads: 10000}},
		{name: "every flag", args: []string{"--forecast-method=holt", "--forecast-window=2m", "--forecast-horizon=90s", "--forecast-z=0", "--forecast-holt-alpha=1", "--forecast-holt-beta=0.1", "--forecast-floor=0.5", "--forecast-floor-window=20m", "--forecast-rate-floor=1.5s", "--forecast-auto-burstiness=1", "--forecast-max-workloads=1"},
			want: provider.ForecastConfig{Method: forecast.Holt, Window: 2 * time.Minute, Horizon: 90 * time.Second, Z: 0, Alpha: 1, Beta: 0.1, Floor: 0.5, FloorWindow: 20 * time.Minute, RateFloor: 1500 * time.Millisecond, Bursty: 1, MaxWorkloads: 1}},
		{name: "staffing", args: []string{"--forecast-method=staffing", "--forecast-auto-burstiness=0"},
			want: provider.ForecastConfig{Method: forecast.Staffing, Window: 5 * time.Minute, Z: 1.645, Alpha: 0.5, Beta: 0.3, FloorWindow: 15 * time.Minute, MaxWorkloads: 10000}},
		{name: "horizon equal to the window", args: []string{"--forecast-window=2m", "--forecast-horizon=2m"},
			want: provider.ForecastConfig{Method: forecast.Auto, Window: 2 * time.Minute, Horizon: 2 * time.Minute, Z: 1.645, Alpha: 0.5, Beta: 0.3, FloorWindow: 15 * time.Minute, Bursty: 0.25, MaxWorkloads: 10000}},
		{name: "unknown method", args: []string{"--forecast-method=arima"}, wantErr: []string{`--forecast-method: unknown forecast method "arima"`}},
		{name: "zero window", args: []string{"--forecast-window=0"}, wantErr: []string{"--forecast-window must be positive"}},
		{name: "horizon past the window", args: []string{"--forecast-window=1m", "--forecast-horizon=2m"}, wantErr: []string{"--forecast-horizon must be auto or a duration above 0 and at most --forecast-window (1m0s), got 2m0s"}},
		{name: "zero horizon", args: []string{"--forecast-horizon=0s"}, wantErr: []string{"--forecast-horizon must be auto or a duration above 0"}},
		{name: "horizon not a duration", args: []string{"--forecast-horizon=soon"}, wantErr: []string{`--forecast-horizon must be auto or a duration, got "soon"`}},
		{name: "negative z", args: []string{"--forecast-z=-1"}, wantErr: []string{"--forecast-z must be a finite number of at least 0, got -1"}},
		{name: "NaN z", args: []string{"--forecast-z=NaN"}, wantErr: []string{"--forecast-z must be a finite number"}},
		{name: "infinite z", args: []string{"--forecast-z=+Inf"}, wantErr: []string{"--forecast-z must be a finite number"}},
		{name: "alpha 0", args: []string{"--forecast-holt-alpha=0"}, wantErr: []string{"--forecast-holt-alpha must be in (0, 1], got 0"}},
		{name: "beta over 1", args: []string{"--forecast-holt-beta=1.5"}, wantErr: []string{"--forecast-holt-beta must be in (0, 1], got 1.5"}},
		{name: "floor over 1", args: []string{"--forecast-floor=1.5"}, wantErr: []string{"--forecast-floor must be in [0, 1] (a share of the largest recent demand), got 1.5"}},
		{name: "negative floor", args: []string{"--forecast-floor=-0.1"}, wantErr: []string{"--forecast-floor must be in [0, 1]"}},
		{name: "NaN floor", args: []string{"--forecast-floor=NaN"}, wantErr: []string{"--forecast-floor must be in [0, 1]"}},
		{name: "zero floor window", args: []string{"--forecast-floor-window=0"}, wantErr: []string{"--forecast-floor-window must be above 0 and at most 30m0s (a history keeps 64 samples), got 0s"}},
		{name: "floor window past 30m", args: []string{"--forecast-floor-window=1h"}, wantErr: []string{"--forecast-floor-window must be above 0 and at most 30m0s"}},
		{name: "negative rate floor", args: []string{"--forecast-rate-floor=-1s"}, wantErr: []string{"--forecast-rate-floor must be from 0 to 1m0s (a request's time in system at SLO capacity), got -1s"}},
		{name: "rate floor past 1m", args: []string{"--forecast-rate-floor=90s"}, wantErr: []string{"--forecast-rate-floor must be from 0 to 1m0s"}},
		{name: "negative burstiness", args: []string{"--forecast-auto-burstiness=-0.5"}, wantErr: []string{"--forecast-auto-burstiness must be a finite number of at least 0, got -0.5"}},
		{name: "infinite burstiness", args: []string{"--forecast-auto-burstiness=+Inf"}, wantErr: []string{"--forecast-auto-burstiness must be a finite number"}},
		{name: "no histories", args: []string{"--forecast-max-workloads=0"}, wantErr: []string{"--forecast-max-workloads must be at least 1, got 0"}},
		{name: "all at once", args: []string{"--forecast-method=x", "--forecast-z=-1", "--forecast-holt-beta=0"}, wantErr: []string{"--forecast-method", "--forecast-z", "--forecast-holt-beta"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			errs := o.validateForecast()
			if len(tc.wantErr) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				if got := o.forecastConfig(); got != tc.want {
					t.Errorf("config %+v, want %+v", got, tc.want)
				}
				return
			}
			var all []string
			for _, err := range errs {
				all = append(all, err.Error())
			}
			text := strings.Join(all, "\n")
			for _, w := range tc.wantErr {
				if !strings.Contains(text, w) {
					t.Errorf("errors %q do not mention %q", text, w)
				}
			}
		})
	}
}
