package memory_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
)

func newStore(t testing.TB, ps quota.Policies, clock quota.Clock) *memory.Store {
	t.Helper()
	s, err := memory.New(ps, memory.Options{Clock: clock})
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	quotatest.Run(t, func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
		return newStore(t, ps, clock)
	})
}

func TestNewDefaultsToSystemClock(t *testing.T) {
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute)}}})
	require.NoError(t, err)
	s, err := memory.New(ps, memory.Options{})
	require.NoError(t, err)
	before := time.Now()
	snap, err := s.Snapshot(context.Background(), k)
	require.NoError(t, err)
	require.False(t, snap.At.Before(before), "snapshot time %s is before %s", snap.At, before)
	require.WithinDuration(t, time.Now(), snap.At, time.Second)
}

// TestConcurrentGrantsNeverExceedBudget races many goroutines for one key
// while the fake clock moves, and checks the grants against the bucket's
// capacity plus its refill over the elapsed time, exactly.
func TestConcurrentGrantsNeverExceedBudget(t *testing.T) {
	const (
		capacity   = 50
		workers    = 16
		step       = 10 * time.Millisecond // refills one request
		clockMoves = 200
		leases     = 8
	)
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {
		Limits:  []quota.Limit{quota.Per(quota.Requests, capacity, capacity*step).WithBurst(capacity * step), quota.Concurrent(leases)},
		MaxWait: time.Nanosecond, // refuse rather than queue: every grant is immediate
	}})
	require.NoError(t, err)
	clock := quotatest.NewClock(time.Date(2025, time.January, 15, 0, 0, 0, 0, time.UTC))
	s := newStore(t, ps, clock)
	ctx := context.Background()

	var grants, refusals atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Keep asking while the clock moves, then drain what is left.
			for i, drain := 0, 0; drain < capacity; i++ {
				if stopped.Load() {
					drain++
				}
				ticket := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				switch d.Outcome {
				case quota.Granted:
					grants.Add(1)
					err = s.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: quota.Cost{Requests: 1}})
				case quota.Queued:
					// Only a full concurrency table queues a ticket with
					// no wait: give its place back.
					if d.Reason != quota.ConcurrencyFull {
						t.Errorf("%s queued for %s with MaxWait 1ns", ticket, d.Reason)
					}
					err = s.Cancel(ctx, k, ticket)
				default:
					refusals.Add(1)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range clockMoves {
		// Refill only a drained bucket, so no refill is lost to the cap
		// and the workers must have taken all of it.
		for seen := refusals.Load(); refusals.Load() == seen; {
			runtime.Gosched()
		}
		clock.Advance(step)
	}
	stopped.Store(true)
	wg.Wait()

	budget := float64(capacity + clockMoves) // capacity plus one request per step
	snap, err := s.Snapshot(ctx, k)
	require.NoError(t, err)
	level := snap.Axes[0].Available
	require.GreaterOrEqual(t, level, -1e-9, "a refusing bucket never goes into debt")
	require.LessOrEqual(t, float64(grants.Load()), budget, "grants past capacity plus refill")
	require.GreaterOrEqual(t, float64(grants.Load()), budget-1, "refill left unused (float rounding may cost one)")
	require.LessOrEqual(t, float64(grants.Load())+level, budget+1e-6,
		"granted %d and %v left: more than %v ever existed", grants.Load(), level, budget)
	require.Positive(t, refusals.Load())
	t.Logf("%d grants, %d refusals, %v left of a budget of %v", grants.Load(), refusals.Load(), level, budget)
	require.InDelta(t, leases, snap.Axes[1].Available, 1e-9, "every lease released")
	require.Zero(t, memory.Tickets(s, k), "every ticket settled or cancelled")
}

// TestExpiredTicketsAreSwept checks that abandoned tickets do not pile up:
// after their expiry, ordinary traffic forgets them.
func TestExpiredTicketsAreSwept(t *testing.T) {
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {
		Limits:   []quota.Limit{quota.PerMinute(quota.Requests, 1<<40).WithBurst(time.Minute)},
		LeaseTTL: time.Minute,
	}})
	require.NoError(t, err)
	clock := quotatest.NewClock(time.Date(2025, time.January, 15, 0, 0, 0, 0, time.UTC))
	s := newStore(t, ps, clock)
	ctx := context.Background()
	reserve := func(ticket string) {
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
	}
	const abandoned = 10000
	for i := range abandoned {
		reserve("abandoned-" + strconv.Itoa(i)) // never settled
	}
	require.Equal(t, abandoned, memory.Tickets(s, k))

	clock.Advance(time.Minute)
	for i := range abandoned / 2 {
		ticket := "live-" + strconv.Itoa(i)
		reserve(ticket)
		require.NoError(t, s.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: quota.Cost{Requests: 1}}))
	}
	require.Zero(t, memory.Tickets(s, k), "abandoned tickets outlived their expiry")
}

// TestConcurrentTenantsNeverExceedTheAccount races goroutines of tenants
// with budgets of their own, of a tenant without one and of untenanted
// calls on one account: together they are never granted more than the
// account's budget, nor any tenant more than its own.
func TestConcurrentTenantsNeverExceedTheAccount(t *testing.T) {
	const (
		account  = 40
		own      = 25 // each of a and b: together more than the account
		workers  = 4  // per tenant
		attempts = 200
	)
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}
	tenant := func(name string) quota.Key {
		tk := k
		tk.Tenant = name
		return tk
	}
	limit := func(n int64) []quota.Limit {
		return []quota.Limit{quota.PerMinute(quota.Requests, n).WithBurst(time.Minute), quota.Concurrent(n)}
	}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		k:           {Limits: limit(account), MaxWait: time.Nanosecond},
		tenant("a"): {Limits: limit(own)},
		tenant("b"): {Limits: limit(own)},
	})
	require.NoError(t, err)
	clock := quotatest.NewClock(time.Date(2025, time.January, 15, 0, 0, 0, 0, time.UTC))
	s := newStore(t, ps, clock)
	ctx := context.Background()

	var mu sync.Mutex
	grants := map[string]int{}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c", ""} {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range attempts {
					ticket := name + "-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
					d, err := s.Reserve(ctx, quota.Reservation{Key: tenant(name), Ticket: ticket, Cost: quota.Cost{Requests: 1}})
					if err != nil {
						t.Error(err)
						return
					}
					if d.Outcome == quota.Granted {
						mu.Lock()
						grants[name]++
						mu.Unlock()
					} else if d.Outcome == quota.Queued {
						t.Errorf("%s queued with MaxWait 1ns: %+v", ticket, d)
					}
				}
			}()
		}
	}
	wg.Wait()
	total := grants["a"] + grants["b"] + grants["c"] + grants[""]
	t.Logf("grants %v", grants)
	require.Equal(t, account, total, "the account's budget, all of it and no more")
	require.LessOrEqual(t, grants["a"], own)
	require.LessOrEqual(t, grants["b"], own)
	snap, err := s.Snapshot(ctx, k)
	require.NoError(t, err)
	require.InDelta(t, 0, snap.Axes[0].Available, 1e-9)
	require.InDelta(t, 0, snap.Axes[1].Available, 1e-9, "every slot of the account leased, never more")
}
