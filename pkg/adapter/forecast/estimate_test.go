// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package forecast

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// series builds samples every step from t0, demand d[i], completions c(i).
func series(step time.Duration, d []float64, c func(i int) float64) []Sample {
	out := make([]Sample, len(d))
	for i := range d {
		out[i] = Sample{At: t0.Add(time.Duration(i) * step), Demand: d[i], Completions: c(i)}
	}
	return out
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func ramp(from, step float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = from + step*float64(i)
	}
	return out
}

// bursts is a demand of base with a burst of peak for 2 samples every 8.
func bursts(base, peak float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = base
		if i%8 < 2 {
			out[i] = peak
		}
	}
	return out
}

// TestEstimate checks each estimator on recorded demand series; want is
// the forecast within tol.
func TestEstimate(t *testing.T) {
	const step = 15 * time.Second
	p := Params{Window: 5 * time.Minute, Horizon: 2 * time.Minute, Z: DefaultZ, Alpha: DefaultAlpha, Beta: DefaultBeta}
	// A Poisson-like steady load: 10 in system, 1 finishing a second, no
	// change in demand: arrivals 15 every interval, dispersion clamped to 1.
	steady := series(step, repeat(10, 20), constant(1))
	// A ramp of +1 request every 15 s: over a 2 m horizon 8 more.
	up := series(step, ramp(10, 1, 20), constant(1))
	// Bursts: arrivals alternate, so the dispersion is well over 1.
	burst := series(step, bursts(4, 40, 20), constant(1))
	last := func(s []Sample) time.Time { return s[len(s)-1].At }
	for _, tc := range []struct {
		name   string
		method Method
		in     []Sample
		want   float64
		tol    float64
	}{
		{"envelope steady", Envelope, steady, 10, 0},
		{"envelope ramp: the latest is the peak", Envelope, up, 29, 0},
		{"envelope bursts: the last burst within the horizon", Envelope, burst, 40, 0},
		{"holt steady", Holt, steady, 10, 1e-9},
		{"holt ramp: level 29 plus trend 1/15 per s over 120 s", Holt, up, 29 + 8, 0.5},
		{"staffing steady: 10 + 1.645·√10", Staffing, steady, 10 + DefaultZ*math.Sqrt(10), 1e-9},
		{"staffing unknown completions: dispersion 1", Staffing, series(step, repeat(10, 20), constant(math.NaN())), 10 + DefaultZ*math.Sqrt(10), 1e-9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.Method = tc.method
			r, err := Estimate(tc.in, last(tc.in), q)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Forecast-tc.want) > tc.tol {
				t.Errorf("forecast %g, want %g ± %g", r.Forecast, tc.want, tc.tol)
			}
		})
	}

	t.Run("staffing bursts: headroom sized by the dispersion", func(t *testing.T) {
		q := p
		q.Method = Staffing
		r, err := Estimate(burst, last(burst), q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Dispersion <= 2 {
			t.Errorf("dispersion %g of a bursty series, want > 2", r.Dispersion)
		}
		d := burst[len(burst)-1].Demand
		if want := d + DefaultZ*math.Sqrt(r.Dispersion*d); math.Abs(r.Forecast-want) > 1e-9 {
			t.Errorf("forecast %g, want D + z·√(I·D) = %g", r.Forecast, want)
		}
		steadyR, _ := Estimate(steady, last(steady), q)
		if steadyR.Dispersion != 1 {
			t.Errorf("steady dispersion %g, want 1", steadyR.Dispersion)
		}
	})
	t.Run("staffing unknown completions: skipped, the known intervals still measure the bursts", func(t *testing.T) {
		q := p
		q.Method = Staffing
		// A scale-up: a pod turns Ready without a rate at one sample. The
		// bursty series' other intervals still size the headroom.
		holed := append([]Sample(nil), burst...)
		holed[len(holed)/2].Completions = math.NaN()
		r, err := Estimate(holed, last(holed), q)
		if err != nil {
			t.Fatal(err)
		}
		full, err := Estimate(burst, last(burst), q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Dispersion <= 2 || r.Dispersion < full.Dispersion/2 {
			t.Errorf("dispersion %g with one unknown interval, want > 2 and near the full series' %g", r.Dispersion, full.Dispersion)
		}
		// Every interval unknown: nothing to measure, dispersion 1, with the reason.
		none := series(step, repeat(10, 20), constant(math.NaN()))
		r, err = Estimate(none, last(none), q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Dispersion != 1 || !strings.Contains(r.Note, "completions rate is unknown") {
			t.Errorf("dispersion %g note %q, want 1 and the reason", r.Dispersion, r.Note)
		}
	})
	t.Run("holt ramp down: never below 0", func(t *testing.T) {
		q := p
		q.Method = Holt
		down := series(step, ramp(20, -1, 20), constant(1))
		r, err := Estimate(down, last(down), q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Forecast != 0 {
			t.Errorf("forecast %g of a demand falling to 1 by 1 every 15 s over 2 m, want 0", r.Forecast)
		}
	})
	t.Run("holt irregular spacing: per-second trend", func(t *testing.T) {
		// The same ramp, 1 request per 15 s, sampled at uneven gaps.
		var in []Sample
		at := t0
		for i, gap := range []time.Duration{0, 15, 30, 15, 45, 15, 15, 30, 15, 15, 30, 15} {
			at = at.Add(gap * time.Second)
			in = append(in, Sample{At: at, Demand: 10 + at.Sub(t0).Seconds()/15, Completions: 1})
			_ = i
		}
		q := p
		q.Method = Holt
		r, err := Estimate(in, at, q)
		if err != nil {
			t.Fatal(err)
		}
		want := in[len(in)-1].Demand + 8
		if math.Abs(r.Forecast-want) > 0.5 {
			t.Errorf("forecast %g, want about %g", r.Forecast, want)
		}
	})
	t.Run("envelope: a horizon longer than the window reaches past it", func(t *testing.T) {
		// A burst of 40 seven minutes ago, then 10: a 5m window, an 8m horizon.
		in := series(step, append(repeat(40, 2), repeat(10, 30)...), constant(1))
		q := p
		q.Method, q.Horizon = Envelope, 8*time.Minute
		r, err := Estimate(in, last(in), q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Forecast != 40 {
			t.Errorf("forecast %g, want the burst of 40 within the 8m horizon", r.Forecast)
		}
		q.Horizon = 5 * time.Minute
		if r, _ := Estimate(in, last(in), q); r.Forecast != 10 {
			t.Errorf("forecast %g with a 5m horizon, want 10", r.Forecast)
		}
	})
	t.Run("samples outside the window are not read", func(t *testing.T) {
		// An old burst, 10 minutes ago, then a steady 10.
		in := append(series(step, []float64{100, 100, 100}, constant(1)), series(step, repeat(10, 20), constant(1))...)
		for i := 3; i < len(in); i++ {
			in[i].At = in[i].At.Add(10 * time.Minute)
		}
		for _, m := range Methods() {
			q := p
			q.Method = m
			r, err := Estimate(in, last(in), q)
			if err != nil {
				t.Fatal(err)
			}
			if r.Forecast > 10+DefaultZ*math.Sqrt(10)+1e-9 {
				t.Errorf("%s: forecast %g reads the burst outside the window", m, r.Forecast)
			}
		}
	})
}

// TestEstimateFloor: the floor is a share of the largest demand in the
// floor's window, which may reach past the estimators' window; the forecast
// never falls below it, and a floor of 0 changes nothing.
func TestEstimateFloor(t *testing.T) {
	const step = 15 * time.Second
	// A burst of 40 in system for two samples, then 16 minutes of quiet (1
	// in system): 64 samples in all, as a full history holds.
	d := repeat(1, 66)
	d[0], d[1] = 40, 40
	gap := series(step, d, constant(1))
	last := gap[len(gap)-1].At
	for _, tc := range []struct {
		name      string
		method    Method
		floor     float64
		window    time.Duration
		wantFloor float64
	}{
		{"no floor", Staffing, 0, DefaultFloorWindow, 0},
		{"the burst is past a 15m window", Staffing, 0.5, 15 * time.Minute, 0.5},
		{"half the burst within a 17m window", Staffing, 0.5, 17 * time.Minute, 20},
		{"the whole burst", Holt, 1, 17 * time.Minute, 40},
		{"envelope too", Envelope, 0.25, 17 * time.Minute, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Params{Method: tc.method, Window: 5 * time.Minute, Horizon: 2 * time.Minute, Z: DefaultZ, Alpha: DefaultAlpha, Beta: DefaultBeta, Floor: tc.floor, FloorWindow: tc.window}
			r, err := Estimate(gap, last, p)
			if err != nil {
				t.Fatal(err)
			}
			if r.Floor != tc.wantFloor {
				t.Errorf("floor %g, want %g", r.Floor, tc.wantFloor)
			}
			p.Floor = 0
			bare, err := Estimate(gap, last, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := max(bare.Forecast, tc.wantFloor); r.Forecast != want {
				t.Errorf("forecast %g, want the larger of the estimate %g and the floor %g", r.Forecast, bare.Forecast, tc.wantFloor)
			}
		})
	}
}

// TestEstimateRateFloor: the rate floor is the largest arrival rate of an
// interval in the floor's window (completions × interval plus the change in
// demand, over the interval) times the time in system; intervals without a
// completions rate are left out, the forecast never falls below it, and
// without it nothing changes.
func TestEstimateRateFloor(t *testing.T) {
	const step = 15 * time.Second
	// 66 samples 15 s apart (16¼ minutes): in the first interval the
	// demand rises from 1 to 151 while 10 per second complete, then falls
	// back to 1, and for 16 minutes 1 per second arrives and completes.
	d := repeat(1, 66)
	d[1] = 151
	c := func(i int) float64 {
		if i == 1 {
			return 10
		}
		return 1
	}
	burst := series(step, d, c)
	last := burst[len(burst)-1].At
	// The burst's interval: 10 × 15 + 150 = 300 arrivals in 15 s, 20 per
	// second. The interval after it: 1 × 15 − 150 < 0, no arrivals. The
	// quiet: 1 per second.
	unknown := series(step, d, func(i int) float64 {
		if i == 1 {
			return math.NaN()
		}
		return 1
	})
	for _, tc := range []struct {
		name     string
		series   []Sample
		time     time.Duration
		window   time.Duration
		wantPeak float64
	}{
		{"no rate floor", burst, 0, 17 * time.Minute, 0},
		{"the burst's 20 per second for 2 s", burst, 2 * time.Second, 17 * time.Minute, 20},
		{"for 1.5 s", burst, 1500 * time.Millisecond, 17 * time.Minute, 20},
		{"the burst is past a 15m window: the quiet's 1 per second", burst, 5 * time.Second, 15 * time.Minute, 1},
		{"the burst's completions rate unknown: left out", unknown, 5 * time.Second, 17 * time.Minute, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Params{Method: Staffing, Window: 5 * time.Minute, Horizon: 2 * time.Minute, Z: DefaultZ, Alpha: DefaultAlpha, Beta: DefaultBeta, FloorWindow: tc.window, RateFloor: tc.time}
			r, err := Estimate(tc.series, last, p)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.PeakRate-tc.wantPeak) > 1e-9 {
				t.Errorf("peak rate %g, want %g", r.PeakRate, tc.wantPeak)
			}
			wantFloor := tc.wantPeak * tc.time.Seconds()
			if math.Abs(r.RateFloor-wantFloor) > 1e-9 {
				t.Errorf("rate floor %g, want %g", r.RateFloor, wantFloor)
			}
			p.RateFloor = 0
			bare, err := Estimate(tc.series, last, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := max(bare.Forecast, wantFloor); r.Forecast != want {
				t.Errorf("forecast %g, want the larger of the estimate %g and the rate floor %g", r.Forecast, bare.Forecast, wantFloor)
			}
			if tc.time > 0 && wantFloor <= bare.Forecast {
				t.Errorf("the case does not test the floor: estimate %g at least the floor %g", bare.Forecast, wantFloor)
			}
		})
	}
	t.Run("with the demand's floor, the larger", func(t *testing.T) {
		p := Params{Method: Staffing, Window: 5 * time.Minute, Horizon: 2 * time.Minute, Z: DefaultZ, Floor: 0.5, FloorWindow: 17 * time.Minute, RateFloor: 2 * time.Second}
		r, err := Estimate(burst, last, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Floor != 75.5 || r.RateFloor != 40 || r.Forecast != 75.5 {
			t.Errorf("floor %g, rate floor %g, forecast %g: want 75.5, 40, 75.5", r.Floor, r.RateFloor, r.Forecast)
		}
	})
}

// TestEstimateShort: absent until 3 samples span half the shorter of
// horizon and window; a restart (no history) is absent too.
func TestEstimateShort(t *testing.T) {
	p := Params{Method: Staffing, Window: 5 * time.Minute, Horizon: 2 * time.Minute, Z: 1, Alpha: .5, Beta: .3}
	for _, tc := range []struct {
		name     string
		in       []Sample
		wantErr  bool
		wantText string
	}{
		{"restart: empty", nil, true, "has 0 samples spanning 0s in the last 5m0s; it needs at least 3 spanning at least 1m0s"},
		{"two samples", series(time.Minute, repeat(1, 2), constant(1)), true, "has 2 samples spanning 1m0s"},
		{"three samples too close", series(15*time.Second, repeat(1, 3), constant(1)), true, "has 3 samples spanning 30s"},
		{"three samples spanning 1m", series(30*time.Second, repeat(1, 3), constant(1)), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Minute)
			if len(tc.in) > 0 {
				now = tc.in[len(tc.in)-1].At
			}
			_, err := Estimate(tc.in, now, p)
			var short *ShortError
			if got := errors.As(err, &short); got != tc.wantErr {
				t.Fatalf("error %v, want a ShortError: %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q, want it to contain %q", err, tc.wantText)
			}
		})
	}
}

// TestEstimateNonFinite: a result that is not a finite number is an
// error, never a value.
func TestEstimateNonFinite(t *testing.T) {
	in := series(time.Minute, repeat(1e308, 4), constant(1))
	_, err := Estimate(in, in[len(in)-1].At, Params{Method: Staffing, Window: 5 * time.Minute, Horizon: time.Minute, Z: 1e308})
	if err == nil || !strings.Contains(err.Error(), "not a finite number") {
		t.Errorf("error %v, want not a finite number", err)
	}
}

func TestParseMethod(t *testing.T) {
	for _, m := range Methods() {
		if got, err := ParseMethod(string(m)); err != nil || got != m {
			t.Errorf("ParseMethod(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMethod("arima"); err == nil || !strings.Contains(err.Error(), `"arima"`) {
		t.Errorf("ParseMethod(arima) = %v, want an error naming it", err)
	}
}

func TestAutoHorizon(t *testing.T) {
	for _, tc := range []struct{ startup, floor, want time.Duration }{
		{0, 5 * time.Second, 5 * time.Second},
		{90 * time.Second, 5 * time.Second, 90 * time.Second},
		{time.Hour, 5 * time.Second, MaxAutoHorizon},
	} {
		if got := AutoHorizon(tc.startup, tc.floor); got != tc.want {
			t.Errorf("AutoHorizon(%s, %s) = %s, want %s", tc.startup, tc.floor, got, tc.want)
		}
	}
}

// TestEstimateAuto checks auto's choice: holt on steady arrivals, staffing
// on bursty ones or when the burstiness is unknown, a burst remembered for
// the longer burst window, and a burstiness that a rate scale leaves about
// where it was (the index of dispersion alone triples).
func TestEstimateAuto(t *testing.T) {
	const step = 15 * time.Second
	p := Params{Method: Auto, Window: 5 * time.Minute, BurstWindow: 15 * time.Minute, Horizon: 2 * time.Minute,
		Z: DefaultZ, Alpha: DefaultAlpha, Beta: DefaultBeta, Bursty: DefaultBursty}
	// Poisson-like: 10 in system, 1 finishing a second, the demand moving
	// by ±2 (arrivals 15 ± 2 an interval, dispersion about 0.3).
	jitter := make([]float64, 60)
	for i := range jitter {
		jitter[i] = 10 + float64(i%2)*2
	}
	// A burst in the first 5 of 15 minutes (twice as high as the others),
	// steady since.
	old := bursts(4, 80, 60)
	for i := 20; i < 60; i++ {
		old[i] = 4
	}
	scaled := bursts(12, 120, 60)
	for _, tc := range []struct {
		name       string
		in         []Sample
		burstSpan  time.Duration
		want       Method
		burstiness bool // measured (not NaN)
	}{
		{"steady: holt", series(step, repeat(10, 60), constant(1)), 15 * time.Minute, Holt, true},
		{"Poisson-like jitter: holt", series(step, jitter, constant(1)), 15 * time.Minute, Holt, true},
		{"bursts: staffing", series(step, bursts(4, 40, 60), constant(1)), 15 * time.Minute, Staffing, true},
		{"bursts at 3× the rate: staffing", series(step, scaled, constant(3)), 15 * time.Minute, Staffing, true},
		{"a burst 10 minutes ago, inside the burst window: staffing", series(step, old, constant(1)), 15 * time.Minute, Staffing, true},
		{"the same burst outside a 5-minute burst window: holt", series(step, old, constant(1)), 5 * time.Minute, Holt, true},
		{"completions unknown: staffing, burstiness unknown", series(step, repeat(10, 60), constant(math.NaN())), 15 * time.Minute, Staffing, false},
		{"no arrivals: staffing, burstiness unknown", series(step, repeat(0, 60), constant(0)), 15 * time.Minute, Staffing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.BurstWindow = tc.burstSpan
			r, err := Estimate(tc.in, tc.in[len(tc.in)-1].At, q)
			if err != nil {
				t.Fatal(err)
			}
			if r.Method != tc.want {
				t.Errorf("chose %s (burstiness %g), want %s", r.Method, r.Burstiness, tc.want)
			}
			if measured := !math.IsNaN(r.Burstiness); measured != tc.burstiness {
				t.Errorf("burstiness %g, want measured %v", r.Burstiness, tc.burstiness)
			}
			q.Method = tc.want
			direct, err := Estimate(tc.in, tc.in[len(tc.in)-1].At, q)
			if err != nil {
				t.Fatal(err)
			}
			if r.Forecast != direct.Forecast {
				t.Errorf("forecast %g, want %s's %g", r.Forecast, tc.want, direct.Forecast)
			}
		})
	}

	t.Run("a rate scale leaves the burstiness, not the dispersion", func(t *testing.T) {
		one, err := Estimate(series(step, bursts(4, 40, 60), constant(1)), t0.Add(59*step), p)
		if err != nil {
			t.Fatal(err)
		}
		three, err := Estimate(series(step, scaled, constant(3)), t0.Add(59*step), p)
		if err != nil {
			t.Fatal(err)
		}
		if three.Dispersion < 2.5*one.Dispersion {
			t.Errorf("dispersion %g at 3×, %g at 1×: want about 3 times", three.Dispersion, one.Dispersion)
		}
		// Arrivals scaled exactly (no Poisson thinning): B moves by
		// (1 − 1/3) ÷ the mean arrivals, under 10% here.
		if math.Abs(three.Burstiness-one.Burstiness) > 0.1*one.Burstiness {
			t.Errorf("burstiness %g at 3×, %g at 1×: want within 10%%", three.Burstiness, one.Burstiness)
		}
	})
}

// poissonSeries is 15 minutes of samples every 15 s of Poisson arrivals at
// rate(t) requests a second (drawn by thinning from a seeded source), each
// arrival finishing within its interval after 1.5 s in the system: the
// completions rate is the interval's arrivals over 15 s, the demand the
// arrivals times 0.1.
func poissonSeries(seed uint64, rate func(t float64) float64, most float64) []Sample {
	const step, n = 15.0, 61
	rng := rand.New(rand.NewPCG(seed, 1))
	counts := make([]float64, n)
	for t := rng.ExpFloat64() / most; t < step*(n-1); t += rng.ExpFloat64() / most {
		if rng.Float64()*most < rate(t) {
			counts[int(t/step)+1]++
		}
	}
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{At: t0.Add(time.Duration(float64(i) * step * float64(time.Second))), Demand: counts[i] * 0.1, Completions: counts[i] / step}
	}
	return out
}

// TestAutoOnArrivalsNotTunedOn: auto's choice on arrival patterns other
// than the two traces its threshold was chosen between, each over 5 seeds:
// Poisson at a steady rate, at a rate ramping by half over 15 minutes, and
// at a rate alternating 4 and 8 a second by the minute are steady (holt);
// a rate of 1 a second with bursts of 20 for 30 s every 5 minutes, and the
// same at a tenth of the rate, are bursty (staffing).
func TestAutoOnArrivalsNotTunedOn(t *testing.T) {
	p := Params{Method: Auto, Window: 5 * time.Minute, BurstWindow: 15 * time.Minute, Horizon: time.Minute,
		Z: DefaultZ, Alpha: DefaultAlpha, Beta: DefaultBeta, Bursty: DefaultBursty}
	onOff := func(scale float64) func(float64) float64 {
		return func(t float64) float64 {
			if math.Mod(t, 300) < 30 {
				return 20 * scale
			}
			return 1 * scale
		}
	}
	for _, tc := range []struct {
		name string
		rate func(t float64) float64
		most float64
		want Method
	}{
		{"Poisson at 5/s", func(float64) float64 { return 5 }, 5, Holt},
		{"a ramp from 4/s to 6/s", func(t float64) float64 { return 4 + 2*t/900 }, 6, Holt},
		{"4/s and 8/s by the minute", func(t float64) float64 { return 4 + 4*math.Mod(math.Floor(t/60), 2) }, 8, Holt},
		{"bursts of 20/s over 1/s", onOff(1), 20, Staffing},
		{"the same bursts at a tenth of the rate", onOff(0.1), 2, Staffing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(5) {
				in := poissonSeries(seed, tc.rate, tc.most)
				r, err := Estimate(in, in[len(in)-1].At, p)
				if err != nil {
					t.Fatal(err)
				}
				if r.Method != tc.want {
					t.Errorf("seed %d: chose %s (burstiness %.3f), want %s", seed, r.Method, r.Burstiness, tc.want)
				}
			}
		})
	}
}
