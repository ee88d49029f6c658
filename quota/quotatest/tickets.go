package quotatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// testQueueOrder: successive tickets mature at successive exact times, each
// keeps its maturity, and newcomers queue behind.
func testQueueOrder(t *testing.T, s suite) {
	e := s.setup(t, "queue-order", quota.Policy{Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)}})
	e.expect(granted, "a", reqs(1))
	e.expect(queued(1*time.Second, rq), "b", reqs(1))
	e.expect(queued(2*time.Second, rq), "c", reqs(1))
	e.expect(queued(3*time.Second, rq), "d", reqs(1))
	e.level(rq, -3)

	e.clock.Advance(500 * time.Millisecond)
	e.expect(queued(500*time.Millisecond, rq), "b", reqs(1))
	e.expect(queued(1500*time.Millisecond, rq), "c", reqs(1))
	e.expect(queued(2500*time.Millisecond, rq), "d", reqs(1))
	e.level(rq, -2.5)

	e.clock.Advance(500 * time.Millisecond) // 1s
	e.expect(granted, "b", reqs(1))
	e.expect(queued(1*time.Second, rq), "c", reqs(1))
	e.expect(queued(3*time.Second, rq), "e", reqs(1)) // behind d, which matures at 3s
	e.level(rq, -3)

	// At 3s c and d have both matured: they are granted, d to start a
	// second after c (the start gate spaces them), and e waits behind d's
	// start, not its maturity: the line never runs ahead of the starts.
	e.clock.Advance(2 * time.Second) // 3s
	e.expect(granted, "c", reqs(1))
	e.expectStart(time.Second, "d", reqs(1))
	e.expect(queued(2*time.Second, rq), "e", reqs(1))
	e.level(rq, -2)
}

// testIdempotentTicket: reserving again under a ticket returns the same
// maturity, then the grant, and never charges twice.
func testIdempotentTicket(t *testing.T, s suite) {
	e := s.setup(t, "idempotent", quota.Policy{Limits: []quota.Limit{
		quota.Per(rq, 1, time.Second).WithBurst(time.Second),
		quota.PerMinute(tk, 6000).WithBurst(time.Minute), // 100 per second
	}})
	cost := quota.Cost{Requests: 1, Tokens: 100}
	e.expect(granted, "a", cost)
	e.expect(granted, "a", cost)
	e.levels(map[quota.Axis]float64{rq: 0, tk: 5900})

	e.expect(queued(time.Second, rq), "b", cost)
	e.expect(queued(time.Second, rq), "b", cost)
	e.expect(queued(time.Second, rq), "b", cost)
	e.levels(map[quota.Axis]float64{rq: -1, tk: 5800})

	e.clock.Advance(time.Second)
	e.expect(granted, "b", cost)
	e.expect(granted, "b", cost)
	e.levels(map[quota.Axis]float64{rq: 0, tk: 5900})

	e.settle("b", cost)
	err := e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "b", Actual: cost, Charged: cost})
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a second Settle finds no grant, and charges nothing beyond its charge")
	// A settled ticket is forgotten: reserving under it again charges afresh.
	e.expect(queued(time.Second, rq), "b", cost)
	e.levels(map[quota.Axis]float64{rq: -1, tk: 5800})
}

// testSettle: Settle charges or refunds the difference between the actual
// cost and the estimate, on buckets and daily windows; a refund never fills a
// bucket past its capacity, and an overrun larger than the capacity is
// charged in full.
func testSettle(t *testing.T, s suite) {
	e := s.setup(t, "settle", quota.Policy{Limits: []quota.Limit{
		quota.PerMinute(tk, 6000).WithBurst(time.Minute), // 100 per second
		quota.PerDay(tk, 100000, nil),
	}})
	e.expect(granted, "a", tokens(1000))
	e.levels(map[quota.Axis]float64{tk: 5000, tpd: 99000})
	e.settle("a", tokens(1500))
	e.levels(map[quota.Axis]float64{tk: 4500, tpd: 98500})

	e.expect(granted, "b", tokens(1000))
	e.settle("b", tokens(200))
	e.levels(map[quota.Axis]float64{tk: 4300, tpd: 98300})

	e.expect(granted, "c", tokens(1000))
	e.levels(map[quota.Axis]float64{tk: 3300, tpd: 97300})
	e.clock.Advance(time.Minute)
	e.level(tk, 6000)
	e.settle("c", tokens(0))
	e.levels(map[quota.Axis]float64{tk: 6000, tpd: 98300})

	e.expect(granted, "d", tokens(6000))
	e.settle("d", tokens(20000))
	e.levels(map[quota.Axis]float64{tk: -14000, tpd: 78300})
	e.expect(queued(141*time.Second, tk), "e", tokens(100))

	// However many times the capacity an overrun is, it is charged whole.
	h := s.setup(t, "settle-huge", quota.Policy{Limits: []quota.Limit{
		quota.Per(tk, 1, time.Second).WithBurst(time.Second),
		quota.PerDay(tk, 1, nil),
	}})
	h.expect(granted, "a", tokens(1))
	h.settle("a", tokens(1<<40))
	h.levels(map[quota.Axis]float64{tk: 1 - 1<<40, tpd: 1 - 1<<40})
	h.clock.Advance(time.Second)
	h.level(tk, 2-1<<40)
}

