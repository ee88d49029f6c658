package quotatest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// expectStart reserves and requires a grant whose call starts in start.
func (e *env) expectStart(start time.Duration, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	d := e.reserve(ticket, cost)
	require.Equal(e.t, quota.Granted, d.Outcome, "%s: outcome of %+v", ticket, d)
	requireDuration(e.t, start, d.Start, "%s: start", ticket)
	return d
}

// testBurst: a bucket lets its burst go at once, by default a second's
// worth of a per-minute limit, and spaces the rest at its rate; a call
// larger than the burst goes alone when the bucket is full, the level in
// debt after it; a whole-period burst lets the whole limit go at once.
func testBurst(t *testing.T, s suite) {
	e := s.setup(t, "burst", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60)}})
	require.InDelta(t, 1, e.axis(rq).Burst, LevelDelta, "a second of 60/min")
	e.expectStart(0, "a", reqs(1))
	e.expect(queued(time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.level(rq, -2)
	e.clock.Advance(time.Second)
	e.expectStart(0, "b", quota.Cost{})

	// 6000 tokens a minute: a burst of 100. A call of 1000 goes at once
	// and leaves the level at -900; one of 50 goes once it holds 50 again
	// (9.5 s at 100 a second).
	f := s.setup(t, "burst-large", quota.Policy{Limits: []quota.Limit{quota.PerMinute(tk, 6000)}})
	f.expectStart(0, "a", tokens(1000))
	f.expect(queued(9500*time.Millisecond, tk), "b", tokens(50))
	// Settling corrects the start gate too, as the bucket: a used 100 of
	// its 1000, so the next call starts as soon as the bucket lets it.
	f.cancel("b")
	f.settle("a", tokens(100))
	f.clock.Advance(500 * time.Millisecond)
	f.expectStart(0, "c", tokens(50))

	g := s.setup(t, "burst-whole", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}})
	for _, id := range []string{"a", "b", "c", "d"} {
		g.expectStart(0, id, reqs(1))
	}
	h := s.setup(t, "burst-set", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(2 * time.Second)}})
	h.expectStart(0, "a", reqs(1))
	h.expectStart(0, "b", reqs(1))
	h.expect(queued(time.Second, rq), "c", reqs(1))
}

