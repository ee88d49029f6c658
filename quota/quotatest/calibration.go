package quotatest

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// RatioDelta is how far a learned ratio may sit from the one a case
// expects: stores compute it in doubles, Redis's Lua with its own pow.
const RatioDelta = 1e-6

// calibrated is a policy whose input-token bucket never binds the cases
// below, with the default calibration.
func calibrated() quota.Policy {
	return quota.Policy{Limits: []quota.Limit{
		quota.PerMinute(quota.InputTokens, 1_000_000).WithBurst(time.Minute),
		quota.PerMinute(quota.Tokens, 1_000_000).WithBurst(time.Minute),
	}}
}

// call reserves a call whose prompt is estimated at prompt tokens (and
// maxOut output tokens), then settles it at what a provider counting
// density × the estimate reports. It returns what Reserve charged.
func (e *env) call(ticket string, prompt, maxOut int64, density float64) quota.Cost {
	e.t.Helper()
	est := quota.Cost{Requests: 1, Tokens: prompt + maxOut, InputTokens: prompt, OutputTokens: maxOut}
	d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: est, Prompt: prompt})
	require.NoError(e.t, err, "Reserve(%s)", ticket)
	require.Equal(e.t, quota.Granted, d.Outcome, "%s: %+v", ticket, d)
	in := int64(density*float64(prompt) + 0.5)
	actual := quota.Cost{Requests: 1, Tokens: in + maxOut/2, InputTokens: in, OutputTokens: maxOut / 2}
	require.NoError(e.t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: actual,
		Counted: true, Prompt: prompt}), "Settle(%s)", ticket)
	return d.Charged
}

func (e *env) ratio() float64 {
	e.t.Helper()
	return e.snapshot().EstimateRatio
}

