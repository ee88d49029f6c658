package quotatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// testPause: a pause refuses new tickets with the pause's wait, holds queued
// tickets that would mature inside it, sends a grant not yet settled back in
// line until it ends (its lease released, its charge kept), and is only
// ever extended; it lasts the duration given, from the store's now.
func testPause(t *testing.T, s suite) {
	e := s.setup(t, "pause", quota.Policy{Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)}})
	e.expect(granted, "a", reqs(1))
	e.expect(queued(1*time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.level(rq, -2)

	e.pause(1500*time.Millisecond, quota.PauseOverloaded)
	e.expect(paused(quota.Refused, 1500*time.Millisecond, quota.PauseOverloaded), "d", reqs(1))
	e.level(rq, -2) // the refusal charged nothing
	e.expect(paused(quota.Queued, 1500*time.Millisecond, quota.PauseOverloaded), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1)) // matures after the pause ends
	// a was granted before the pause: reserving under it again (its call
	// has not run, or must run again) waits the pause out, charging nothing.
	e.expect(paused(quota.Queued, 1500*time.Millisecond, quota.PauseOverloaded), "a", reqs(1))
	e.level(rq, -2)

	e.pause(time.Second, quota.PauseOverloaded)
	e.expect(paused(quota.Refused, 1500*time.Millisecond, quota.PauseOverloaded), "d", reqs(1))
	e.pause(-time.Second, quota.PauseOverloaded)
	e.pause(0, quota.PauseOverloaded)
	e.expect(paused(quota.Refused, 1500*time.Millisecond, quota.PauseOverloaded), "d", reqs(1))

	e.pause(3*time.Second, quota.PauseOverloaded)
	e.expect(paused(quota.Refused, 3*time.Second, quota.PauseOverloaded), "d", reqs(1))
	e.expect(paused(quota.Queued, 3*time.Second, quota.PauseOverloaded), "c", reqs(1))
	e.expect(paused(quota.Queued, 3*time.Second, quota.PauseOverloaded), "a", reqs(1))
	snap := e.snapshot()
	requireTime(t, start().Add(3*time.Second), snap.PausedUntil, "paused until")
	require.Equal(t, quota.PauseOverloaded, snap.PauseReason)

	e.clock.Advance(time.Second)
	e.expect(paused(quota.Queued, 2*time.Second, quota.PauseOverloaded), "b", reqs(1))

	// 3s: the pause is over. The calls it held are released at the pace of
	// the start gate, a second apart, not together; the line waits behind
	// their starts, so d, new, waits for the one after c's.
	e.clock.Advance(2 * time.Second) // 3s
	e.expectStart(0, "a", reqs(1))   // its place, charged once
	e.expectStart(time.Second, "b", reqs(1))
	e.expectStart(2*time.Second, "c", reqs(1))
	e.expect(queued(3*time.Second, rq), "d", reqs(1))
	e.level(rq, -3)
	snap = e.snapshot()
	require.True(t, snap.PausedUntil.IsZero(), "no pause in force: %s", snap.PausedUntil)
	require.Empty(t, snap.PauseReason)
}

// testObserve: an observation lowers a level to what the provider says
// remains and never raises it; without AdoptObservedLimits a reported limit
// changes nothing; axes the policy does not limit are ignored.
func testObserve(t *testing.T, s suite) {
	e := s.setup(t, "observe", quota.Policy{Limits: []quota.Limit{
		quota.Per(rq, 10, 10*time.Second).WithBurst(10 * time.Second), // 1 per second
		quota.PerMinute(tk, 6000).WithBurst(time.Minute),              // 100 per second
		quota.PerDay(tk, 10000, nil),
	}})
	e.observe(quota.Observation{Axis: tk, Limit: 6000, Remaining: 1000, Reset: 50 * time.Second})
	e.level(tk, 1000)
	e.observe(quota.Observation{Axis: tk, Limit: -1, Remaining: 5000})
	e.level(tk, 1000)
	e.clock.Advance(time.Second)
	e.level(tk, 1100) // refilling as before

	e.observe(quota.Observation{Axis: tpd, Limit: -1, Remaining: 4000})
	e.level(tpd, 4000)
	e.observe(quota.Observation{Axis: tpd, Limit: -1, Remaining: 8000})
	e.level(tpd, 4000)

	e.observe(quota.Observation{Axis: tk, Limit: 3000, Remaining: -1})
	require.Equal(t, int64(6000), e.axis(tk).Capacity, "limits are adopted only when the policy says so")
	e.level(tk, 1100)

	e.observe(
		quota.Observation{Axis: quota.InputTokens, Limit: 10, Remaining: 0},
		quota.Observation{Axis: cc, Limit: 1, Remaining: 0},
	)
	e.levels(map[quota.Axis]float64{rq: 10, tk: 1100, tpd: 4000})

	e.observe(quota.Observation{Axis: rq, Limit: -1, Remaining: 0})
	e.level(rq, 0)
	e.expect(queued(time.Second, rq), "a", reqs(1))

	// An invalid observation is rejected whole.
	err := e.store.Observe(e.ctx, e.key, []quota.Observation{
		{Axis: tk, Limit: -1, Remaining: 0},
		{Axis: quota.Axis(42), Limit: -1, Remaining: 0},
	})
	requireInvalid(t, err, "observation.axis")
	e.level(tk, 1100)
}

