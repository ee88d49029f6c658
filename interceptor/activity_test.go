package interceptor_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/fallback"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// unit is one activity-side test: the SDK's test activity environment with
// Tollgate's interceptor over a memory store on a fake clock, and real
// activities talking to llmsim.
type unit struct {
	t     *testing.T
	env   *testsuite.TestActivityEnvironment
	ic    *interceptor.WorkerInterceptor
	store quota.Store
	clock *quotatest.Clock
	sim   *llmsim.Sim
	acts  *activities.Activities

	mu         sync.Mutex
	heartbeats [][]any
}

func newUnit(t *testing.T, policies map[quota.Key]quota.Policy, opts interceptor.Options) *unit {
	t.Helper()
	u := &unit{t: t, clock: quotatest.NewClock(time.Now())}
	if c, ok := opts.Clock.(*quotatest.Clock); ok { // the test's own, shared with its store
		u.clock = c
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	if opts.Store == nil {
		opts.Store, err = memory.New(ps, memory.Options{Clock: u.clock})
		require.NoError(t, err)
	}
	u.store = opts.Store
	opts.Clock = u.clock
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	u.ic, err = interceptor.New(opts)
	require.NoError(t, err)

	u.sim, err = llmsim.New(llmsim.Config{Models: simModels("gpt-u", "gpt-backup")})
	require.NoError(t, err)
	srv := httptest.NewServer(u.sim)
	t.Cleanup(srv.Close)
	u.acts, err = activities.New(activities.Config{OpenAI: activities.ProviderConfig{APIKey: apiKey, BaseURL: srv.URL + "/v1/"}})
	require.NoError(t, err)

	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(quietLogger())
	u.env = ts.NewTestActivityEnvironment()
	u.env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{u.ic}})
	activities.Register(u.env, u.acts)
	u.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		u.mu.Lock()
		defer u.mu.Unlock()
		var raws [4]converter.RawValue
		_ = details.Get(&raws[0], &raws[1], &raws[2], &raws[3])
		var got []any
		for _, r := range raws {
			if r.Payload() != nil {
				var v any
				_ = converter.GetDefaultDataConverter().FromPayload(r.Payload(), &v)
				got = append(got, v)
			}
		}
		u.heartbeats = append(u.heartbeats, got)
	})
	return u
}

func (u *unit) complete(req activities.Request) (activities.Response, error) {
	u.t.Helper()
	val, err := u.env.ExecuteActivity(activities.CompleteActivity, req)
	if err != nil {
		return activities.Response{}, err
	}
	var resp activities.Response
	require.NoError(u.t, val.Get(&resp))
	return resp, nil
}

func request(model string) activities.Request {
	return activities.Request{Provider: "openai", Model: model, MaxOutputTokens: 100,
		Messages: []activities.Message{{Role: activities.RoleUser, Content: "Summarise the quarterly report."}}}
}

// appError returns err as the *temporal.ApplicationError the server sees.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr
}

// budgetDetail is the heartbeat detail Tollgate keeps its budgets in, as the
// previous attempt would have left it.
func budgetDetail(rateLimited, transient int) map[string]any {
	return map[string]any{"tollgate_budget": "v1", "rate_limited": rateLimited, "transient": transient}
}

func TestGrantedCallSettlesActualUsage(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{
		quota.PerMinute(quota.Tokens, 10_000).WithBurst(time.Minute), quota.PerMinute(quota.OutputTokens, 10_000).WithBurst(time.Minute),
	}}}, interceptor.Options{})
	resp, err := u.complete(request("gpt-u"))
	require.NoError(t, err)
	require.Equal(t, "gpt-u", resp.Model)
	require.Positive(t, resp.Usage.OutputTokens)

	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	// OpenAI's tokens-per-minute keeps the up-front estimate, max(100
	// max tokens, prompt/4); the output axis, estimated at 0, is charged
	// what the answer used.
	require.InDelta(t, float64(10_000-100), snap.Axes[0].Available, 1e-6)
	require.InDelta(t, float64(10_000-resp.Usage.OutputTokens), snap.Axes[1].Available, 1e-6)
	require.EqualValues(t, 1, u.ic.Stats().Admitted)
}

