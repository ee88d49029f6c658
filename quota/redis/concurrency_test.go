package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestReplicasNeverOverdraw is the store's central claim, shown the way a
// fleet uses it: several Store instances, each with its own connection pool
// as separate workers would have, hammer one real Redis on the real clock
// (Redis TIME). Every axis's granted total must stay within what the bucket
// can have produced, capacity + rate × elapsed, and come close to it (a
// store that refused too much would fail too). The concurrency limit must
// never be exceeded.
func TestReplicasNeverOverdraw(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about two seconds")
	}
	const (
		replicas   = 3
		workers    = 8 // per replica
		concurrent = 10
		runFor     = 1500 * time.Millisecond
	)
	// One call costs the same fraction of every axis, so every axis binds at
	// once and each is driven to its limit.
	cost := quota.Cost{Requests: 1, Tokens: 100, InputTokens: 70, OutputTokens: 30}
	limits := []quota.Limit{
		quota.Per(quota.Requests, 40, 200*time.Millisecond).WithBurst(200 * time.Millisecond), // 200/s
		quota.Per(quota.Tokens, 4000, 200*time.Millisecond).WithBurst(200 * time.Millisecond),
		quota.Per(quota.InputTokens, 2800, 200*time.Millisecond).WithBurst(200 * time.Millisecond),
		quota.Per(quota.OutputTokens, 1200, 200*time.Millisecond).WithBurst(200 * time.Millisecond),
		quota.Concurrent(concurrent),
	}
	// Calls hold their lease for holdFor: about one is in flight at the
	// bucket's pace, while the opening burst (24 workers, a bucket of 40)
	// reaches the concurrency limit. The limit stays far above the pace
	// even on a loaded host, so it never keeps the buckets from their rate. The lease TTL
	// is far longer than a hold, so no lease expires under its holder.
	const holdFor = 5 * time.Millisecond
	ps := policies(t, quota.Policy{Limits: limits, MaxWait: 20 * time.Millisecond, LeaseTTL: time.Second})
	srv := redistest.StartServer(t)
	if srv.Backend() == redistest.Mini {
		t.Log("no redis-server on PATH: running against miniredis, which is not Redis")
	}

	stores := storesOn(t, srv, ps, replicas)
	ctx := context.Background()
	admin := srv.Client()
	before, err := admin.Time(ctx).Result()
	require.NoError(t, err)

	var (
		granted  [quota.SpendPerMonth + 1]atomic.Int64 // by axis: units granted
		inFlight atomic.Int64
		peak     atomic.Int64
		calls    atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, replicas*workers)
	)
	deadline := time.Now().Add(runFor)
	for r, s := range stores {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- hammer(ctx, s, fmt.Sprintf("r%d-w%d", r, w), cost, deadline, func() {
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					for _, a := range quota.Axes() {
						granted[a].Add(cost.On(a))
					}
					calls.Add(1)
					time.Sleep(holdFor)
					inFlight.Add(-1)
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
	t.Logf("%d grants in %s across %d replicas × %d workers; peak in flight %d", calls.Load(), elapsed, replicas, workers, peak.Load())

	require.LessOrEqual(t, peak.Load(), int64(concurrent), "concurrent calls never exceed the lease limit")
	for _, l := range limits {
		if l.Axis.Kind() != quota.Bucket {
			continue
		}
		bound := float64(l.Capacity) + l.Rate()*elapsed.Seconds()
		got := float64(granted[l.Axis].Load())
		t.Logf("%-13s granted %7.0f of at most %9.1f (%.1f%%)", l.Axis, got, bound, 100*got/bound)
		require.LessOrEqual(t, got, bound, "%s: granted more than the bucket produced", l.Axis)
		// Tickets still queued at the deadline (at most MaxWait of refill)
		// and the last workers' sleeps keep grants a little under the bound.
		require.GreaterOrEqual(t, got, 0.8*bound, "%s: granted far less than the bucket produced", l.Axis)
	}
}

// hammer reserves calls under fresh tickets until deadline, calling run for
// each grant before settling it. A queued ticket is retried after its wait;
// one still queued at the deadline is cancelled, giving its place back.
func hammer(ctx context.Context, s *redis.Store, id string, cost quota.Cost, deadline time.Time, run func()) error {
	key := quota.Key{Provider: "openai", Model: "gpt-4o"}
	for n := 0; time.Now().Before(deadline); n++ {
		ticket := fmt.Sprintf("%s-%d", id, n)
		for {
			d, err := s.Reserve(ctx, quota.Reservation{Key: key, Ticket: ticket, Cost: cost})
			if err != nil {
				return err
			}
			if d.Outcome == quota.Granted {
				run()
				if err := s.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Actual: cost}); err != nil {
					return err
				}
				break
			}
			if d.Outcome == quota.Refused {
				time.Sleep(d.Wait / 4)
				break
			}
			wait := d.Wait
			if d.Reason == quota.ConcurrencyFull {
				wait = min(wait, time.Millisecond) // a slot frees within a hold
			}
			if time.Now().Add(wait).After(deadline) {
				if err := s.Cancel(ctx, key, ticket); err != nil {
					return err
				}
				break
			}
			time.Sleep(wait)
		}
	}
	return nil
}