// testSettleObserve: observations given to Settle apply after the settled
// cost, as Observe applies them, and also when the ticket is not held; an
// invalid one rejects the whole settlement, which loses nothing.
func testSettleObserve(t *testing.T, s suite) {
	e := s.setup(t, "settle-observe", quota.Policy{
		Limits:              []quota.Limit{quota.PerMinute(tk, 6000).WithBurst(time.Minute), quota.PerDay(rq, 1000, nil)},
		AdoptObservedLimits: true,
	})
	settle := func(ticket string, actual quota.Cost, obs ...quota.Observation) error {
		return e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: actual, Observed: obs})
	}
	cost := quota.Cost{Requests: 1, Tokens: 1000}
	e.expect(granted, "a", cost)
	e.levels(map[quota.Axis]float64{tk: 5000, rpd: 999})

	// The refund of 500 lands first (5500), then the provider's 5200.
	require.NoError(t, settle("a", quota.Cost{Requests: 1, Tokens: 500},
		quota.Observation{Axis: tk, Limit: -1, Remaining: 5200},
		quota.Observation{Axis: rpd, Limit: -1, Remaining: 990}))
	e.levels(map[quota.Axis]float64{tk: 5200, rpd: 990})

	err := e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: cost, Charged: cost,
		Observed: []quota.Observation{{Axis: tk, Limit: 3000, Remaining: 100}}})
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a is settled already")
	e.level(tk, 100)
	require.Equal(t, int64(3000), e.axis(tk).Capacity, "the limit is adopted all the same")

	e.clock.Advance(time.Minute)
	e.expect(granted, "b", cost)
	err = settle("b", cost, quota.Observation{Axis: quota.Axis(42), Limit: -1, Remaining: 0})
	requireInvalid(t, err, "observation.axis")
	e.levels(map[quota.Axis]float64{tk: 2000, rpd: 989})
	require.NoError(t, settle("b", cost), "b is still granted after the rejected settlement")
}

// testObserveAdopt: with AdoptObservedLimits, a reported limit (less
// headroom) becomes the axis's capacity and refill rate; the level is capped
// at it, and what remains is then read against the new capacity.
func testObserveAdopt(t *testing.T, s suite) {
	e := s.setup(t, "observe-adopt", quota.Policy{
		Limits:              []quota.Limit{quota.PerMinute(rq, 100).WithBurst(time.Minute), quota.PerDay(tk, 10000, nil)},
		Headroom:            0.1,
		AdoptObservedLimits: true,
	})
	e.observe(quota.Observation{Axis: rq, Limit: 50, Remaining: -1})
	require.Equal(t, int64(45), e.axis(rq).Capacity)
	e.level(rq, 45)
	e.expect(granted, "a", reqs(45))
	// 45 per minute refill 0.75 per second.
	e.expect(queued(time.Second*4/3, rq), "b", reqs(1))

	e.observe(quota.Observation{Axis: rq, Limit: 200, Remaining: -1})
	require.Equal(t, int64(180), e.axis(rq).Capacity)
	e.level(rq, -1)
	e.observe(quota.Observation{Axis: rq, Limit: 0, Remaining: -1})
	require.Equal(t, int64(180), e.axis(rq).Capacity, "a zero limit is not adopted")

	e.observe(quota.Observation{Axis: tpd, Limit: 5000, Remaining: 1000})
	require.Equal(t, int64(4500), e.axis(tpd).Capacity)
	e.level(tpd, 1000)
}

