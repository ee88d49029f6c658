package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// losses are the ways a Redis forgets a key's state that the tests cover:
// everything flushed, and a real restart of a redis-server without
// persistence, which comes back empty.
var losses = []struct {
	name string
	lose func(t *testing.T, srv *redistest.Server)
}{
	{"FLUSHALL", func(t *testing.T, srv *redistest.Server) {
		t.Helper()
		require.NoError(t, srv.Client().FlushAll(context.Background()).Err())
	}},
	{"restart without persistence", func(t *testing.T, srv *redistest.Server) {
		t.Helper()
		srv.Restart()
	}},
}

// recoveryEnv is one store on a server a test can make lose its state, on a
// clock moved by hand.
type recoveryEnv struct {
	t     *testing.T
	ctx   context.Context
	srv   *redistest.Server
	clock *quotatest.Clock
	ps    quota.Policies
	store *redis.Store
}

func newRecoveryEnv(t *testing.T, p quota.Policy) *recoveryEnv {
	t.Helper()
	return newRecoveryEnvOf(t, map[quota.Key]quota.Policy{gpt4o: p})
}

// newRecoveryEnvOf is newRecoveryEnv for several keys' policies.
func newRecoveryEnvOf(t *testing.T, m map[quota.Key]quota.Policy) *recoveryEnv {
	t.Helper()
	ps, err := quota.NewPolicies(m)
	require.NoError(t, err)
	e := &recoveryEnv{t: t, ctx: context.Background(), srv: redistest.StartServer(t),
		clock: quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC)), ps: ps}
	e.store = e.newStore()
	return e
}

// newStore returns another store on the same server: another replica, or
// a worker started anew, which has seen nothing of the key.
func (e *recoveryEnv) newStore() *redis.Store {
	e.t.Helper()
	s, err := redis.New(e.srv.Client(), e.ps, redis.Options{Clock: e.clock})
	require.NoError(e.t, err)
	return s
}

func (e *recoveryEnv) reserve(s *redis.Store, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	return e.reserveOn(s, gpt4o, ticket, cost)
}

func (e *recoveryEnv) reserveOn(s *redis.Store, k quota.Key, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	d, err := s.Reserve(e.ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: cost})
	require.NoError(e.t, err)
	return d
}

func (e *recoveryEnv) grant(s *redis.Store, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	return e.grantOn(s, gpt4o, ticket, cost)
}

func (e *recoveryEnv) grantOn(s *redis.Store, k quota.Key, ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	d := e.reserveOn(s, k, ticket, cost)
	require.Equal(e.t, quota.Granted, d.Outcome, "%s: %+v", ticket, d)
	return d
}

// available returns what the key's axis a has available, as s sees it.
func (e *recoveryEnv) available(s *redis.Store, a quota.Axis) float64 {
	e.t.Helper()
	snap, err := s.Snapshot(e.ctx, gpt4o)
	require.NoError(e.t, err)
	for _, l := range snap.Axes {
		if l.Axis == a {
			return l.Available
		}
	}
	e.t.Fatalf("no axis %s in %+v", a, snap)
	return 0
}

var oneRequest = quota.Cost{Requests: 1}

// TestLossGrantsNoBurst: a key drained before its state was lost does not
// hand out a full burst after it. The bucket restarts empty and refills at
// its rate, so the next calls wait their turn at 10 a second.
func TestLossGrantsNoBurst(t *testing.T) {
	for _, loss := range losses {
		t.Run(loss.name, func(t *testing.T) {
			e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second).WithBurst(time.Second)},
				MaxWait: 10 * time.Second})
			for i := range 10 {
				ticket := "before-" + strconv.Itoa(i)
				e.grant(e.store, ticket, oneRequest)
				require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: ticket, Actual: oneRequest, Charged: oneRequest}))
			}
			e.clock.Advance(50 * time.Millisecond) // half a request refilled

			loss.lose(t, e.srv)

			for i := range 10 {
				d := e.reserve(e.store, "after-"+strconv.Itoa(i), oneRequest)
				require.Equal(t, quota.Queued, d.Outcome, "call %d after the loss: %+v", i, d)
				require.Equal(t, quota.Capacity, d.Reason)
				require.Equal(t, time.Duration(i+1)*100*time.Millisecond, d.Wait, "call %d waits its turn at the refill rate", i)
			}
			require.InDelta(t, -10, e.available(e.store, quota.Requests), 1e-9)

			// The places mature at the rate: the first after 100 ms, the
			// second not before 200 ms.
			e.clock.Advance(100 * time.Millisecond)
			e.grant(e.store, "after-0", oneRequest)
			d := e.reserve(e.store, "after-1", oneRequest)
			require.Equal(t, quota.Queued, d.Outcome)
			require.Equal(t, 100*time.Millisecond, d.Wait)
		})
	}
}