func TestQueuedCallEndsAttemptWithTheWait(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.Per(quota.Requests, 1, 10*time.Second).WithBurst(10 * time.Second)}}}, interceptor.Options{})
	_, err := u.complete(request("gpt-u"))
	require.NoError(t, err)

	_, err = u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.QuotaRefused, appErr.Type())
	require.False(t, appErr.NonRetryable())
	// Due nine tenths of PaceWithin before the place matures: the next
	// attempt, back even a little late, waits the rest out in process, to
	// the moment.
	require.Equal(t, 10*time.Second-interceptor.DefaultPaceWithin*9/10, appErr.NextRetryDelay())
	require.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category())
	require.EqualValues(t, 1, u.sim.Stats("gpt-u").Received, "the refused attempt never reached the provider")
	require.EqualValues(t, 1, u.ic.Stats().Queued)
}

func TestCallsThatCanNeverRunFailAtOnce(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerMinute(quota.Tokens, 50).WithBurst(time.Minute)}}}, interceptor.Options{})

	_, err := u.complete(request("gpt-u")) // max 100 output tokens > 50 tokens/min
	appErr := appError(t, err)
	require.Equal(t, tollgate.CostExceedsCapacity, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.ErrorContains(t, err, "can never fit")

	bad := request("gpt-u")
	bad.MaxOutputTokens = 0
	appErr = appError(t, func() error { _, err := u.complete(bad); return err }())
	require.Equal(t, tollgate.InvalidRequest, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Zero(t, u.sim.Stats("").Received)
}

func TestKeyWithoutPolicyRunsUngoverned(t *testing.T) {
	var logs syncbuf.Buffer
	u := newUnit(t, map[quota.Key]quota.Policy{}, interceptor.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		_, err := u.complete(request("gpt-u"))
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, u.ic.Stats().Ungoverned)
	require.Equal(t, 1, strings.Count(logs.String(), "no policy for this key"), "said once per key, not per call:\n%s", logs.String())
	require.Contains(t, logs.String(), "key=openai/default/gpt-u")
}

// An overloaded provider (503/529) is treated as a rate limit: the key is
// paused for every replica and the attempt retried after the hint.
func TestOverloadRetriesLikeARateLimit(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: generous()}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload, Model: "gpt-u", Times: 1, RetryAfter: 3 * time.Second}))
	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.RateLimited, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Equal(t, 3*time.Second, appErr.NextRetryDelay())
	require.ErrorContains(t, err, "overloaded")
	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, quota.PauseOverloaded, snap.PauseReason)
	require.Equal(t, u.clock.Now().Add(3*time.Second), snap.PausedUntil)
}

// A key closed by a daily quota fails the call at once, without asking the
// provider, with the daily-quota type.
func TestClosedDailyQuotaFailsWithoutACall(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: generous()}, interceptor.Options{})
	require.NoError(t, u.store.Pause(context.Background(), key, time.Hour, quota.PauseDailyQuota))
	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.DailyQuotaExhausted, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Zero(t, u.sim.Stats("gpt-u").Received)
}

// What the provider reports in its headers reaches the store with the
// settlement: a level is lowered to what the provider says remains.
func TestProviderHeadersLowerTheStoresLevels(t *testing.T) {
	key := openaiKey("gpt-u")
	// The policy believes in far more than llmsim's 10,000 requests a minute.
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1_000_000).WithBurst(time.Minute)}}}, interceptor.Options{})
	_, err := u.complete(request("gpt-u"))
	require.NoError(t, err)
	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.InDelta(t, 9_999, snap.Axes[0].Available, 1e-6, "x-ratelimit-remaining-requests after one call")
}

// A concurrency lease is released whatever the call's outcome: a provider
// failure, or a panic in the activity.
func TestLeaseIsReleasedAfterAFailureOrAPanic(t *testing.T) {
	key := openaiKey("gpt-u")
	policy := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1000).WithBurst(time.Minute), quota.Concurrent(1)}}
	leases := func(u *unit) float64 {
		snap, err := u.store.Snapshot(context.Background(), key)
		require.NoError(t, err)
		return snap.Axes[len(snap.Axes)-1].Available
	}

	u := newUnit(t, map[quota.Key]quota.Policy{key: policy}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultServerError, Model: "gpt-u", Times: 1}))
	_, err := u.complete(request("gpt-u"))
	require.Equal(t, tollgate.Transient, appError(t, err).Type())
	require.InDelta(t, 1, leases(u), 1e-9, "released after a provider failure")

	const boom = "Boom"
	u = newUnit(t, map[quota.Key]quota.Policy{key: policy}, interceptor.Options{Activities: map[string]interceptor.ChargeFunc{
		boom: func([]any) (quota.Charge, error) {
			return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1}}, nil
		},
	}})
	u.env.RegisterActivityWithOptions(func(context.Context, string) (string, error) { panic("boom") }, activity.RegisterOptions{Name: boom})
	_, err = u.env.ExecuteActivity(boom, "x")
	var panicErr *temporal.PanicError
	require.ErrorAs(t, err, &panicErr, "the panic still reaches the SDK")
	require.InDelta(t, 1, leases(u), 1e-9, "released after a panic")
	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.InDelta(t, 999, snap.Axes[0].Available, 1e-6, "settled at its estimate")
}