// testSettleAcrossMidnight: a daily window owes nothing for a ticket charged
// in an earlier day: settling it neither refunds nor charges the new day, nor
// does cancelling it refund, while buckets are corrected as always.
func testSettleAcrossMidnight(t *testing.T, s suite) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err, "the suite needs the IANA time zone database")
	e := s.setupAt(t, "settle-across-midnight", quota.Policy{
		Limits: []quota.Limit{
			quota.PerMinute(tk, 6000).WithBurst(time.Minute), // 100 per second
			quota.PerDay(tk, 100000, nil),
			quota.PerDay(rq, 10, la), // its day ends eight hours after UTC's
		},
		LeaseTTL: 9 * time.Hour, // tickets outlive the eight hours
	}, time.Date(2025, time.January, 15, 23, 59, 0, 0, time.UTC))
	cost := func(n int64) quota.Cost { return quota.Cost{Requests: 1, Tokens: n} }
	e.expect(granted, "a", cost(300))
	e.expect(granted, "b", cost(300))
	e.expect(granted, "c", cost(100))
	e.levels(map[quota.Axis]float64{tk: 5300, tpd: 99300, rpd: 7})

	e.clock.Advance(61 * time.Second) // 00:00:01 UTC, 16:00:01 in Los Angeles
	e.levels(map[quota.Axis]float64{tk: 6000, tpd: 100000, rpd: 7})
	e.expect(granted, "d", cost(500))
	e.levels(map[quota.Axis]float64{tk: 5500, tpd: 99500, rpd: 6})

	// UTC's day is new; Los Angeles is still in the day a, b and c were
	// charged in.
	e.settle("a", quota.Cost{Tokens: 100}) // 200 tokens and a request under
	e.levels(map[quota.Axis]float64{tk: 5700, tpd: 99500, rpd: 7})
	e.settle("b", cost(600)) // 300 tokens over
	e.levels(map[quota.Axis]float64{tk: 5400, tpd: 99500, rpd: 7})
	e.cancel("c")
	e.levels(map[quota.Axis]float64{tk: 5500, tpd: 99500, rpd: 8})
	e.settle("d", cost(400)) // charged today: refunded today
	e.levels(map[quota.Axis]float64{tk: 5600, tpd: 99600, rpd: 8})

	// A ticket queued before midnight and granted after it is charged in
	// the day it is granted in, where its call runs: Los Angeles's new day
	// owes g's request (its window has room for it).
	e.expect(granted, "f", cost(100))
	e.expect(queued(time.Second, tk), "g", cost(5600))
	e.levels(map[quota.Axis]float64{tk: -100, tpd: 93900, rpd: 6})
	e.clock.Set(time.Date(2025, time.January, 16, 0, 0, 0, 0, la)) // 08:00 UTC
	e.expect(granted, "h", cost(1000))
	e.levels(map[quota.Axis]float64{tk: 5000, tpd: 92900, rpd: 9})
	// g starts 6 s after h (the gate holds 5000 after h's 1000, g needs
	// 5600), and the bucket owes those 6 s: 600.
	e.expectStart(6*time.Second, "g", cost(5600))
	e.levels(map[quota.Axis]float64{tpd: 92900, rpd: 8})
	e.settle("g", quota.Cost{Requests: 2, Tokens: 5000}) // corrected in the day it was moved to
	e.levels(map[quota.Axis]float64{tk: 5000, tpd: 93500, rpd: 7})
	e.cancel("f") // f stays charged to Los Angeles's day before
	e.levels(map[quota.Axis]float64{tk: 5100, tpd: 93600, rpd: 7})
}

// testQueuedAcrossMidnight: a call queued before midnight and granted after
// it counts in the new day, which grants no more than its limit: with 2 a
// day, a day that granted two calls refuses the one queued the day before
// when it comes back, and refunds its charge.
func testQueuedAcrossMidnight(t *testing.T, s suite) {
	e := s.setupAt(t, "queued-across-midnight", quota.Policy{
		Limits: []quota.Limit{
			quota.Per(rq, 1, 10*time.Second).WithBurst(10 * time.Second),
			quota.PerDay(rq, 2, nil),
		},
		MaxWait: time.Minute,
	}, time.Date(2025, time.January, 15, 23, 59, 50, 0, time.UTC))
	e.expect(granted, "a", reqs(1))
	e.clock.Advance(time.Second)
	e.expect(queued(9*time.Second, rq), "b", reqs(1)) // matures at midnight
	e.levels(map[quota.Axis]float64{rpd: 0, rq: -0.9})

	e.clock.Advance(19 * time.Second) // 00:00:10, b not yet back
	e.levels(map[quota.Axis]float64{rpd: 2})
	e.expect(granted, "c", reqs(1))
	e.clock.Advance(10 * time.Second)
	e.expect(granted, "d", reqs(1))
	e.levels(map[quota.Axis]float64{rpd: 0, rq: 0})

	e.clock.Advance(5 * time.Second)
	e.expect(refused(23*time.Hour+59*time.Minute+35*time.Second, quota.DailyLimit, rpd), "b", reqs(1))
	e.levels(map[quota.Axis]float64{rpd: 0, rq: 1})
	e.expect(refused(23*time.Hour+59*time.Minute+35*time.Second, quota.DailyLimit, rpd), "e", reqs(1))
}

