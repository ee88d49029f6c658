package quotatest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// Factory builds the Store under test over ps, reading time from clock. It
// may use t for cleanup (t.Cleanup) and to fail setup (require). Each call
// must return a store whose keys start full.
type Factory func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store

// Tolerances the suite allows.
const (
	// LevelDelta is the float error allowed on a level.
	LevelDelta = 1e-6
	// TimeDelta is the error allowed on a wait or a time, for stores whose
	// clock has microsecond resolution.
	TimeDelta = time.Millisecond
)

// start is the time every subtest's Clock starts at unless the subtest says
// otherwise: 18:00 UTC (10:00 in Los Angeles) on a day with no DST change, six
// hours before the next UTC midnight.
func start() time.Time { return time.Date(2025, time.January, 15, 18, 0, 0, 0, time.UTC) }

// Run runs the whole conformance suite against the stores newStore builds, one
// named subtest per behaviour.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	s := suite{newStore: newStore, run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	for _, c := range []struct {
		name string
		test func(t *testing.T, s suite)
	}{
		{"refill", testRefill},
		{"clock_step_back", testClockStepBack},
		{"all_or_nothing", testAllOrNothing},
		{"queue_order", testQueueOrder},
		{"idempotent_ticket", testIdempotentTicket},
		{"settle", testSettle},
		{"cancel", testCancel},
		{"settle_across_midnight", testSettleAcrossMidnight},
		{"queued_across_midnight", testQueuedAcrossMidnight},
		{"pause", testPause},
		{"observe", testObserve},
		{"settle_observe", testSettleObserve},
		{"observe_adopt", testObserveAdopt},
		{"daily_reset", testDailyReset},
		{"priority_reserve", testPriorityReserve},
		{"headroom", testHeadroom},
		{"max_wait", testMaxWait},
		{"concurrency_lease", testConcurrencyLease},
		{"renew", testRenew},
		{"settle_expired", testSettleExpired},
		{"place", testPlace},
		{"lapse", testLapse},
		{"ticket_expiry", testTicketExpiry},
		{"oversize", testOversize},
		{"invalid_input", testInvalidInput},
		{"no_policy", testNoPolicy},
		{"unknown_ticket", testUnknownTicket},
		{"snapshot", testSnapshot},
		{"calibration", testCalibration},
		{"nested_budgets", testNestedBudgets},
		{"nested_oversize", testNestedOversize},
		{"nested_pause", testNestedPause},
		{"nested_settle", testNestedSettle},
		{"nested_concurrency", testNestedConcurrency},
		{"nested_signals", testNestedSignals},
		{"fair_share", testFairShare},
		{"fair_weights", testFairWeights},
		{"fair_single_tenant", testFairSingleTenant},
		{"burst", testBurst},
		{"start_after_slot", testStartAfterSlot},
		{"late_start", testLateStart},
		{"margin", testMargin},
		{"axis_margin", testAxisMargin},
		{"burst_learning", testBurstLearning},
		{"pool_spread", testPoolSpread},
		{"pool_skip", testPoolSkip},
		{"pool_release", testPoolRelease},
		{"pool_oversize", testPoolOversize},
		{"pool_concurrent", testPoolConcurrent},
		{"shared_limit", testSharedLimit},
		{"shared_limit_concurrent", testSharedLimitConcurrent},
		{"spend_budget", testSpendBudget},
		{"spend_concurrent", testSpendConcurrent},
		{"spend_reset", testSpendReset},
		{"spend_nested", testSpendNested},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, s) })
	}
}

// suite carries what every subtest needs: the factory and a token that makes
// this Run's key names unique.
type suite struct {
	newStore Factory
	run      string
}

// key returns a key unique to this Run and name.
func (s suite) key(name string) quota.Key {
	return quota.Key{Provider: "quotatest", Account: "run-" + s.run, Model: name}
}

// env is one subtest's store, clock and key.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	store quota.Store
	key   quota.Key
}

// setup builds a store holding one policy, under a key named name, on a clock
// reading start().
func (s suite) setup(t *testing.T, name string, p quota.Policy) *env {
	t.Helper()
	return s.setupAt(t, name, p, start())
}

// setupAt is setup with the clock reading start.
func (s suite) setupAt(t *testing.T, name string, p quota.Policy, start time.Time) *env {
	t.Helper()
	k := s.key(name)
	return s.setupKeys(t, k, map[quota.Key]quota.Policy{k: p}, start)
}

// setupKeys builds a store over policies, with k as the env's key.
func (s suite) setupKeys(t *testing.T, k quota.Key, policies map[quota.Key]quota.Policy, start time.Time) *env {
	t.Helper()
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	clock := NewClock(start)
	store := s.newStore(t, ps, clock)
	require.NotNil(t, store, "the factory returned no store")
	return &env{t: t, ctx: context.Background(), clock: clock, store: store, key: k}
}

func (e *env) reserve(ticket string, cost quota.Cost) quota.Decision {
	e.t.Helper()
	return e.reserveAs(ticket, cost, quota.Normal)
}

func (e *env) reserveAs(ticket string, cost quota.Cost, priority quota.Priority) quota.Decision {
	e.t.Helper()
	d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: cost, Priority: priority})
	require.NoError(e.t, err, "Reserve(%s)", ticket)
	return d
}

// expect reserves and requires the decision want.
func (e *env) expect(want quota.Decision, ticket string, cost quota.Cost) {
	e.t.Helper()
	requireDecision(e.t, want, e.reserve(ticket, cost), ticket)
}