func TestProviderRateLimitRetriesAfterTheHintAndPausesTheKey(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: generous()}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "gpt-u", Times: 1, RetryAfter: 7 * time.Second}))

	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.RateLimited, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Equal(t, 7*time.Second, appErr.NextRetryDelay())

	// Every replica's next call on the key waits out the pause.
	d, err := u.store.Reserve(context.Background(), quota.Reservation{Key: key, Ticket: "other", Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
	require.Equal(t, quota.Refused, d.Outcome)
	require.Equal(t, quota.Paused, d.Reason)
	require.Equal(t, 7*time.Second, d.Wait)

	// The spent budget travels in the heartbeat for the next attempt.
	require.NotEmpty(t, u.heartbeats)
	last := u.heartbeats[len(u.heartbeats)-1]
	require.Equal(t, map[string]any{"tollgate_budget": "v1", "rate_limited": float64(1), "transient": float64(0)}, last[len(last)-1])
}

func TestRateLimitWithoutHintWaitsTheDefault(t *testing.T) {
	u := newUnit(t, map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous()}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "gpt-u", Times: 1}))
	_, err := u.complete(request("gpt-u"))
	require.Equal(t, interceptor.DefaultRateLimitWait, appError(t, err).NextRetryDelay())
}

func TestFourthRateLimitEscalatesWhenABackupExists(t *testing.T) {
	policies := map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous(), openaiKey("gpt-backup"): generous()}
	for _, tc := range []struct {
		name      string
		fallbacks map[string][]string
		wantType  string
	}{
		{"with a backup", map[string][]string{"openai/gpt-u": {"openai/gpt-backup"}}, tollgate.RateLimitEscalation},
		{"without a backup", nil, tollgate.RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, policies, interceptor.Options{Fallbacks: tc.fallbacks})
			require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "gpt-u", RetryAfter: time.Second}))
			u.env.SetHeartbeatDetails(budgetDetail(3, 0)) // three rate limits already
			_, err := u.complete(request("gpt-u"))
			appErr := appError(t, err)
			require.Equal(t, tc.wantType, appErr.Type())
			if tc.wantType != tollgate.RateLimitEscalation {
				require.False(t, appErr.NonRetryable())
				return
			}
			require.True(t, appErr.NonRetryable())
			esc, ok := tollgate.Escalation(err)
			require.True(t, ok)
			require.Equal(t, tollgate.EscalationDetails{From: "openai/gpt-u", Backups: []string{"openai/gpt-backup"}, Reason: "rate_limited", RateLimited: 4}, esc)
		})
	}
}

func TestSpendCapClosesTheKeyUntilItsReset(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: generous()}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultSpendCap, Model: "gpt-u"}))

	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.SpendCapReached, appErr.Type())
	require.True(t, appErr.NonRetryable())

	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, u.clock.Now().Add(interceptor.DefaultSpendCapPause), snap.PausedUntil, "insufficient_quota gives no reset time: the default pause")
	require.Equal(t, quota.PauseSpendCap, snap.PauseReason)

	// The next call fails the same way without reaching the provider.
	_, err = u.complete(request("gpt-u"))
	require.Equal(t, tollgate.SpendCapReached, appError(t, err).Type())
	require.EqualValues(t, 1, u.sim.Stats("gpt-u").Received)
}

