package redis_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// phase is a stretch of a mixed run: until the time since the run began,
// the workers that take attempts.
type phase struct {
	until   time.Duration
	workers []worker
}

// mixedRun is what a mixed run saw: its ledger, how long it lasted on
// Redis's clock and how many days (UTC) it touched.
type mixedRun struct {
	*ledger
	elapsed time.Duration
	days    int64
}

// runMixed runs ten callers through phases on srv and, with loseAt
// positive, flushes the server's state that far into the run.
func runMixed(t *testing.T, srv *redistest.Server, phases []phase, loseAt time.Duration) mixedRun {
	t.Helper()
	ctx := context.Background()
	admin := srv.Client()
	before, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	f, l := &fleet{}, newLedger()
	f.set(phases[0].workers)
	start := time.Now()
	deadline := start.Add(phases[len(phases)-1].until)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &caller{id: fmt.Sprintf("c%d", i), rng: rand.New(rand.NewPCG(uint64(i), 22)), fleet: f, l: l}
			for n := 0; time.Now().Before(deadline); n++ {
				c.call(ctx, n, deadline)
			}
		}()
	}
	type event struct {
		at time.Duration
		do func() error
	}
	var events []event
	for i := 1; i < len(phases); i++ {
		ws := phases[i].workers
		events = append(events, event{phases[i-1].until, func() error { f.set(ws); return nil }})
	}
	if loseAt > 0 {
		var all []worker
		for _, p := range phases {
			all = append(all, p.workers...)
		}
		events = append(events, event{loseAt, func() error {
			f.reserves.Lock()
			defer f.reserves.Unlock()
			f.lossStep()
			defer f.lossStep()
			l.lost(all)
			return admin.FlushAll(ctx).Err()
		}})
	}
	slices.SortFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	var lossErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, e := range events {
			time.Sleep(time.Until(start.Add(e.at)))
			if err := e.do(); err != nil {
				lossErr = err
			}
		}
	}()
	wg.Wait()
	require.NoError(t, lossErr)
	after, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	days := int64(after.UTC().Truncate(24*time.Hour).Sub(before.UTC().Truncate(24*time.Hour))/(24*time.Hour)) + 1
	return mixedRun{ledger: l, elapsed: after.Sub(before), days: days}
}

// requireNoOvergrant: no call failed, and what the calls used stays within
// every budget: no more in flight than its concurrency limit, no more
// through a bucket than its burst and its rate over the run, no more in a
// day than its daily limit, and across a loss no more than the charges the
// recovering worker had not seen (a Store recovers a daily window as used
// as it last saw it; see package redis).
func requireNoOvergrant(t *testing.T, r mixedRun) {
	t.Helper()
	require.Empty(t, r.failures, "calls that failed")
	t.Logf("in %s: %v; queued by one release and granted by the other: %v; daily charges a worker had not seen at the loss: %d",
		r.elapsed.Round(time.Millisecond), r.outcomes, r.crossed, r.unseen)
	for b, limits := range mixBudgets {
		for _, lim := range limits {
			used := float64(r.used[b][lim.Axis])
			var bound float64
			switch lim.Axis.Kind() {
			case quota.Leases:
				used, bound = float64(r.peak[b]), float64(lim.Capacity)
			case quota.Bucket:
				bound = float64(lim.Capacity)*lim.BurstTime().Seconds()/lim.Period.Seconds() + lim.Rate()*r.elapsed.Seconds()
			case quota.DailyWindow:
				bound = float64(lim.Capacity*r.days + int64(r.unseen))
			}
			t.Logf("%-7s %-16s used %5.0f of at most %7.1f", b, lim.Axis, used, bound)
			require.LessOrEqual(t, used, bound, "%s: %s over its limit", b, lim.Axis)
		}
	}
}

// requireUsable: once what the run left has lapsed, every worker of ws is
// granted a fresh call on every key with room, and the daily key is
// either granted or refused for its daily limit; the state holds nothing
// the current release could not read.
func requireUsable(t *testing.T, ws []worker) {
	t.Helper()
	time.Sleep(mixLapse)
	ctx := context.Background()
	for _, w := range ws {
		for _, k := range mixKeys {
			ticket := "fresh-" + w.name + "-" + k.String()
			d, err := w.store.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: quota.Cost{Requests: 1, Tokens: 100}})
			require.NoError(t, err, "%s on %s", w.name, k)
			if k == mixDaily && d.Outcome == quota.Refused {
				require.Equal(t, quota.DailyLimit, d.Reason, "%s on %s: %+v", w.name, k, d)
				continue
			}
			require.Equal(t, quota.Granted, d.Outcome, "%s on %s: %+v", w.name, k, d)
			require.NoError(t, w.store.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: quota.Cost{Requests: 1, Tokens: 100}}),
				"%s on %s", w.name, k)
			snap, err := w.store.Snapshot(ctx, k)
			require.NoError(t, err, "%s on %s", w.name, k)
			if !w.old { // the previous release counted none
				require.Zero(t, snap.Unreadable, "%s on %s: records dropped as unreadable", w.name, k)
			}
		}
	}
}

// TestUpgradeRolling: workers of the previous release, then both releases
// side by side on one Redis (a rolling upgrade), then the current one
// alone. Calls retry on whichever worker comes, so tickets, places, queue
// and line members, leases and daily windows written by either release
// are read by the other. The state is lost (FLUSHALL) while both run. No
// call fails and no budget is overdrawn, and both releases are granted
// fresh calls afterwards.
func TestUpgradeRolling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about five seconds")
	}
	srv := redistest.StartServer(t)
	ps := mixPolicies(t)
	old, cur := workers(t, srv, ps, true, 2), workers(t, srv, ps, false, 2)
	r := runMixed(t, srv, []phase{
		{800 * time.Millisecond, old},
		{2800 * time.Millisecond, append(append([]worker{}, old...), cur...)},
		{3600 * time.Millisecond, cur},
	}, 1800*time.Millisecond)
	requireNoOvergrant(t, r)
	require.Positive(t, r.crossed["old→new"], "tickets the previous release queued are granted by the current one")
	require.Positive(t, r.crossed["new→old"], "and the other way round")
	requireUsable(t, []worker{old[0], cur[0]})
}

// TestUpgradeRollback: workers of the current release fill the state
// (queue and line members, places, leases, a spent daily window), then
// workers of the previous release alone take every call (a rollback),
// among them the retries of tickets the current release queued and the
// places it left to lapse. No call fails and no budget is overdrawn, and
// both releases are granted fresh calls afterwards.
func TestUpgradeRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about four seconds")
	}
	srv := redistest.StartServer(t)
	ps := mixPolicies(t)
	old, cur := workers(t, srv, ps, true, 2), workers(t, srv, ps, false, 2)
	r := runMixed(t, srv, []phase{
		{1200 * time.Millisecond, cur},
		{3000 * time.Millisecond, old},
	}, 0)
	requireNoOvergrant(t, r)
	require.Positive(t, r.crossed["new→old"], "tickets the current release queued are granted by the previous one")
	requireUsable(t, []worker{old[0], cur[0]})
}