// testStartAfterSlot: calls whose places matured while every concurrency
// slot was taken do not start together when slots free up: each grant's
// start is spaced by the start gate, charged when the call is granted.
// A grant given up before it started gives its start back.
func testStartAfterSlot(t *testing.T, s suite) {
	e := s.setup(t, "start-after-slot", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60), quota.Concurrent(1)}})
	e.expectStart(0, "a", reqs(1))
	e.expect(queued(time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.clock.Advance(2500 * time.Millisecond) // both matured; a still runs
	e.expect(concurrencyFull(quota.DefaultLeaseRetry), "b", quota.Cost{})
	e.settle("a", reqs(1))
	e.expectStart(0, "b", quota.Cost{})
	e.settle("b", reqs(1))
	e.expectStart(time.Second, "c", quota.Cost{}) // not together with b
	e.cancel("c")
	e.clock.Advance(time.Second)
	e.expectStart(0, "d", reqs(1)) // c's start was given back
}

// testLateStart: a grant that comes back after its start (a retry
// dispatched late) gave that start to nobody, and takes a new one from the
// gate, after the starts given meanwhile, rather than starting at once
// beside them.
func testLateStart(t *testing.T, s suite) {
	e := s.setup(t, "late-start", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60)}})
	e.expectStart(0, "a", reqs(1))
	e.expect(queued(time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.pause(2500*time.Millisecond, quota.PauseOverloaded)
	e.clock.Advance(2500 * time.Millisecond) // 2.5s: the pause is over
	e.expectStart(0, "b", quota.Cost{})
	e.expectStart(time.Second, "c", quota.Cost{})             // to start at 3.5s
	e.expect(queued(1500*time.Millisecond, rq), "d", reqs(1)) // behind c's start
	e.clock.Advance(1500 * time.Millisecond)                  // 4s
	e.expectStart(500*time.Millisecond, "d", quota.Cost{})    // a second after c's start
	// c comes back at 4s, its start at 3.5s gone by: it starts a second
	// after d's, not at once beside it.
	e.expectStart(1500*time.Millisecond, "c", quota.Cost{})
}

// testMargin: a provider's rate limit on a granted call (RateLimitedPause)
// cuts the key's margin, once per pause; spend caps, daily quotas and
// overloads teach nothing; calls settled with their usage earn it back.
func testMargin(t *testing.T, s suite) {
	e := s.setup(t, "margin", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600), quota.PerMinute(tk, 60000)}})
	require.Equal(t, storekit.NoMargin, e.snapshot().Margin)
	e.pause(time.Hour, quota.PauseSpendCap)
	e.pause(time.Hour, quota.PauseDailyQuota)
	require.Equal(t, storekit.NoMargin, e.snapshot().Margin, "a closed key teaches nothing")
	e.clock.Advance(2 * time.Hour)
	e.pause(time.Second, quota.PauseOverloaded)
	require.Equal(t, storekit.NoMargin, e.snapshot().Margin, "an overload is not our model's fault")
	e.clock.Advance(2 * time.Second)

	e.pause(time.Second, quota.PauseRateLimited)
	cut := storekit.Cut(storekit.NoMargin)
	require.Equal(t, cut, e.snapshot().Margin)
	e.pause(time.Second, quota.PauseRateLimited) // the same burst's next 429
	require.Equal(t, cut, e.snapshot().Margin, "one lesson per pause")
	require.InDelta(t, 10*cut.Burst, e.axis(rq).Burst, LevelDelta, "a second of 600/min, cut")

	e.clock.Advance(2 * time.Second)
	for range 20 {
		e.pause(time.Millisecond, quota.PauseRateLimited)
		e.clock.Advance(2 * time.Millisecond)
	}
	m := e.snapshot().Margin
	require.InDelta(t, storekit.MinBurstMargin, m.Burst, 1e-9, "bounded below")
	require.InDelta(t, storekit.MinRateMargin, m.Rate, 1e-9, "bounded below")

	// Settled calls whose usage was counted earn it back, a little each.
	e.clock.Advance(time.Second)
	d := e.reserve("a", quota.Cost{Requests: 1, Tokens: 10})
	require.Equal(t, quota.Granted, d.Outcome)
	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: quota.Cost{Requests: 1, Tokens: 10}, Counted: true}))
	got := e.snapshot().Margin
	require.InDelta(t, m.Burst*storekit.BurstProbe, got.Burst, 1e-9, "a burst at the one refused grows by probes")
	require.InDelta(t, m.Rate+storekit.RateGain, got.Rate, 1e-9)
	e.clock.Advance(time.Second)
	d = e.reserve("b", quota.Cost{Requests: 1, Tokens: 10})
	require.Equal(t, quota.Granted, d.Outcome)
	e.settle("b", quota.Cost{Requests: 1, Tokens: 10}) // not counted: nothing learned
	require.Equal(t, got, e.snapshot().Margin)

	// A lesson keeps what a bucket owes: a call larger than the burst
	// left the level 900 short of it, and a narrower burst must not let
	// the next call go sooner. 6000 tokens a minute, cut: a burst of 50,
	// refilled at 98 a second; 50 more after the debt of 950 → 1000/98 s.
	g := s.setup(t, "margin-debt", quota.Policy{Limits: []quota.Limit{quota.PerMinute(tk, 6000)}})
	g.expect(granted, "a", tokens(1000))
	g.pause(time.Millisecond, quota.PauseRateLimited)
	g.clock.Advance(time.Millisecond)                             // the pause ends; 0.098 refilled
	g.expect(queued(10203*time.Millisecond, tk), "b", tokens(50)) // (1000 - 0.098)/98 s

	// The margin narrows the bucket and slows it: at the floor, a burst of
	// a whole minute of 60/min holds 60/16 = 3.75 and refills at 0.8 a
	// second. Three go at once; the fourth waits for the 0.25 it lacks.
	f := s.setup(t, "margin-rate", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}})
	for range 30 {
		f.pause(time.Millisecond, quota.PauseRateLimited)
		f.clock.Advance(2 * time.Millisecond)
	}
	for _, id := range []string{"a", "b", "c"} {
		f.expect(granted, id, reqs(1))
	}
	f.expect(queued(312500*time.Microsecond, rq), "d", reqs(1))
}

// testAxisMargin: a 429 that names the limit the provider enforced
// (quota.RateLimitedOn) cuts that axis's margin alone, so the other axes
// keep their pace, and the key's Margin reports its most cautious axis.
// One naming an axis the policy does not limit cuts every bucket's, as
// PauseRateLimited does. A call settled grows each axis's margin from its
// own.
func testAxisMargin(t *testing.T, s suite) {
	policy := quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600), quota.PerMinute(tk, 60000)}}
	cut := storekit.Cut(storekit.NoMargin)
	e := s.setup(t, "axis-margin", policy)
	e.pause(time.Second, quota.RateLimitedOn(rq))
	snap := e.snapshot()
	require.Equal(t, quota.RateLimitedOn(rq), snap.PauseReason)
	require.Equal(t, cut, e.axis(rq).Margin)
	require.Equal(t, storekit.NoMargin, e.axis(tk).Margin, "the token axis keeps its pace")
	require.Equal(t, cut, snap.Margin, "the key's margin is its most cautious axis's")
	require.InDelta(t, 10*cut.Burst, e.axis(rq).Burst, LevelDelta, "a second of 600/min, cut")
	require.InDelta(t, 1000, e.axis(tk).Burst, LevelDelta, "a second of 60000/min")
	e.pause(time.Second, quota.RateLimitedOn(tk)) // the same burst's next 429
	require.Equal(t, storekit.NoMargin, e.axis(tk).Margin, "one lesson per pause, whatever its axis")

	// The token axis's pace is its own: 1000 tokens go at once, and the
	// next 1000 a second later (at 1000 a second), not at the request
	// axis's cut rate.
	e.clock.Advance(2 * time.Second)
	e.expectStart(0, "a", quota.Cost{Requests: 1, Tokens: 1000})
	e.expect(queued(time.Second, tk), "b", quota.Cost{Requests: 1, Tokens: 1000})
	e.cancel("b")
	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: quota.Cost{Requests: 1, Tokens: 1000}, Counted: true}))
	top := storekit.MaxBurst(policy)
	require.Equal(t, storekit.Gain(cut, top), e.axis(rq).Margin, "each axis grows from its own")
	require.Equal(t, storekit.Gain(storekit.NoMargin, top), e.axis(tk).Margin)

	f := s.setup(t, "axis-margin-unlimited", policy)
	f.pause(time.Second, quota.RateLimitedOn(quota.InputTokens))
	require.Equal(t, cut, f.axis(rq).Margin, "an axis the policy does not limit teaches every one")
	require.Equal(t, cut, f.axis(tk).Margin)
	g := s.setup(t, "axis-margin-any", policy)
	g.pause(time.Second, quota.PauseRateLimited)
	require.Equal(t, cut, g.axis(rq).Margin, "a 429 naming no axis teaches every one")
	require.Equal(t, cut, g.axis(tk).Margin)
}