func TestTransientFailuresBackOffWithinTheirBudget(t *testing.T) {
	u := newUnit(t, map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous()}, interceptor.Options{BackoffBase: 400 * time.Millisecond})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultServerError, Model: "gpt-u"}))

	u.env.SetHeartbeatDetails(budgetDetail(2, 1)) // the second transient failure
	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.Transient, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Less(t, appErr.NextRetryDelay(), 800*time.Millisecond, "full jitter below base·2")
	delays := map[time.Duration]bool{appErr.NextRetryDelay(): true}
	for range 7 {
		u.env.SetHeartbeatDetails(budgetDetail(2, 1))
		_, err := u.complete(request("gpt-u"))
		d := appError(t, err).NextRetryDelay()
		require.Positive(t, d)
		require.Less(t, d, 800*time.Millisecond, "full jitter below base·2")
		delays[d] = true
	}
	require.Greater(t, len(delays), 1, "full jitter varies the delay")
	last := u.heartbeats[len(u.heartbeats)-1]
	require.Equal(t, budgetDetail(2, 2)["transient"], int(last[len(last)-1].(map[string]any)["transient"].(float64)),
		"the rate-limit count is kept, the transient count goes up")

	u.env.SetHeartbeatDetails(budgetDetail(0, interceptor.DefaultTransientBudget))
	_, err = u.complete(request("gpt-u"))
	appErr = appError(t, err)
	require.Equal(t, tollgate.TransientBudgetExhausted, appErr.Type())
	require.True(t, appErr.NonRetryable())
}

func TestProviderRejectionIsNotRetried(t *testing.T) {
	u := newUnit(t, map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous()}, interceptor.Options{})
	require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultUnauthorized, Model: "gpt-u"}))
	_, err := u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.ProviderRejected, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.ErrorContains(t, err, "auth")
	require.NotContains(t, err.Error(), apiKey)
}

func TestUnreachableStoreRetriesLater(t *testing.T) {
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous()})
	require.NoError(t, err)
	dead := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	store, err := redis.New(dead, ps, redis.Options{})
	require.NoError(t, err)

	u := newUnit(t, nil, interceptor.Options{Store: store})
	_, err = u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.StoreUnavailable, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Equal(t, interceptor.DefaultStoreRetry, appErr.NextRetryDelay())
	require.Zero(t, u.sim.Stats("").Received)
}

func TestFallbackStepRunsOnItsTarget(t *testing.T) {
	u := newUnit(t, map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous(), openaiKey("gpt-backup"): generous()}, interceptor.Options{})
	p, err := converter.GetDefaultDataConverter().ToPayload(fallback.Step{Target: "openai/gpt-backup", Step: 1, Steps: 1})
	require.NoError(t, err)
	u.env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{"tollgate-fallback": p}})

	resp, err := u.complete(request("gpt-u"))
	require.NoError(t, err)
	require.Equal(t, "gpt-backup", resp.Model)
	require.Zero(t, u.sim.Stats("gpt-u").Received)
}

func echo(ctx context.Context, s string) (string, error) { return "echo " + s, nil }

func TestUngovernedActivitiesPassThrough(t *testing.T) {
	u := newUnit(t, nil, interceptor.Options{})
	u.env.RegisterActivity(echo)
	val, err := u.env.ExecuteActivity(echo, "hi")
	require.NoError(t, err)
	var out string
	require.NoError(t, val.Get(&out))
	require.Equal(t, "echo hi", out)
	require.Equal(t, interceptor.Stats{}, u.ic.Stats())
}

func TestWaitPastTheDeadlineEscalatesOrFails(t *testing.T) {
	hourly := quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 1, time.Hour).WithBurst(time.Hour)}}
	policies := map[quota.Key]quota.Policy{openaiKey("gpt-u"): hourly, openaiKey("gpt-backup"): generous()}
	for _, tc := range []struct {
		name      string
		fallbacks map[string][]string
		wantType  string
	}{
		{"with a backup", map[string][]string{"openai/gpt-u": {"openai/gpt-backup"}}, tollgate.RateLimitEscalation},
		{"without a backup", nil, tollgate.QuotaWaitExceedsDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, policies, interceptor.Options{Fallbacks: tc.fallbacks})
			_, err := u.complete(request("gpt-u"))
			require.NoError(t, err)

			// The next place matures in an hour, past the test
			// environment's 10-minute ScheduleToClose.
			_, err = u.complete(request("gpt-u"))
			appErr := appError(t, err)
			require.Equal(t, tc.wantType, appErr.Type())
			require.True(t, appErr.NonRetryable())
			if esc, ok := tollgate.Escalation(err); ok {
				require.Equal(t, "deadline", esc.Reason)
				require.Equal(t, []string{"openai/gpt-backup"}, esc.Backups)
			} else {
				require.ErrorContains(t, err, "requests")
				require.ErrorContains(t, err, "ScheduleToClose")
			}
			// The place in line was given back.
			snap, err := u.store.Snapshot(context.Background(), openaiKey("gpt-u"))
			require.NoError(t, err)
			require.InDelta(t, 0, snap.Axes[0].Available, 1e-9)
		})
	}
}
