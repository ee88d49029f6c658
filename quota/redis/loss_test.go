package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestLossSeenThroughATenant: a store that reached an account only through
// a tenant's key knows the account's state all the same, so after a loss
// its first untenanted call recovers the account instead of taking it for
// a new one: the drained bucket restarts empty and the tenant's calls in
// flight keep the account's two slots.
func TestLossSeenThroughATenant(t *testing.T) {
	for _, loss := range losses {
		t.Run(loss.name, func(t *testing.T) {
			const leaseTTL = time.Minute
			vip := gpt4o
			vip.Tenant = "vip"
			e := newRecoveryEnvOf(t, map[quota.Key]quota.Policy{
				gpt4o: {Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second).WithBurst(time.Second), quota.Concurrent(2)},
					LeaseTTL: leaseTTL, MaxWait: 10 * time.Second},
				vip: {Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second).WithBurst(time.Second)}, LeaseTTL: leaseTTL},
			})
			five := quota.Cost{Requests: 5}
			e.grantOn(e.store, vip, "v1", five)
			e.grantOn(e.store, vip, "v2", five)

			loss.lose(t, e.srv)

			d := e.reserveOn(e.store, gpt4o, "u1", oneRequest)
			require.Equal(t, quota.Queued, d.Outcome, "the account was drained and two calls hold its slots: %+v", d)
			e.clock.Advance(time.Second) // the bucket has refilled
			for _, ticket := range []string{"v1", "v2"} {
				_, err := e.store.Renew(e.ctx, vip, ticket, 0)
				require.NoError(t, err, "%s keeps its slot", ticket)
			}
			d = e.reserveOn(e.store, gpt4o, "u1", oneRequest)
			require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
			require.Equal(t, quota.ConcurrencyFull, d.Reason, "v1 and v2 hold both slots: %+v", d)
		})
	}
}

// TestStrayTicketClaimsNoPlaceholder: after a loss a placeholder slot goes
// only to a ticket that proves it was granted before the loss. A ticket
// never granted is unknown to Settle and Renew, and takes no slot from the
// calls still in flight.
func TestStrayTicketClaimsNoPlaceholder(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(2)}, LeaseTTL: time.Minute})
	e.grant(e.store, "a", oneRequest)
	e.grant(e.store, "b", oneRequest)
	losses[0].lose(t, e.srv)

	err := e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "stray", Actual: oneRequest, Charged: oneRequest})
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "stray was never granted")
	_, err = e.store.Renew(e.ctx, gpt4o, "stray", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket)
	_, err = e.newStore().Renew(e.ctx, gpt4o, "a", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "a store that never granted a cannot prove it")

	d := e.reserve(e.store, "c", oneRequest)
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "a and b still hold both slots: %+v", d)
	for _, ticket := range []string{"a", "b"} {
		_, err := e.store.Renew(e.ctx, gpt4o, ticket, 0)
		require.NoError(t, err, "%s proves its grant", ticket)
	}
}

