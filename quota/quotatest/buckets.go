package quotatest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// testRefill: buckets refill lazily and continuously at capacity per period,
// and a full bucket earns nothing while idle.
func testRefill(t *testing.T, s suite) {
	e := s.setup(t, "refill", quota.Policy{Limits: []quota.Limit{
		quota.PerMinute(rq, 60).WithBurst(time.Minute),    // 1 per second
		quota.PerMinute(tk, 90000).WithBurst(time.Minute), // 1500 per second
	}})
	e.levels(map[quota.Axis]float64{rq: 60, tk: 90000})
	require.Equal(t, int64(60), e.axis(rq).Capacity)

	e.expect(granted, "a", quota.Cost{Requests: 60, Tokens: 90000})
	e.levels(map[quota.Axis]float64{rq: 0, tk: 0})

	e.clock.Advance(500 * time.Millisecond)
	e.levels(map[quota.Axis]float64{rq: 0.5, tk: 750})
	e.clock.Advance(14500 * time.Millisecond)
	e.levels(map[quota.Axis]float64{rq: 15, tk: 22500})

	e.clock.Advance(time.Hour)
	e.levels(map[quota.Axis]float64{rq: 60, tk: 90000})

	// An hour idle earned nothing past the capacity: after spending it all,
	// the next request waits a full refill interval.
	e.expect(granted, "b", reqs(60))
	e.expect(queued(time.Second, rq), "c", reqs(1))
	e.level(rq, -1)
}

// testClockStepBack: a clock stepping back earns no refill, and the span it
// repeats earns none a second time once the clock moves on, even when a
// refund or an observation is written while the clock is back.
func testClockStepBack(t *testing.T, s suite) {
	e := s.setup(t, "clock-step-back", quota.Policy{Limits: []quota.Limit{quota.PerSecond(rq, 10).WithBurst(time.Second)}})
	e.expect(granted, "a", reqs(10))
	e.clock.Advance(500 * time.Millisecond)
	e.expect(granted, "b", reqs(5))
	e.level(rq, 0)

	e.clock.Advance(-500 * time.Millisecond)
	e.level(rq, 0)
	e.settle("b", reqs(4)) // refunds 1
	e.level(rq, 1)
	e.observe(quota.Observation{Axis: rq, Limit: -1, Remaining: 5}) // lowers nothing
	e.level(rq, 1)

	e.clock.Advance(500 * time.Millisecond)
	e.level(rq, 1)
	e.clock.Advance(100 * time.Millisecond)
	e.level(rq, 2)
}

// testAllOrNothing: a refusal on any axis charges no axis; a queued ticket
// charges every axis.
func testAllOrNothing(t *testing.T, s suite) {
	e := s.setup(t, "all-or-nothing", quota.Policy{
		Limits:  []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute), quota.PerMinute(tk, 600).WithBurst(time.Minute)}, // tokens: 10 per second
		MaxWait: 5 * time.Second,
	})
	e.expect(granted, "a", quota.Cost{Requests: 1, Tokens: 600})
	e.levels(map[quota.Axis]float64{rq: 9, tk: 0})

	// 100 tokens take 10s: past MaxWait, so refused, and requests untouched.
	e.expect(refused(10*time.Second, quota.Capacity, tk), "b", quota.Cost{Requests: 1, Tokens: 100})
	e.levels(map[quota.Axis]float64{rq: 9, tk: 0})

	// 30 tokens take 3s: queued, and both axes charged.
	e.expect(queued(3*time.Second, tk), "c", quota.Cost{Requests: 1, Tokens: 30})
	e.levels(map[quota.Axis]float64{rq: 8, tk: -30})

	// A spent daily window refuses before any bucket is charged.
	d := s.setup(t, "all-or-nothing-daily", quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute), quota.PerDay(tk, 100, nil)},
	})
	d.expect(granted, "a", quota.Cost{Requests: 1, Tokens: 100})
	d.expect(refused(6*time.Hour, quota.DailyLimit, tpd), "b", quota.Cost{Requests: 1, Tokens: 1})
	d.levels(map[quota.Axis]float64{rq: 9, tpd: 0})
}

