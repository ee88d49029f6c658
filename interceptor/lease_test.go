package interceptor_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// usage is the result of the test activities below: what the call cost, as
// a provider's usage block would say.
type usage struct{ Tokens int64 }

// QuotaUsage implements quota.Metered.
func (u usage) QuotaUsage() quota.Cost { return quota.Cost{Requests: 1, Tokens: u.Tokens} }

// holder is a governed activity that holds its call for a while, heartbeating,
// and counts how many of its calls run at once.
type holder struct {
	hold      time.Duration
	now, peak atomic.Int32
}

func (h *holder) Hold(ctx context.Context, name string) (usage, error) {
	n := h.now.Add(1)
	defer h.now.Add(-1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	end := time.Now().Add(h.hold)
	for time.Now().Before(end) {
		activity.RecordHeartbeat(ctx, name)
		select {
		case <-ctx.Done():
			return usage{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return usage{Tokens: 700}, nil
}

// holdTwice runs two Hold calls at once and waits for both.
func holdTwice(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		HeartbeatTimeout:       5 * time.Second,
	})
	a := workflow.ExecuteActivity(ctx, "Hold", "a")
	b := workflow.ExecuteActivity(ctx, "Hold", "b")
	if err := a.Get(ctx, nil); err != nil {
		return err
	}
	return b.Get(ctx, nil)
}

// A call that runs three times its key's LeaseTTL keeps its concurrency
// slot the whole time: the interceptor renews the lease while the call
// runs, so Concurrent(1) never has two calls in flight, and the call's
// Settle finds its grant and charges what it used.
func TestLeaseOutlivesItsTTLWhileTheCallRuns(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: simModels("unused")})
	key := quota.Key{Provider: "openai", Model: "gpt-holder"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {
		Limits:   []quota.Limit{quota.Concurrent(1), quota.Per(quota.Tokens, 100_000, 24*time.Hour).WithBurst(24 * time.Hour)},
		LeaseTTL: time.Second,
	}})
	require.NoError(t, err)
	store, err := redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	var logs syncbuf.Buffer
	ic, err := interceptor.New(interceptor.Options{
		Store: e.watch(store),
		Activities: map[string]interceptor.ChargeFunc{"Hold": func([]any) (quota.Charge, error) {
			return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1, Tokens: 1000}}, nil
		}},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	h := &holder{hold: 3 * time.Second}
	w := worker.New(e.client, e.taskQueue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	w.RegisterActivityWithOptions(h.Hold, activity.RegisterOptions{Name: "Hold"})
	w.RegisterWorkflow(holdTwice)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "hold-twice", TaskQueue: e.taskQueue}, holdTwice)
	require.NoError(t, err)
	ctx, cancel := e.waitCtx(time.Minute)
	defer cancel()
	require.NoError(t, waited(ctx, run.Get(ctx, nil)))

	require.EqualValues(t, 1, h.peak.Load(), "Concurrent(1) had two calls in flight: a lease lapsed while its call ran")
	require.EqualValues(t, 2, ic.Stats().Admitted)
	require.NotContains(t, logs.String(), "expired", "each call settled the grant it held")
	snap, err := store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, quota.Tokens, snap.Axes[0].Axis)
	require.InDelta(t, 100_000-2*700, snap.Axes[0].Available, 50, "both calls are settled at what they used (plus a few seconds' refill)")
	require.Equal(t, quota.Concurrency, snap.Axes[1].Axis)
	require.InDelta(t, 1, snap.Axes[1].Available, 1e-9, "both leases are released")
}

// A call whose grant expired while it ran (a long call on a store that
// could not be reached to renew it) still pays what it used: Settle charges
// the actual cost beyond the estimate even though the ticket is gone.
func TestSettleOfAnExpiredTicketStillCharges(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{
		quota.PerDay(quota.Tokens, 100_000, nil), quota.Concurrent(2),
	}}}, interceptor.Options{Activities: map[string]interceptor.ChargeFunc{
		"Long": func([]any) (quota.Charge, error) {
			return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1, Tokens: 1000}}, nil
		},
	}})
	u.clock.Set(time.Date(2025, time.January, 15, 9, 0, 0, 0, time.UTC))
	u.env.RegisterActivityWithOptions(func(ctx context.Context, _ string) (usage, error) {
		u.clock.Advance(time.Hour) // past the lease's TTL, renewed or not
		return usage{Tokens: 5000}, nil
	}, activity.RegisterOptions{Name: "Long"})

	_, err := u.env.ExecuteActivity("Long", "x")
	require.NoError(t, err)
	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.InDelta(t, 100_000-5000, snap.Axes[0].Available, 1e-9, "the day is charged what the call used, not the estimate")
	require.InDelta(t, 2, snap.Axes[1].Available, 1e-9)
}

// A later attempt that finds its ticket granted (an earlier attempt was
// granted and crashed before settling) honours a pause set since: it waits
// the pause out instead of calling the provider.
func TestReusedGrantWaitsOutAPause(t *testing.T) {
	key := openaiKey("gpt-u")
	u := newUnit(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerDay(quota.Requests, 100, nil), quota.Concurrent(1)}}}, interceptor.Options{})
	u.clock.Set(time.Date(2025, time.January, 15, 9, 0, 0, 0, time.UTC))
	const ticket = "an-earlier-attempt"
	p, err := converter.GetDefaultDataConverter().ToPayload(ticket)
	require.NoError(t, err)
	u.env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{"tollgate-ticket": p}})

	ctx := context.Background()
	d, err := u.store.Reserve(ctx, quota.Reservation{Key: key, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome, "the earlier attempt was granted")
	require.NoError(t, u.store.Pause(ctx, key, 30*time.Second, quota.PauseRateLimited))

	_, err = u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.QuotaRefused, appErr.Type())
	require.Equal(t, 30*time.Second+interceptor.DefaultRetryMargin, appErr.NextRetryDelay())
	require.Zero(t, u.sim.Stats("gpt-u").Received, "the paused key's provider was not called")

	u.clock.Advance(30 * time.Second)
	_, err = u.complete(request("gpt-u"))
	require.NoError(t, err, "after the pause the call runs on its place")
	snap, err := u.store.Snapshot(ctx, key)
	require.NoError(t, err)
	require.InDelta(t, 99, snap.Axes[0].Available, 1e-6, "charged once, across both attempts")
	require.InDelta(t, 1, snap.Axes[1].Available, 1e-9, "and its lease released")
}