// testCalibration: the learned ratio converges on a provider's constant
// density from above and below, charges later estimates at it, ignores a
// single wild answer, comes back toward 1 when answers stop, and learns
// nothing from an estimate or with calibration off.
func testCalibration(t *testing.T, s suite) {
	for _, density := range []float64{1.5, 0.7} {
		t.Run("converges_"+strconv.FormatFloat(density, 'g', -1, 64), func(t *testing.T) {
			e := s.setup(t, "converges-"+strconv.FormatFloat(density, 'g', -1, 64), calibrated())
			require.Equal(t, 1.0, e.ratio(), "an unlearned key estimates as given")
			calls := 0
			for ; calls < 60; calls++ {
				e.call("c"+strconv.Itoa(calls), 1000, 100, density)
				e.clock.Advance(100 * time.Millisecond)
				if r := e.ratio(); r > 0.99*density && r < 1.01*density {
					break
				}
			}
			require.Less(t, calls, 36, "converged on %g within a few dozen calls", density)
			t.Logf("density %g: ratio %.4f after %d calls", density, e.ratio(), calls+1)

			r := e.ratio()
			charged := e.call("next", 1000, 100, density)
			require.InDelta(t, float64(int64(r*1000+0.999999)), float64(charged.InputTokens), 1, "input charged at the ratio")
			require.Equal(t, charged.InputTokens+100, charged.Tokens, "tokens: the calibrated prompt plus the output")
			require.Equal(t, int64(100), charged.OutputTokens, "output is not calibrated")
		})
	}

	t.Run("errs_high", func(t *testing.T) {
		// Densities that vary call to call: the ratio stays at or above
		// most of them, not at their mean.
		e := s.setup(t, "errs-high", calibrated())
		pattern := []float64{1.2, 1.4, 1.3, 1.5, 1.25}
		for i := range 40 {
			e.call("v"+strconv.Itoa(i), 1000, 100, pattern[i%len(pattern)])
		}
		r := e.ratio()
		require.Greater(t, r, 1.35, "above the mean of the densities seen (1.33)")
		require.LessOrEqual(t, r, 1.5+RatioDelta, "not above the highest seen")
	})

	t.Run("ignores_one_outlier", func(t *testing.T) {
		e := s.setup(t, "outlier", calibrated())
		for i := range 20 {
			e.call("a"+strconv.Itoa(i), 1000, 100, 1.2)
		}
		before := e.ratio()
		e.call("wild", 1000, 100, 40)
		require.InDelta(t, before, e.ratio(), RatioDelta, "one wild answer moves nothing")
		e.call("low", 100, 100, 0.01)
		require.InDelta(t, before, e.ratio(), RatioDelta, "nor does one far too low")
		e.call("after", 1000, 100, 1.2)
		require.InDelta(t, before, e.ratio(), RatioDelta)
	})

	t.Run("decays_toward_one", func(t *testing.T) {
		e := s.setup(t, "decay", calibrated())
		for i := range 10 {
			e.call("d"+strconv.Itoa(i), 1000, 100, 2)
		}
		require.InDelta(t, 2, e.ratio(), RatioDelta)
		e.clock.Advance(quota.DefaultRatioHalfLife)
		require.InDelta(t, 1.5, e.ratio(), 1e-3, "halfway back to 1 after one half-life")
		e.clock.Advance(9 * quota.DefaultRatioHalfLife)
		require.InDelta(t, 1, e.ratio(), 1e-3)
	})

	t.Run("bounded", func(t *testing.T) {
		e := s.setup(t, "bounded", quota.Policy{
			Limits:      calibrated().Limits,
			Calibration: quota.Calibration{MinRatio: 0.8, MaxRatio: 1.25},
		})
		for i := range 10 {
			e.call("h"+strconv.Itoa(i), 1000, 100, 3)
		}
		require.InDelta(t, 1.25, e.ratio(), RatioDelta, "capped at MaxRatio")
	})

	t.Run("capped_at_capacity", func(t *testing.T) {
		// A call that fits as estimated is never made oversize by the
		// ratio: it is charged at most the axis's capacity.
		e := s.setup(t, "capacity", quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.InputTokens, 1500).WithBurst(time.Minute)}})
		for i := range 10 {
			e.call("w"+strconv.Itoa(i), 500, 0, 2)
			e.clock.Advance(time.Minute)
		}
		d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: "big",
			Cost: quota.Cost{Requests: 1, InputTokens: 1000}, Prompt: 1000})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
		require.Equal(t, int64(1500), d.Charged.InputTokens)
	})

	t.Run("learns_only_counts", func(t *testing.T) {
		e := s.setup(t, "estimates", calibrated())
		est := quota.Cost{Requests: 1, Tokens: 1100, InputTokens: 1000, OutputTokens: 100}
		for i := range 5 {
			ticket := "e" + strconv.Itoa(i)
			e.reserveWithPrompt(ticket, est, 1000)
			// Settled at an estimate (the call failed): not a count.
			require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket,
				Actual: quota.Cost{Requests: 1, InputTokens: 3000}, Prompt: 1000}))
		}
		require.Equal(t, 1.0, e.ratio())
	})

	t.Run("learns_without_the_ticket", func(t *testing.T) {
		e := s.setup(t, "no-ticket", calibrated())
		for i := range 3 {
			err := e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "gone" + strconv.Itoa(i),
				Actual: quota.Cost{Requests: 1, InputTokens: 1500}, Counted: true, Prompt: 1000})
			require.ErrorIs(t, err, quota.ErrUnknownTicket)
		}
		require.InDelta(t, 1.5, e.ratio(), RatioDelta, "an expired ticket's count still teaches")
	})

	t.Run("off", func(t *testing.T) {
		e := s.setup(t, "off", quota.Policy{Limits: calibrated().Limits, Calibration: quota.Calibration{Off: true}})
		for i := range 10 {
			charged := e.call("o"+strconv.Itoa(i), 1000, 100, 2)
			require.Equal(t, int64(1000), charged.InputTokens)
		}
		require.Equal(t, 1.0, e.ratio())
	})
}

func (e *env) reserveWithPrompt(ticket string, cost quota.Cost, prompt int64) quota.Decision {
	e.t.Helper()
	d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: cost, Prompt: prompt})
	require.NoError(e.t, err, "Reserve(%s)", ticket)
	require.Equal(e.t, quota.Granted, d.Outcome, "%s: %+v", ticket, d)
	return d
}