// testHeadroom: Headroom lowers every axis's capacity, and with it the refill
// rate (capacity per period).
func testHeadroom(t *testing.T, s suite) {
	e := s.setup(t, "headroom", quota.Policy{
		Limits:   []quota.Limit{quota.PerMinute(rq, 100).WithBurst(time.Minute), quota.PerDay(tk, 1000, nil), quota.Concurrent(10)},
		Headroom: 0.1,
	})
	snap := e.snapshot()
	require.Len(t, snap.Axes, 3)
	for i, want := range []struct {
		axis      quota.Axis
		capacity  int64
		available float64
	}{{rq, 90, 90}, {tpd, 900, 900}, {cc, 9, 9}} {
		require.Equal(t, want.axis, snap.Axes[i].Axis)
		require.Equal(t, want.capacity, snap.Axes[i].Capacity, "capacity of %s", want.axis)
		require.InDelta(t, want.available, snap.Axes[i].Available, LevelDelta, "available %s", want.axis)
	}

	e.expect(leased(start().Add(quota.DefaultLeaseTTL)), "a", reqs(90))
	// 90 per minute refill 1.5 per second: one request takes 2/3 s.
	e.expect(queued(time.Second*2/3, rq), "b", reqs(1))

	_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: "c", Cost: reqs(91)})
	var oversize *quota.OversizeError
	require.ErrorAs(t, err, &oversize)
	require.Equal(t, quota.OversizeError{Key: e.key, Axis: rq, Cost: 91, Capacity: 90}, *oversize)
	_, err = e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: "d", Cost: tokens(901)})
	require.ErrorAs(t, err, &oversize)
	require.Equal(t, quota.OversizeError{Key: e.key, Axis: tpd, Cost: 901, Capacity: 900}, *oversize)
}

// testPriorityReserve: Low callers wait until the level covers their cost
// plus the reserve; Normal callers do not.
func testPriorityReserve(t *testing.T, s suite) {
	e := s.setup(t, "priority-reserve", quota.Policy{
		Limits:          []quota.Limit{quota.Per(rq, 10, 10*time.Second).WithBurst(10 * time.Second)}, // 1 per second, 2 reserved
		PriorityReserve: 0.2,
	})
	e.expectAs(granted, "low-a", reqs(8), quota.Low) // 8 + 2 reserved fit in 10
	e.level(rq, 2)
	e.expectAs(queued(time.Second, rq), "low-b", reqs(1), quota.Low) // needs 3, has 2
	e.level(rq, 1)
	e.expectAs(granted, "normal-c", reqs(1), quota.Normal) // needs 1, has 1
	e.level(rq, 0)
	e.expectAs(queued(time.Second, rq), "normal-d", reqs(1), quota.Normal)
	e.level(rq, -1)

	// Low may never ask for more than capacity less the reserve, and is
	// told that capacity.
	requireOversize(t, e, "low-e", reqs(9), quota.Low,
		quota.OversizeError{Key: e.key, Axis: rq, Cost: 9, Capacity: 8, Priority: quota.Low})
	e.level(rq, -1)

	// A fractional reserve leaves Low the whole units below it.
	f := s.setup(t, "priority-reserve-fraction", quota.Policy{
		Limits:          []quota.Limit{quota.Per(rq, 10, 10*time.Second).WithBurst(10 * time.Second)}, // 2.5 reserved
		PriorityReserve: 0.25,
	})
	requireOversize(t, f, "low-a", reqs(8), quota.Low,
		quota.OversizeError{Key: f.key, Axis: rq, Cost: 8, Capacity: 7, Priority: quota.Low})
	f.expectAs(granted, "low-b", reqs(7), quota.Low)

	// Daily windows keep the reserve too.
	d := s.setup(t, "priority-reserve-daily", quota.Policy{
		Limits:          []quota.Limit{quota.PerDay(tk, 1000, nil)},
		PriorityReserve: 0.2,
	})
	requireOversize(t, d, "low-big", tokens(801), quota.Low,
		quota.OversizeError{Key: d.key, Axis: tpd, Cost: 801, Capacity: 800, Priority: quota.Low})
	d.expectAs(granted, "low-a", tokens(800), quota.Low)
	d.expectAs(refused(6*time.Hour, quota.DailyLimit, tpd), "low-b", tokens(1), quota.Low)
	d.expectAs(granted, "normal-c", tokens(200), quota.Normal)
	d.expectAs(refused(6*time.Hour, quota.DailyLimit, tpd), "normal-d", tokens(1), quota.Normal)
	d.level(tpd, 0)

	// So do concurrency slots: Low may hold the whole slots below the
	// reserve (4 of 5, 2.5 of 10 reserved leaving 7), Normal every slot.
	c := s.setup(t, "priority-reserve-concurrency", quota.Policy{
		Limits:          []quota.Limit{quota.Concurrent(5)},
		PriorityReserve: 0.2,
		LeaseTTL:        time.Minute,
	})
	lease := leased(start().Add(time.Minute))
	for _, id := range []string{"low-a", "low-b", "low-c", "low-d"} {
		c.expectAs(lease, id, quota.Cost{}, quota.Low)
	}
	c.expectAs(concurrencyFull(quota.DefaultLeaseRetry), "low-e", quota.Cost{}, quota.Low)
	c.expectAs(lease, "normal-f", quota.Cost{}, quota.Normal)
	c.level(cc, 0)
	c.cancel("low-a")
	c.expectAs(concurrencyFull(quota.DefaultLeaseRetry), "low-e", quota.Cost{}, quota.Low) // 4 held, 1 free: the reserve
	c.expectAs(lease, "normal-g", quota.Cost{}, quota.Normal)

	f = s.setup(t, "priority-reserve-concurrency-fraction", quota.Policy{
		Limits:          []quota.Limit{quota.Concurrent(10)},
		PriorityReserve: 0.25,
		LeaseTTL:        time.Minute,
	})
	for i := range 7 {
		f.expectAs(lease, "low-"+strconv.Itoa(i), quota.Cost{}, quota.Low)
	}
	f.expectAs(concurrencyFull(quota.DefaultLeaseRetry), "low-7", quota.Cost{}, quota.Low)

	// A single slot with a reserve is closed to Low: it can never run.
	one := s.setup(t, "priority-reserve-one-slot", quota.Policy{
		Limits:          []quota.Limit{quota.Concurrent(1)},
		PriorityReserve: 0.2,
	})
	requireOversize(t, one, "low-a", quota.Cost{}, quota.Low,
		quota.OversizeError{Key: one.key, Axis: cc, Cost: 1, Capacity: 0, Priority: quota.Low})
	one.expectAs(leased(start().Add(quota.DefaultLeaseTTL)), "normal-b", quota.Cost{}, quota.Normal)
}