// testDailyReset: a daily window resets at midnight in its zone, not UTC's,
// and a spent window refuses until then.
func testDailyReset(t *testing.T, s suite) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err, "the suite needs the IANA time zone database")
	e := s.setupAt(t, "daily-reset", quota.Policy{Limits: []quota.Limit{quota.PerDay(rq, 3, la)}},
		time.Date(2025, time.January, 15, 23, 59, 0, 0, la))
	midnight16 := time.Date(2025, time.January, 16, 0, 0, 0, 0, la)
	midnight17 := time.Date(2025, time.January, 17, 0, 0, 0, 0, la)

	e.expect(granted, "a", reqs(1))
	e.expect(granted, "b", reqs(1))
	e.expect(granted, "c", reqs(1))
	e.expect(refused(time.Minute, quota.DailyLimit, rpd), "d", reqs(1))
	l := e.axis(rpd)
	require.Equal(t, int64(3), l.Capacity)
	require.InDelta(t, 0, l.Available, LevelDelta)
	requireTime(t, midnight16, l.ResetAt, "reset")

	e.clock.Advance(time.Minute)
	l = e.axis(rpd)
	require.InDelta(t, 3, l.Available, LevelDelta)
	requireTime(t, midnight17, l.ResetAt, "reset")
	e.expect(granted, "d", reqs(1))

	// UTC's midnight (16:00 in Los Angeles) resets nothing.
	e.clock.Set(time.Date(2025, time.January, 16, 15, 59, 0, 0, la))
	e.expect(granted, "e", reqs(1))
	e.expect(granted, "f", reqs(1))
	e.expect(refused(8*time.Hour+time.Minute, quota.DailyLimit, rpd), "g", reqs(1))
	e.clock.Advance(2 * time.Minute)
	e.expect(refused(7*time.Hour+59*time.Minute, quota.DailyLimit, rpd), "g", reqs(1))
	l = e.axis(rpd)
	require.InDelta(t, 0, l.Available, LevelDelta)
	requireTime(t, midnight17, l.ResetAt, "reset")
}

// testConcurrencyLease: a concurrency slot is leased per granted ticket,
// released by Settle or Cancel, and freed LeaseTTL after the grant when
// never settled; a matured ticket with no free slot waits for the earliest
// expiry, at most DefaultLeaseRetry and at least a millisecond.
func testConcurrencyLease(t *testing.T, s suite) {
	e := s.setup(t, "concurrency", quota.Policy{
		Limits:   []quota.Limit{quota.Concurrent(2)},
		LeaseTTL: 10 * time.Second,
	})
	t0 := start()
	e.expect(leased(t0.Add(10*time.Second)), "a", quota.Cost{})
	e.clock.Advance(time.Second)
	e.expect(leased(t0.Add(11*time.Second)), "b", quota.Cost{})
	l := e.axis(cc)
	require.Equal(t, int64(2), l.Capacity)
	require.InDelta(t, 0, l.Available, LevelDelta)

	e.expect(concurrencyFull(quota.DefaultLeaseRetry), "c", quota.Cost{})
	e.expect(leased(t0.Add(11*time.Second)), "a", quota.Cost{}) // the same lease, renewed

	e.settle("a", quota.Cost{})
	e.level(cc, 1)
	e.expect(leased(t0.Add(11*time.Second)), "c", quota.Cost{})

	e.clock.Advance(9500 * time.Millisecond) // 10.5s; b and c expire at 11s
	e.expect(concurrencyFull(500*time.Millisecond), "d", quota.Cost{})
	e.clock.Advance(499500 * time.Microsecond) // 10.9995s
	e.expect(concurrencyFull(time.Millisecond), "d", quota.Cost{})
	e.clock.Advance(500 * time.Microsecond) // 11s
	e.expect(leased(t0.Add(21*time.Second)), "d", quota.Cost{})
	e.level(cc, 1)
	require.ErrorIs(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "b", Actual: quota.Cost{}}), quota.ErrUnknownTicket, "b's lease expired")

	e.cancel("d")
	e.level(cc, 2)
}