// countedCall reserves a call of cost, requires it granted at once, and
// settles it with its usage counted, as a provider's reply does.
func (e *env) countedCall(ticket string, cost quota.Cost) {
	e.t.Helper()
	e.expectStart(0, ticket, cost)
	require.NoError(e.t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: cost, Counted: true}), "Settle(%s)", ticket)
}

// testBurstLearning: a key's burst starts at Limit.Burst and grows by
// BurstGrowth with every call settled with its usage counted, up to the
// whole period, without handing out what the rate did not earn; a 429
// cuts it and remembers the burst refused, grows back quickly to
// BurstRecover of that and by probes above; a burst set by hand never
// grows.
func testBurstLearning(t *testing.T, s suite) {
	e := s.setup(t, "burst-learning", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600)}})
	require.Equal(t, 60.0, storekit.MaxBurst(quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600)}}))
	want := 1.0
	for i := range 10 {
		e.countedCall(fmt.Sprintf("a%d", i), reqs(1))
		e.clock.Advance(100 * time.Millisecond) // the one it took, earned back
		want *= storekit.BurstGrowth
	}
	require.InDelta(t, want, e.snapshot().Margin.Burst, 1e-9, "slow start: BurstGrowth a call")
	require.InDelta(t, 10*want, e.axis(rq).Burst, LevelDelta)
	require.InDelta(t, 10, e.axis(rq).Available, LevelDelta, "a larger burst hands out nothing the rate did not earn")
	for i := range 80 {
		e.countedCall(fmt.Sprintf("b%d", i), reqs(1))
		e.clock.Advance(100 * time.Millisecond)
	}
	require.Equal(t, quota.Margin{Burst: 60, Rate: 1}, e.snapshot().Margin, "grown to the whole minute, and no further")
	require.InDelta(t, 600, e.axis(rq).Burst, LevelDelta)
	e.clock.Advance(time.Minute) // idle: the bucket fills to its burst
	for i := range 600 {
		e.expectStart(0, fmt.Sprintf("c%d", i), reqs(1))
	}

	e.pause(time.Millisecond, quota.PauseRateLimited)
	cut := quota.Margin{Burst: 60 * storekit.BurstCut, Rate: storekit.RateCut, Refused: 60}
	require.Equal(t, cut, e.snapshot().Margin, "a 429 cuts the burst and remembers the one refused")
	require.InDelta(t, 600*storekit.BurstCut-600, e.axis(rq).Available, LevelDelta, "the bucket keeps what it owes")
	e.clock.Advance(time.Minute)
	// Back to BurstRecover of the burst refused at BurstGrowth, then by
	// probes.
	calls := 0
	for m := cut; m.Burst < storekit.BurstRecover*m.Refused; m = e.snapshot().Margin {
		require.Less(t, calls, 20, "recovery is quick")
		e.countedCall(fmt.Sprintf("d%d", calls), reqs(1))
		e.clock.Advance(100 * time.Millisecond)
		calls++
	}
	m := e.snapshot().Margin
	require.Less(t, m.Burst, 60*storekit.BurstRecover*storekit.BurstGrowth)
	e.countedCall("e", reqs(1))
	require.InDelta(t, m.Burst*storekit.BurstProbe, e.snapshot().Margin.Burst, 1e-9, "near the burst refused, probes")

	h := s.setup(t, "burst-learning-set", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 600).WithBurst(2 * time.Second)}})
	for i := range 10 {
		h.countedCall(fmt.Sprintf("a%d", i), reqs(1))
		h.clock.Advance(100 * time.Millisecond)
	}
	require.Equal(t, 1.0, storekit.OrNone(h.snapshot().Margin).Burst, "a burst set by hand is the most that goes at once")
	require.InDelta(t, 20, h.axis(rq).Burst, LevelDelta)
}