// TestReplicasNeverOverdrawAcrossLoss: TestReplicasNeverOverdraw's fleet,
// on the real clock, with the server's state flushed while it runs. Grants
// over the whole run stay within what the buckets can have produced (a
// bucket that restarted full would add its capacity), and calls in flight
// at the loss are not joined by new ones over the concurrency limit.
func TestReplicasNeverOverdrawAcrossLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about two seconds")
	}
	const (
		replicas   = 3
		workers    = 8 // per replica
		concurrent = 10
		runFor     = 1500 * time.Millisecond
		loseAt     = 700 * time.Millisecond
		holdFor    = 5 * time.Millisecond
	)
	cost := quota.Cost{Requests: 1, Tokens: 100}
	limits := []quota.Limit{
		quota.Per(quota.Requests, 40, 200*time.Millisecond).WithBurst(200 * time.Millisecond), // 200/s
		quota.Per(quota.Tokens, 4000, 200*time.Millisecond).WithBurst(200 * time.Millisecond),
		quota.Concurrent(concurrent),
	}
	// The lease TTL bounds how long the slots of calls in flight at the loss
	// stay held if those calls never come back; these all settle.
	ps := policies(t, quota.Policy{Limits: limits, MaxWait: 20 * time.Millisecond, LeaseTTL: time.Second})
	srv := redistest.StartServer(t)
	stores := storesOn(t, srv, ps, replicas)
	ctx := context.Background()
	admin := srv.Client()
	before, err := admin.Time(ctx).Result()
	require.NoError(t, err)

	var (
		mu       sync.Mutex
		inFlight int
		peak     int
		granted  [quota.SpendPerMonth + 1]int64
		wg       sync.WaitGroup
		errs     = make(chan error, replicas*workers+1)
	)
	deadline := time.Now().Add(runFor)
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(loseAt)
		errs <- admin.FlushAll(ctx).Err()
	}()
	for r, s := range stores {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- hammer(ctx, s, fmt.Sprintf("r%d-w%d", r, w), cost, deadline, func() {
					mu.Lock()
					inFlight++
					peak = max(peak, inFlight)
					for _, a := range quota.Axes() {
						granted[a] += cost.On(a)
					}
					mu.Unlock()
					time.Sleep(holdFor)
					mu.Lock()
					inFlight--
					mu.Unlock()
				})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	after, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	elapsed := after.Sub(before)
	t.Logf("%d grants in %s across a FLUSHALL at %s; peak in flight %d", granted[quota.Requests], elapsed, loseAt, peak)

	require.LessOrEqual(t, peak, concurrent, "concurrent calls never exceed the lease limit, across the loss too")
	for _, l := range limits {
		if l.Axis.Kind() != quota.Bucket {
			continue
		}
		bound := float64(l.Capacity) + l.Rate()*elapsed.Seconds()
		got := float64(granted[l.Axis])
		t.Logf("%-8s granted %6.0f of at most %8.1f (%.1f%%)", l.Axis, got, bound, 100*got/bound)
		require.LessOrEqual(t, got, bound, "%s: granted more than the bucket produced", l.Axis)
	}
}

// TestLossRecoversTenantBudgets: an account and a tenant's budget nested in
// it recover together: both buckets restart empty, so the tenant's next
// call waits for the slower of the two to refill, and the calls in flight
// at the loss keep their slots on both budgets as they renew, and give
// them back as they settle.
func TestLossRecoversTenantBudgets(t *testing.T) {
	const leaseTTL = time.Minute
	vip := gpt4o
	vip.Tenant = "vip"
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		gpt4o: {Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second).WithBurst(time.Second), quota.Concurrent(3)}, LeaseTTL: leaseTTL},
		vip:   {Limits: []quota.Limit{quota.Per(quota.Requests, 4, time.Second).WithBurst(time.Second), quota.Concurrent(2)}, LeaseTTL: leaseTTL},
	})
	require.NoError(t, err)
	srv := redistest.StartServer(t)
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	s, err := redis.New(srv.Client(), ps, redis.Options{Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	reserve := func(k quota.Key, ticket string) quota.Decision {
		t.Helper()
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: oneRequest})
		require.NoError(t, err)
		return d
	}
	settle := func(k quota.Key, ticket string) {
		t.Helper()
		require.NoError(t, s.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: oneRequest, Charged: oneRequest}))
	}
	for _, c := range []struct {
		key    quota.Key
		ticket string
	}{{vip, "v1"}, {vip, "v2"}, {gpt4o, "u1"}} {
		require.Equal(t, quota.Granted, reserve(c.key, c.ticket).Outcome, c.ticket)
	}

	losses[0].lose(t, srv)

	d := reserve(vip, "v3")
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
	require.Equal(t, quota.Capacity, d.Reason)
	require.Equal(t, 250*time.Millisecond, d.Wait, "the tenant's bucket restarted empty: 4 a second")
	require.NoError(t, s.Cancel(ctx, vip, "v3"))

	for _, ticket := range []string{"v1", "v2"} {
		left, err := s.Renew(ctx, vip, ticket, 0)
		require.NoError(t, err, "%s keeps its grant", ticket)
		require.Equal(t, leaseTTL, left)
	}
	clock.Advance(time.Second) // both buckets full again
	d = reserve(vip, "v3")
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "v1 and v2 hold the tenant's two slots: %+v", d)
	d = reserve(gpt4o, "u2")
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "v1, v2 and u1's placeholder hold the account's three: %+v", d)

	settle(gpt4o, "u1")
	require.Equal(t, quota.Granted, reserve(gpt4o, "u2").Outcome, "u1 gave its slot back")
	settle(vip, "v1")
	require.Equal(t, quota.Granted, reserve(vip, "v3").Outcome, "v1 gave its slots back")
	require.Equal(t, quota.ConcurrencyFull, reserve(gpt4o, "u3").Reason, "v2, u2 and v3 in flight")
}

