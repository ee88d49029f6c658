package quotatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// expectStart reserves and requires a grant whose call starts in start.
func (e *env) expectStart(start time.Duration, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	d := e.reserve(ticket, cost)
	require.Equal(e.t, quota.Granted, d.Outcome, "%s: outcome of %+v", ticket, d)
	requireDuration(e.t, start, d.Start, "%s: start", ticket)
	return d
}

// testBurst: grants start no closer than the burst and rate space them: by
// default a second's worth of a per-minute limit at once, a call larger
// than the burst alone with the gate in debt after it; a whole-period burst
// starts everything at once; a Reserve again tells the start left.
func testBurst(t *testing.T, s suite) {
	e := s.setup(t, "burst", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60)}})
	e.expectStart(0, "a", reqs(1))
	e.expectStart(time.Second, "b", reqs(1))
	e.expectStart(2*time.Second, "c", reqs(1))
	e.level(rq, 57) // the bucket is charged at once, as ever
	require.InDelta(t, 1, e.axis(rq).Burst, LevelDelta, "a second of 60/min")
	e.clock.Advance(400 * time.Millisecond)
	e.expectStart(600*time.Millisecond, "b", quota.Cost{}) // the start left
	e.clock.Advance(5 * time.Second)
	e.expectStart(0, "d", reqs(1)) // the gate refilled: one at once again

	// 6000 tokens a minute: a burst of 100. A call of 1000 starts at once
	// and leaves the gate at -900; one of 50 starts once it holds 50 again
	// (9.5 s at 100 a second), the next 0.5 s after it.
	f := s.setup(t, "burst-large", quota.Policy{Limits: []quota.Limit{quota.PerMinute(tk, 6000)}})
	f.expectStart(0, "a", tokens(1000))
	f.expectStart(9500*time.Millisecond, "b", tokens(50))
	f.expectStart(10*time.Second, "c", tokens(50))

	g := s.setup(t, "burst-whole", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}})
	for _, id := range []string{"a", "b", "c", "d"} {
		g.expectStart(0, id, reqs(1))
	}
	h := s.setup(t, "burst-set", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(2 * time.Second)}})
	h.expectStart(0, "a", reqs(1))
	h.expectStart(0, "b", reqs(1))
	h.expectStart(time.Second, "c", reqs(1))

	// A grant given up before it started gives its start back.
	e.cancel("d")
	e.expectStart(0, "e", reqs(1))
}

// testStartAfterSlot: a call that waited for a concurrency slot starts at
// the gate's pace, not at once with the call whose slot it took, however
// long ago its place matured.
func testStartAfterSlot(t *testing.T, s suite) {
	e := s.setup(t, "start-after-slot", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60), quota.Concurrent(1)}})
	e.expectStart(0, "a", reqs(1))
	e.expect(concurrencyFull(quota.DefaultLeaseRetry), "b", reqs(1))
	e.clock.Advance(200 * time.Millisecond)
	e.settle("a", reqs(1))
	e.expectStart(800*time.Millisecond, "b", reqs(1))
}

// testMargin: a provider's rate limit on a granted call (RateLimitedPause)
// cuts the key's margin, once per pause; spend caps, daily quotas and
// overloads teach nothing; calls settled with their usage earn it back.
func testMargin(t *testing.T, s suite) {
	e := s.setup(t, "margin", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600), quota.PerMinute(tk, 60000)}})
	require.Equal(t, quota.NoMargin, e.snapshot().Margin)
	e.pause(time.Hour, "spend_cap")
	e.pause(time.Hour, "daily_quota")
	require.Equal(t, quota.NoMargin, e.snapshot().Margin, "a closed key teaches nothing")
	e.clock.Advance(2 * time.Hour)
	e.pause(time.Second, "provider overloaded")
	require.Equal(t, quota.NoMargin, e.snapshot().Margin, "an overload is not our model's fault")
	e.clock.Advance(2 * time.Second)

	e.pause(time.Second, quota.RateLimitedPause)
	cut := quota.NoMargin.Cut()
	require.Equal(t, cut, e.snapshot().Margin)
	e.pause(time.Second, quota.RateLimitedPause) // the same burst's next 429
	require.Equal(t, cut, e.snapshot().Margin, "one lesson per pause")
	require.InDelta(t, 10*cut.Burst, e.axis(rq).Burst, LevelDelta, "a second of 600/min, cut")

	e.clock.Advance(2 * time.Second)
	for range 20 {
		e.pause(time.Millisecond, quota.RateLimitedPause)
		e.clock.Advance(2 * time.Millisecond)
	}
	m := e.snapshot().Margin
	require.InDelta(t, quota.MinBurstMargin, m.Burst, 1e-9, "bounded below")
	require.InDelta(t, quota.MinRateMargin, m.Rate, 1e-9, "bounded below")

	// Settled calls whose usage was counted earn it back, a little each.
	d := e.reserve("a", quota.Cost{Requests: 1, Tokens: 10})
	require.Equal(t, quota.Granted, d.Outcome)
	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: quota.Cost{Requests: 1, Tokens: 10}, Counted: true}))
	require.Equal(t, quota.Margin{Burst: m.Burst + quota.BurstGain, Rate: m.Rate + quota.RateGain}.Burst, e.snapshot().Margin.Burst)
	d = e.reserve("b", quota.Cost{Requests: 1, Tokens: 10})
	require.Equal(t, quota.Granted, d.Outcome)
	e.settle("b", quota.Cost{Requests: 1, Tokens: 10}) // not counted: nothing learned
	require.InDelta(t, m.Burst+quota.BurstGain, e.snapshot().Margin.Burst, 1e-9)

	// The margin slows the bucket too: at the floor, 600/min refills at
	// 480/min.
	f := s.setup(t, "margin-rate", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}})
	for range 30 {
		f.pause(time.Millisecond, quota.RateLimitedPause)
		f.clock.Advance(2 * time.Millisecond)
	}
	for i := range 60 {
		f.expect(granted, "x"+string(rune('a'+i/26))+string(rune('a'+i%26)), reqs(1))
	}
	f.expect(queued(1250*time.Millisecond, rq), "y", reqs(1)) // 1/(0.8 per second)
}