// testCancel: Cancel refunds a queued or granted ticket's whole charge
// (capped at capacity), releases its lease and forgets it.
func testCancel(t *testing.T, s suite) {
	e := s.setup(t, "cancel", quota.Policy{
		Limits:   []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second), quota.PerDay(rq, 10, nil), quota.Concurrent(1)},
		LeaseTTL: time.Minute,
	})
	e.expect(leased(start().Add(time.Minute)), "a", reqs(1))
	e.levels(map[quota.Axis]float64{rq: 0, rpd: 9, cc: 0})
	e.expect(queued(time.Second, rq), "b", reqs(1))
	e.levels(map[quota.Axis]float64{rq: -1, rpd: 8, cc: 0})

	e.cancel("b")
	e.levels(map[quota.Axis]float64{rq: 0, rpd: 9, cc: 0})
	e.expect(queued(time.Second, rq), "b", reqs(1)) // charged afresh
	e.level(rq, -1)
	e.cancel("b")

	e.cancel("a")
	e.levels(map[quota.Axis]float64{rq: 1, rpd: 10, cc: 1})
	require.ErrorIs(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: reqs(1), Charged: reqs(1)}), quota.ErrUnknownTicket)
	e.cancel("a")
	e.cancel("never-reserved")

	e.expect(leased(start().Add(time.Minute)), "c", reqs(1))
	e.clock.Advance(5 * time.Second)
	e.cancel("c")
	e.levels(map[quota.Axis]float64{rq: 1, rpd: 10, cc: 1})
}

// testTicketExpiry: a granted ticket is forgotten LeaseTTL after its grant, a
// queued one LeaseTTL after its maturity; a forgotten ticket is charged
// afresh and cannot be settled.
func testTicketExpiry(t *testing.T, s suite) {
	e := s.setup(t, "ticket-expiry", quota.Policy{
		Limits:   []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)},
		LeaseTTL: 10 * time.Second,
	})
	e.expect(granted, "a", reqs(1))                 // forgotten at 10s
	e.expect(queued(time.Second, rq), "b", reqs(1)) // forgotten at 11s unless granted
	e.level(rq, -1)

	e.clock.Advance(10 * time.Second) // 10s
	require.ErrorIs(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: reqs(1), Charged: reqs(1)}), quota.ErrUnknownTicket)
	e.level(rq, 1)
	e.expect(granted, "b", reqs(1)) // still held: granted without a charge, forgotten at 20s
	e.level(rq, 1)
	// Forgotten: charged afresh, to start a second after b (the start
	// gate), which the line waits behind too.
	e.expectStart(time.Second, "a", reqs(1))
	e.level(rq, -1)
	e.expect(queued(2*time.Second, rq), "c", reqs(1)) // matures at 12s, forgotten at 22s

	e.clock.Advance(10*time.Second - time.Millisecond) // 19.999s
	e.settle("b", reqs(1))
	e.clock.Advance(time.Millisecond + 2*time.Second) // 22s
	e.level(rq, 1)
	e.expect(granted, "c", reqs(1)) // forgotten: charged afresh
	e.level(rq, 0)
}

// testUnknownTicket: Settle needs a grant.
func testUnknownTicket(t *testing.T, s suite) {
	e := s.setup(t, "unknown-ticket", quota.Policy{Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)}})
	err := e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "never-reserved", Actual: reqs(1), Charged: reqs(1)})
	require.ErrorIs(t, err, quota.ErrUnknownTicket)
	require.ErrorContains(t, err, "never-reserved", "the error names the ticket")
	e.level(rq, 1) // it used no more than it says it was charged

	e.expect(granted, "a", reqs(1))
	e.expect(queued(time.Second, rq), "b", reqs(1))
	require.ErrorIs(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "b", Actual: reqs(1)}), quota.ErrUnknownTicket, "b is queued, not granted")
	e.expect(queued(time.Second, rq), "b", reqs(1)) // and keeps its place
	e.level(rq, -1)

	e.settle("a", reqs(1))
	require.ErrorIs(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "a", Actual: reqs(1), Charged: reqs(1)}), quota.ErrUnknownTicket, "a is settled already")
	e.level(rq, -1)
}