// TestLossKeepsConcurrencyLimit: calls in flight when the state was lost
// keep their slots as they renew, new calls are not admitted over the limit
// meanwhile, a call that settles gives its slot back, and slots nobody
// claims come back after the policy's lease TTL.
func TestLossKeepsConcurrencyLimit(t *testing.T) {
	for _, loss := range losses {
		t.Run(loss.name, func(t *testing.T) {
			const leaseTTL = time.Minute
			e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(3)}, LeaseTTL: leaseTTL})
			for _, ticket := range []string{"a", "b", "c"} {
				e.grant(e.store, ticket, oneRequest)
			}
			e.clock.Advance(10 * time.Second)

			loss.lose(t, e.srv)

			full := func(ticket string) {
				t.Helper()
				d := e.reserve(e.store, ticket, oneRequest)
				require.Equal(t, quota.Queued, d.Outcome, "%s: %+v", ticket, d)
				require.Equal(t, quota.ConcurrencyFull, d.Reason)
			}
			full("new-1")
			require.Zero(t, e.available(e.store, quota.Concurrency), "every slot is held for the calls granted before the loss")

			// a and b still run: they renew, and keep their slots.
			for _, ticket := range []string{"a", "b"} {
				left, err := e.store.Renew(e.ctx, gpt4o, ticket, 0)
				require.NoError(t, err, "%s keeps its grant", ticket)
				require.Equal(t, leaseTTL, left)
			}
			full("new-1")

			// c ends: its Settle gives its slot to the next call.
			require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "c", Actual: oneRequest, Charged: oneRequest}))
			e.grant(e.store, "new-1", oneRequest)
			full("new-2")
			_, err := e.store.Renew(e.ctx, gpt4o, "c", 0)
			require.ErrorIs(t, err, quota.ErrUnknownTicket, "c settled: nothing to renew")

			// a renewed after the loss: it settles as any grant does.
			require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: oneRequest, Charged: oneRequest}))
			e.grant(e.store, "new-2", oneRequest)
			full("new-3")

			// b stops renewing (its worker died): its slot lapses a lease TTL
			// after its last renewal, like any grant's, while the calls that
			// renew keep theirs.
			e.clock.Advance(leaseTTL / 2)
			for _, ticket := range []string{"new-1", "new-2"} {
				_, err := e.store.Renew(e.ctx, gpt4o, ticket, 0)
				require.NoError(t, err)
			}
			e.clock.Advance(leaseTTL/2 - time.Second)
			full("new-3")
			e.clock.Advance(time.Second)
			e.grant(e.store, "new-3", oneRequest)
			full("new-4")
		})
	}
}

// TestUnclaimedPlaceholdersLapse: slots held for calls in flight at the
// loss that never come back (their workers died with the state) return
// after the policy's lease TTL from the loss.
func TestUnclaimedPlaceholdersLapse(t *testing.T) {
	const leaseTTL = time.Minute
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(2)}, LeaseTTL: leaseTTL})
	e.grant(e.store, "a", oneRequest)
	e.grant(e.store, "b", oneRequest)
	losses[0].lose(t, e.srv)

	d := e.reserve(e.store, "c", oneRequest)
	require.Equal(t, quota.Queued, d.Outcome)
	e.clock.Advance(leaseTTL - time.Microsecond)
	d = e.reserve(e.store, "c", oneRequest)
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
	e.clock.Advance(time.Microsecond)
	e.grant(e.store, "c", oneRequest)
	e.grant(e.store, "d", oneRequest)
	_, err := e.store.Renew(e.ctx, gpt4o, "a", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a came back too late: its slot was another call's")
}

// TestSettleAfterLoss: a call granted before the loss settles after it
// without error, charging what it used beyond its estimate (the bucket's
// restart at empty stands for the estimate) and refunding nothing.
func TestSettleAfterLoss(t *testing.T) {
	for _, loss := range losses {
		t.Run(loss.name, func(t *testing.T) {
			e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{
				quota.PerMinute(quota.Tokens, 60_000).WithBurst(time.Minute), quota.Concurrent(2)}})
			est := quota.Cost{Requests: 1, Tokens: 1000}
			over := e.grant(e.store, "over", est)
			under := e.grant(e.store, "under", est)

			loss.lose(t, e.srv)

			require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "under",
				Actual: quota.Cost{Requests: 1, Tokens: 400}, Charged: under.Charged}))
			require.InDelta(t, 0, e.available(e.store, quota.Tokens), 1e-9, "nothing refunded")
			require.InDelta(t, 1, e.available(e.store, quota.Concurrency), 1e-9, "under's slot is free")

			require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "over",
				Actual: quota.Cost{Requests: 1, Tokens: 1500}, Charged: over.Charged}))
			require.InDelta(t, -500, e.available(e.store, quota.Tokens), 1e-9, "the overrun is charged")
			require.InDelta(t, 2, e.available(e.store, quota.Concurrency), 1e-9)

			err := e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "over",
				Actual: quota.Cost{Requests: 1, Tokens: 1500}, Charged: over.Charged})
			require.ErrorIs(t, err, quota.ErrUnknownTicket, "no slot is left to give back")
		})
	}
}