// testMaxWait: a ticket that would wait longer than MaxWait is refused, told
// the wait, and reserves nothing; one that waits exactly MaxWait is queued.
func testMaxWait(t *testing.T, s suite) {
	e := s.setup(t, "max-wait", quota.Policy{
		Limits:  []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)},
		MaxWait: 3 * time.Second,
	})
	e.expect(granted, "a", reqs(1))
	e.expect(queued(1*time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.expect(queued(3*time.Second, rq), "d", reqs(1))
	e.expect(refused(4*time.Second, quota.Capacity, rq), "e", reqs(1))
	e.level(rq, -3)
	// Refused took no place: asking again is a fresh decision.
	e.expect(refused(4*time.Second, quota.Capacity, rq), "e", reqs(1))
	e.clock.Advance(time.Second)
	e.expect(queued(3*time.Second, rq), "e", reqs(1))
	e.level(rq, -3)
}

// testOversize: a cost above an axis's capacity fails at once with an
// *quota.OversizeError and charges nothing; a cost equal to it fits.
func testOversize(t *testing.T, s suite) {
	e := s.setup(t, "oversize", quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute), quota.PerDay(tk, 1000, nil)},
	})
	for _, c := range []struct {
		name string
		cost quota.Cost
		want quota.OversizeError
	}{
		{"bucket", reqs(11), quota.OversizeError{Key: e.key, Axis: rq, Cost: 11, Capacity: 10}},
		{"daily", quota.Cost{Requests: 1, Tokens: 1001}, quota.OversizeError{Key: e.key, Axis: tpd, Cost: 1001, Capacity: 1000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: c.name, Cost: c.cost})
			require.ErrorIs(t, err, quota.ErrOversize)
			require.False(t, errors.Is(err, quota.ErrInvalid), "oversize is not invalid input: %v", err)
			var oversize *quota.OversizeError
			require.ErrorAs(t, err, &oversize)
			require.Equal(t, c.want, *oversize)
			e.levels(map[quota.Axis]float64{rq: 10, tpd: 1000})
		})
	}
	e.expect(granted, "whole", quota.Cost{Requests: 10, Tokens: 1000})
	e.levels(map[quota.Axis]float64{rq: 0, tpd: 0})
}

// requireOversize requires reserving cost at priority under ticket to fail
// with want.
func requireOversize(t *testing.T, e *env, ticket string, cost quota.Cost, priority quota.Priority, want quota.OversizeError) {
	t.Helper()
	_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: cost, Priority: priority})
	var oversize *quota.OversizeError
	require.ErrorAs(t, err, &oversize)
	require.Equal(t, want, *oversize)
}