// expectAs is expect with a priority.
func (e *env) expectAs(want quota.Decision, ticket string, cost quota.Cost, priority quota.Priority) {
	e.t.Helper()
	requireDecision(e.t, want, e.reserveAs(ticket, cost, priority), ticket)
}

func (e *env) settle(ticket string, actual quota.Cost) {
	e.t.Helper()
	require.NoError(e.t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: actual}), "Settle(%s)", ticket)
}

func (e *env) cancel(ticket string) {
	e.t.Helper()
	require.NoError(e.t, e.store.Cancel(e.ctx, e.key, ticket), "Cancel(%s)", ticket)
}

func (e *env) pause(d time.Duration, reason quota.PauseReason) {
	e.t.Helper()
	require.NoError(e.t, e.store.Pause(e.ctx, e.key, d, reason))
}

func (e *env) observe(obs ...quota.Observation) {
	e.t.Helper()
	require.NoError(e.t, e.store.Observe(e.ctx, e.key, obs))
}

func (e *env) snapshot() quota.Snapshot {
	e.t.Helper()
	s, err := e.store.Snapshot(e.ctx, e.key)
	require.NoError(e.t, err)
	return s
}

// axis returns the snapshot's level of axis, failing if it is not reported.
func (e *env) axis(a quota.Axis) quota.AxisLevel {
	e.t.Helper()
	for _, l := range e.snapshot().Axes {
		if l.Axis == a {
			return l
		}
	}
	require.Failf(e.t, "axis missing from snapshot", "%s", a)
	return quota.AxisLevel{}
}

// levels requires the snapshot's Available on each axis given.
func (e *env) levels(want map[quota.Axis]float64) {
	e.t.Helper()
	snap := e.snapshot()
	for a, v := range want {
		found := false
		for _, l := range snap.Axes {
			if l.Axis == a {
				found = true
				require.InDelta(e.t, v, l.Available, LevelDelta, "available %s", a)
			}
		}
		require.True(e.t, found, "axis %s missing from snapshot", a)
	}
}

func (e *env) level(a quota.Axis, want float64) {
	e.t.Helper()
	e.levels(map[quota.Axis]float64{a: want})
}

// requireDecision requires got to be want, with waits and lease expiries
// within TimeDelta.
func requireDecision(t *testing.T, want, got quota.Decision, ticket string) {
	t.Helper()
	require.Equal(t, want.Outcome, got.Outcome, "%s: outcome of %+v", ticket, got)
	require.Equal(t, want.Reason, got.Reason, "%s: reason of %+v", ticket, got)
	require.Equal(t, want.Axis, got.Axis, "%s: axis of %+v", ticket, got)
	require.Equal(t, want.PauseReason, got.PauseReason, "%s: pause reason of %+v", ticket, got)
	if want.Budget != (quota.Key{}) {
		require.Equal(t, want.Budget, got.Budget, "%s: spent budget of %+v", ticket, got)
	}
	requireDuration(t, want.Wait, got.Wait, "%s: wait", ticket)
	require.Equal(t, want.Lease, got.Lease, "%s: lease of %+v", ticket, got)
	requireTime(t, want.LeaseExpiry, got.LeaseExpiry, "%s: lease expiry", ticket)
}

func requireDuration(t *testing.T, want, got time.Duration, msg string, args ...any) {
	t.Helper()
	require.InDelta(t, float64(want), float64(got), float64(TimeDelta), append([]any{msg + ": want %s, got %s"}, append(args, want, got)...)...)
}

func requireTime(t *testing.T, want, got time.Time, msg string, args ...any) {
	t.Helper()
	if want.IsZero() || got.IsZero() {
		require.True(t, want.IsZero() && got.IsZero(), append([]any{msg + ": want %s, got %s"}, append(args, want, got)...)...)
		return
	}
	requireDuration(t, 0, got.Sub(want), msg+" (got - want)", args...)
}

// Decisions the subtests expect, built with as little noise as possible.

var granted = quota.Decision{Outcome: quota.Granted}

func leased(expiry time.Time) quota.Decision {
	return quota.Decision{Outcome: quota.Granted, Lease: true, LeaseExpiry: expiry}
}

func queued(wait time.Duration, axis quota.Axis) quota.Decision {
	return quota.Decision{Outcome: quota.Queued, Wait: wait, Reason: quota.Capacity, Axis: axis}
}

func refused(wait time.Duration, reason quota.Reason, axis quota.Axis) quota.Decision {
	return quota.Decision{Outcome: quota.Refused, Wait: wait, Reason: reason, Axis: axis}
}

func paused(o quota.Outcome, wait time.Duration, why quota.PauseReason) quota.Decision {
	return quota.Decision{Outcome: o, Wait: wait, Reason: quota.Paused, PauseReason: why}
}

func concurrencyFull(wait time.Duration) quota.Decision {
	return quota.Decision{Outcome: quota.Queued, Wait: wait, Reason: quota.ConcurrencyFull, Axis: quota.Concurrency}
}

// Short names for costs.

func reqs(n int64) quota.Cost   { return quota.Cost{Requests: n} }
func tokens(n int64) quota.Cost { return quota.Cost{Tokens: n} }

const (
	rq  = quota.Requests
	tk  = quota.Tokens
	rpd = quota.RequestsPerDay
	tpd = quota.TokensPerDay
	cc  = quota.Concurrency
)