// TestPlaceholdersHoldForTheirBudgetsLeaseTTL: the placeholders a recovery
// writes on a budget are held for that budget's own LeaseTTL, not for the
// recovering call's: a tenant with a short LeaseTTL that is first to come
// back after a loss does not free its account's slots before the account's
// calls in flight (with the account's longer TTL) could renew.
func TestPlaceholdersHoldForTheirBudgetsLeaseTTL(t *testing.T) {
	const accountTTL, tenantTTL = time.Minute, 2 * time.Second
	vip := gpt4o
	vip.Tenant = "vip"
	e := newRecoveryEnvOf(t, map[quota.Key]quota.Policy{
		gpt4o: {Limits: []quota.Limit{quota.Concurrent(2)}, LeaseTTL: accountTTL},
		vip:   {Limits: []quota.Limit{quota.Concurrent(1)}, LeaseTTL: tenantTTL},
	})
	e.grant(e.store, "u1", oneRequest)
	e.grant(e.store, "u2", oneRequest)

	losses[0].lose(t, e.srv)

	d := e.reserveOn(e.store, vip, "v1", oneRequest)
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "the account's two slots are held for u1 and u2: %+v", d)
	require.NoError(t, e.store.Cancel(e.ctx, vip, "v1"))

	e.clock.Advance(2 * tenantTTL)
	d = e.reserveOn(e.store, vip, "v2", oneRequest)
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "past the tenant's TTL the account's placeholders still hold: %+v", d)
	require.NoError(t, e.store.Cancel(e.ctx, vip, "v2"))
	left, err := e.store.Renew(e.ctx, gpt4o, "u1", 0)
	require.NoError(t, err, "u1 takes its placeholder over")
	require.Equal(t, accountTTL, left)

	e.clock.Advance(accountTTL)
	_, err = e.store.Renew(e.ctx, gpt4o, "u2", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "u2's placeholder lapsed unclaimed with the account's TTL")
	require.Equal(t, quota.Granted, e.reserveOn(e.store, vip, "v3", oneRequest).Outcome, "u1 lapsed too; the slots are free")
}

// lossBeforeReply is a client hook that, once armed, runs between a
// script's run and its reply being read: it loses the state and lets
// another call through, as a replica's other goroutines may.
type lossBeforeReply struct {
	passHook
	mu    sync.Mutex
	armed func()
}

func (h *lossBeforeReply) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		f := h.armed
		h.armed = nil
		h.mu.Unlock()
		if f != nil {
			f()
		}
		return err
	}
}

// TestGrantProvesTheEpochItWasMadeIn: a grant's proof is the epoch it was
// decided in, even when, before its reply is read, another call of the
// same Store finds the state lost and recovers it: the grant then settles
// on the placeholder kept for it instead of being told its ticket is
// unknown.
func TestGrantProvesTheEpochItWasMadeIn(t *testing.T) {
	ps := policies(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(2)}})
	srv := redistest.StartServer(t)
	rdb := srv.Client()
	hook := &lossBeforeReply{}
	rdb.AddHook(hook)
	s, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	one := quota.Cost{Requests: 1}
	grant := func(ticket string) {
		t.Helper()
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: one})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome, ticket)
	}
	grant("before") // the Store now knows the state's epoch

	hook.mu.Lock()
	hook.armed = func() {
		require.NoError(t, srv.Client().FlushAll(ctx).Err())
		// Finds the state lost: the Store's view moves to the new epoch,
		// and the call waits, the slots held for the calls in flight.
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "recovers", Cost: one})
		require.NoError(t, err)
		require.Equal(t, quota.ConcurrencyFull, d.Reason)
	}
	hook.mu.Unlock()
	grant("raced") // decided before the loss; its reply is read after the recovery

	require.NoError(t, s.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "raced", Actual: one}),
		"raced was granted before the loss: its slot is one of the placeholders")
	require.NoError(t, s.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "before", Actual: one}),
		"before was granted before the loss too")
	grant("recovers") // both slots given back
}