// TestSettleAfterLossWithoutConcurrency: on a key without a concurrency
// limit no lease says which calls were granted before the loss, so their
// grants are gone as lapsed ones are: Renew and Settle say so, and Settle
// charges what the call used beyond its estimate.
func TestSettleAfterLossWithoutConcurrency(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Tokens, 60_000).WithBurst(time.Minute)}})
	est := quota.Cost{Tokens: 1000}
	d := e.grant(e.store, "a", est)
	losses[0].lose(t, e.srv)

	_, err := e.store.Renew(e.ctx, gpt4o, "a", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket)
	err = e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: quota.Cost{Tokens: 1200}, Charged: d.Charged})
	require.ErrorIs(t, err, quota.ErrUnknownTicket)
	require.InDelta(t, -200, e.available(e.store, quota.Tokens), 1e-9, "the overrun is charged to the bucket restarted empty")
}

// TestDailyWindowAfterLoss: a daily window restarts from what the stores
// saw of it, not from zero: the store that recovers the key brings what it
// saw, and every other store adds, on its next call, what it saw beyond
// that, so what was granted since the recovery still counts.
func TestDailyWindowAfterLoss(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.PerDay(quota.Tokens, 1000, nil)}})
	other := e.newStore()
	tokens := func(n int64) quota.Cost { return quota.Cost{Tokens: n} }
	e.grant(e.store, "a", tokens(600)) // e.store saw 600 used
	e.grant(other, "b", tokens(200))   // other saw 800
	losses[0].lose(t, e.srv)

	e.grant(e.store, "c", tokens(100)) // recovers at 600: 700
	require.InDelta(t, 300, e.available(e.store, quota.TokensPerDay), 1e-9)
	d := e.reserve(other, "d", tokens(150)) // adds the 200 it saw beyond 600: 900
	require.Equal(t, quota.Refused, d.Outcome, "800 before the loss and 100 since leave 100: %+v", d)
	require.Equal(t, quota.DailyLimit, d.Reason)
	require.InDelta(t, 100, e.available(e.store, quota.TokensPerDay), 1e-9)
	e.grant(other, "e", tokens(100)) // other's view is counted once: 1000
	d = e.reserve(e.store, "e3", tokens(1))
	require.Equal(t, quota.Refused, d.Outcome, "%+v", d)
	require.Equal(t, quota.DailyLimit, d.Reason)

	// What a store saw of another day's window says nothing of today's.
	e.clock.Advance(24 * time.Hour)
	e.grant(e.store, "f", tokens(100))
	losses[0].lose(t, e.srv)
	e.clock.Advance(24 * time.Hour)
	e.grant(e.store, "g", tokens(1000))
}

// TestFreshStoreAfterLoss: a store that never saw the key (a worker started
// after the loss) cannot tell a lost key from a new one, and its first call
// finds a full bucket. The first call of a store that did see the key then
// restarts the buckets from empty all the same, so the burst ends there.
func TestFreshStoreAfterLoss(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second).WithBurst(time.Second)},
		MaxWait: 10 * time.Second})
	second := e.newStore()
	e.grant(second, "before-second", oneRequest)
	for i := range 9 {
		e.grant(e.store, "before-"+strconv.Itoa(i), oneRequest)
	}
	losses[0].lose(t, e.srv)

	fresh := e.newStore()
	e.grant(fresh, "fresh-1", oneRequest)
	require.InDelta(t, 9, e.available(fresh, quota.Requests), 1e-9, "a fresh store sees a new key")

	d := e.reserve(e.store, "seen-1", oneRequest)
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
	require.Equal(t, 100*time.Millisecond, d.Wait)
	d = e.reserve(fresh, "fresh-2", oneRequest)
	require.Equal(t, quota.Queued, d.Outcome, "the fresh store waits too: %+v", d)

	// Recovered once: another store that saw the old state does not empty
	// the bucket again.
	e.clock.Advance(time.Second)
	require.InDelta(t, 8, e.available(e.store, quota.Requests), 1e-9)
	e.grant(second, "second-1", oneRequest)
	require.InDelta(t, 7, e.available(e.store, quota.Requests), 1e-9)
}

// TestEvictedTicketRecord: a grant whose ticket record alone was evicted
// (ticket records carry a TTL, so a volatile-* maxmemory-policy may evict
// them) keeps its lease as it renews, and gives it back when it settles.
func TestEvictedTicketRecord(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(1)}, LeaseTTL: time.Minute})
	e.grant(e.store, "a", oneRequest)
	n, err := e.srv.Client().Del(e.ctx, "tollgate:{openai/default/gpt-4o}:t:a").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	e.clock.Advance(30 * time.Second)
	left, err := e.store.Renew(e.ctx, gpt4o, "a", 0)
	require.NoError(t, err)
	require.Equal(t, time.Minute, left)
	e.clock.Advance(45 * time.Second) // past the lease's first expiry
	d := e.reserve(e.store, "b", oneRequest)
	require.Equal(t, quota.Queued, d.Outcome, "a still holds the only slot: %+v", d)

	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: oneRequest, Charged: oneRequest}))
	e.grant(e.store, "b", oneRequest)
}
