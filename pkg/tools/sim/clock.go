// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"time"
)

// Clock is the engine's view of simulated time: the time elapsed since the
// engine started, in simulated units, and a way to wait for a simulated
// instant. Tests use a manual clock that jumps instead of sleeping.
type Clock interface {
	// Now is the simulated time since the start.
	Now() time.Duration
	// SleepUntil returns once Now() >= t, or with ctx's error.
	SleepUntil(ctx context.Context, t time.Duration) error
}

// ScaledClock runs simulated time Scale times faster than wall-clock time.
type ScaledClock struct {
	start time.Time
	scale float64
}

var _ Clock = (*ScaledClock)(nil)

// NewScaledClock starts a clock at 0 whose simulated time runs scale times
// faster than the wall clock.
func NewScaledClock(scale float64) *ScaledClock {
	return &ScaledClock{start: time.Now(), scale: scale}
}

// Now implements Clock.
func (c *ScaledClock) Now() time.Duration {
	return time.Duration(float64(time.Since(c.start)) * c.scale)
}

// SleepUntil implements Clock. Deadlines are absolute, so oversleeping in
// one step shortens the next wait instead of accumulating as drift.
func (c *ScaledClock) SleepUntil(ctx context.Context, t time.Duration) error {
	wall := c.start.Add(time.Duration(float64(t) / c.scale))
	d := time.Until(wall)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
