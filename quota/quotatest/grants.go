package quotatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// renew renews ticket for ttl and requires it to have want left.
func (e *env) renew(ticket string, ttl, want time.Duration) {
	e.t.Helper()
	left, err := e.store.Renew(e.ctx, e.key, ticket, ttl)
	require.NoError(e.t, err, "Renew(%s)", ticket)
	requireDuration(e.t, want, left, "%s: left after renewal", ticket)
}

// testRenew: Renew keeps a grant and its lease alive for the TTL asked (at
// most the policy's LeaseTTL), never shortens them, and fails for a ticket
// not held as granted; Reservation.LeaseTTL sets a grant's TTL, and
// reserving again under a grant renews it.
func testRenew(t *testing.T, s suite) {
	e := s.setup(t, "renew", quota.Policy{
		Limits:   []quota.Limit{quota.Concurrent(1)},
		LeaseTTL: 10 * time.Second,
	})
	t0 := start()
	d := e.reserve("a", quota.Cost{})
	requireDecision(t, leased(t0.Add(10*time.Second)), d, "a")
	requireDuration(t, 10*time.Second, d.GrantLeft, "a: grant left")

	e.clock.Advance(8 * time.Second) // 8s
	e.renew("a", 0, 10*time.Second)  // the policy's LeaseTTL: lapses at 18s
	e.clock.Advance(8 * time.Second) // 16s
	e.level(cc, 0)
	e.expect(concurrencyFull(quota.DefaultLeaseRetry), "b", quota.Cost{})
	e.renew("a", time.Second, 2*time.Second)                    // never shortened: still 18s
	e.renew("a", time.Minute, 10*time.Second)                   // at most the policy's: 26s
	e.expect(leased(t0.Add(26*time.Second)), "a", quota.Cost{}) // the lease the renewals kept

	e.clock.Advance(5 * time.Second) // 21s
	d = e.reserve("a", quota.Cost{}) // reserving again under a grant renews it
	requireDecision(t, leased(t0.Add(31*time.Second)), d, "a")
	requireDuration(t, 10*time.Second, d.GrantLeft, "a: grant left")

	e.clock.Advance(10 * time.Second) // 31s: lapsed
	_, err := e.store.Renew(e.ctx, e.key, "a", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a lapsed: its lease may be another call's")
	e.expect(leased(t0.Add(41*time.Second)), "b", quota.Cost{})
	_, err = e.store.Renew(e.ctx, e.key, "c", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "never reserved")
	require.ErrorContains(t, err, `"c"`, "the error names the ticket")
	e.expect(concurrencyFull(quota.DefaultLeaseRetry), "c", quota.Cost{})
	_, err = e.store.Renew(e.ctx, e.key, "c", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "c is queued, not granted")

	// A caller may ask for a shorter TTL than the policy's, not a longer.
	f := s.setup(t, "renew-ttl", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}, LeaseTTL: 10 * time.Second})
	d, err = f.store.Reserve(f.ctx, quota.Reservation{Key: f.key, Ticket: "a", Cost: reqs(1), LeaseTTL: 2 * time.Second})
	require.NoError(t, err)
	requireDecision(t, granted, d, "a")
	requireDuration(t, 2*time.Second, d.GrantLeft, "a: grant left")
	d, err = f.store.Reserve(f.ctx, quota.Reservation{Key: f.key, Ticket: "b", Cost: reqs(1), LeaseTTL: time.Hour})
	require.NoError(t, err)
	requireDuration(t, 10*time.Second, d.GrantLeft, "b: grant left")
	f.clock.Advance(2 * time.Second)
	_, err = f.store.Renew(f.ctx, f.key, "a", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a lapsed after the 2s it asked for")
	f.renew("b", 0, 10*time.Second)
}

// testSettleExpired: a Settle that finds its grant gone (it lapsed while
// its call ran) still charges what the call used beyond its estimate, which
// stays charged; it refunds nothing, and a ticket never reserved is charged
// its actual cost whole.
func testSettleExpired(t *testing.T, s suite) {
	e := s.setup(t, "settle-expired", quota.Policy{
		Limits: []quota.Limit{
			quota.PerMinute(tk, 6000).WithBurst(time.Minute), // 100 per second
			quota.PerDay(tk, 100000, nil),
			quota.Concurrent(2),
		},
		LeaseTTL: 10 * time.Second,
	})
	settle := func(ticket string, actual, charged quota.Cost) {
		t.Helper()
		err := e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: actual, Charged: charged})
		require.ErrorIs(t, err, quota.ErrUnknownTicket, "%s is gone", ticket)
	}
	d := e.reserve("a", tokens(1000))
	require.Equal(t, tokens(1000), d.Charged)
	e.levels(map[quota.Axis]float64{tk: 5000, tpd: 99000, cc: 1})
	e.clock.Advance(10 * time.Second) // a lapses; the bucket refills 1000
	e.levels(map[quota.Axis]float64{tk: 6000, tpd: 99000, cc: 2})
	settle("a", tokens(1500), d.Charged)
	e.levels(map[quota.Axis]float64{tk: 5500, tpd: 98500, cc: 2})

	e.expect(leased(start().Add(20*time.Second)), "b", tokens(1000))
	e.clock.Advance(10 * time.Second) // b lapses; the bucket refills 1000
	e.levels(map[quota.Axis]float64{tk: 5500, tpd: 97500})
	settle("b", tokens(200), tokens(1000)) // nothing refunded
	e.levels(map[quota.Axis]float64{tk: 5500, tpd: 97500})

	settle("never-reserved", tokens(300), quota.Cost{})
	e.levels(map[quota.Axis]float64{tk: 5200, tpd: 97200})
}

// testPlace: a Place is charged and queued but never granted and takes no
// lease; a Reserve without Place claims it once mature, taking the lease;
// one never claimed lapses its LeaseTTL after maturing, and is refunded.
func testPlace(t *testing.T, s suite) {
	e := s.setup(t, "place", quota.Policy{
		Limits:   []quota.Limit{quota.Per(rq, 1, 10*time.Second).WithBurst(10 * time.Second), quota.Concurrent(1)},
		LeaseTTL: 10 * time.Second,
	})
	place := func(ticket string, want quota.Decision) {
		t.Helper()
		d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: reqs(1), Place: true, LeaseTTL: 2 * time.Second})
		require.NoError(t, err, "Reserve(%s, place)", ticket)
		requireDecision(t, want, d, ticket)
		if want.Outcome == quota.Queued {
			require.Equal(t, reqs(1), d.Charged, "%s: charged", ticket)
		}
	}
	ready := quota.Decision{Outcome: quota.Queued}
	t0 := start()
	place("p1", ready)
	place("p1", ready) // idempotent
	e.levels(map[quota.Axis]float64{rq: 0, cc: 1})
	e.expect(leased(t0.Add(10*time.Second)), "n", quota.Cost{}) // the place holds no slot
	e.cancel("n")
	place("p2", queued(10*time.Second, rq))
	e.level(rq, -1)

	d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: "p1", Cost: reqs(1), LeaseTTL: 5 * time.Second})
	require.NoError(t, err)
	requireDecision(t, leased(t0.Add(5*time.Second)), d, "p1") // claimed: its call's own TTL
	e.levels(map[quota.Axis]float64{rq: -1, cc: 0})
	e.settle("p1", reqs(1))

	e.clock.Advance(10 * time.Second) // 10s: p2 matures; nobody claims it
	place("p2", ready)
	e.level(rq, 0)
	e.clock.Advance(2 * time.Second) // 12s: p2 lapses and is refunded
	e.level(rq, 1)
	e.expect(leased(t0.Add(22*time.Second)), "p2", reqs(1)) // charged afresh
	e.level(rq, 0)

	e.pause(time.Second, quota.PauseOverloaded)
	place("p3", paused(quota.Refused, time.Second, quota.PauseOverloaded))

	// A claimed place waiting for a slot lives on past its own TTL.
	f := s.setup(t, "place-claimed", quota.Policy{
		Limits:   []quota.Limit{quota.Per(rq, 1, 10*time.Second).WithBurst(10 * time.Second), quota.Concurrent(1)},
		LeaseTTL: 10 * time.Second,
	})
	f.expect(leased(t0.Add(10*time.Second)), "holder", quota.Cost{})
	d, err = f.store.Reserve(f.ctx, quota.Reservation{Key: f.key, Ticket: "p", Cost: reqs(1), Place: true, LeaseTTL: 2 * time.Second})
	require.NoError(t, err)
	requireDecision(t, ready, d, "p")
	f.expect(concurrencyFull(quota.DefaultLeaseRetry), "p", reqs(1)) // claimed, no slot
	f.clock.Advance(5 * time.Second)
	f.expect(concurrencyFull(quota.DefaultLeaseRetry), "p", reqs(1))
	f.level(rq, 0.5)
	f.cancel("holder")
	f.expect(leased(t0.Add(15*time.Second)), "p", reqs(1))
	f.level(rq, 0.5) // its place, charged once
}

// testLapse: a ticket queued and never granted lapses LeaseTTL after its
// maturity and its charge is refunded (a call that never ran costs
// nothing), daily windows included while the day lasts; a lapsed grant
// keeps its charge, since its call may have run.
func testLapse(t *testing.T, s suite) {
	e := s.setup(t, "lapse", quota.Policy{
		Limits:   []quota.Limit{quota.Per(rq, 1, 10*time.Second).WithBurst(10 * time.Second), quota.PerDay(rq, 100, nil)},
		LeaseTTL: 10 * time.Second,
	})
	e.expect(granted, "a", reqs(1))                    // lapses at 10s, charged
	e.expect(queued(10*time.Second, rq), "b", reqs(1)) // lapses at 20s unless granted
	e.expect(queued(20*time.Second, rq), "c", reqs(1))
	e.levels(map[quota.Axis]float64{rq: -2, rpd: 97})

	e.clock.Advance(20 * time.Second) // 20s: the bucket refilled 2, and b lapsed
	e.levels(map[quota.Axis]float64{rq: 1, rpd: 98})
	e.expect(granted, "c", reqs(1))
	// d is granted too, to start when the start gate has room after c's
	// start, 10 s on; the bucket owes those 10 s.
	e.expectStart(10*time.Second, "d", reqs(1))
	e.levels(map[quota.Axis]float64{rq: -1, rpd: 97})
}
