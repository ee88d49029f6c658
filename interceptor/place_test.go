package interceptor_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// stranded calls "Hold" on a task queue no worker polls: its place in line
// is taken, and its activity never starts.
func stranded(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              "nobody-polls-this",
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: time.Hour,
	})
	return workflow.ExecuteActivity(ctx, "Hold", "x").Get(ctx, nil)
}

// With WaitInWorkflow, the place a workflow takes holds no concurrency
// slot before its activity starts, and a workflow terminated after taking
// it gives it back: the place lapses shortly after it matures and its
// charge is refunded.
func TestTerminatedWorkflowGivesItsPlaceBack(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: simModels("unused")})
	key := quota.Key{Provider: "openai", Model: "gpt-stranded"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {
		Limits:   []quota.Limit{quota.Per(quota.Tokens, 1000, time.Hour).WithBurst(time.Hour), quota.Concurrent(1)},
		LeaseTTL: 2 * time.Second,
	}})
	require.NoError(t, err)
	store := redisStore(t, ps)
	ic, err := interceptor.New(interceptor.Options{
		Store:          e.watch(store),
		WaitInWorkflow: true,
		Activities: map[string]interceptor.ChargeFunc{"Hold": func([]any) (quota.Charge, error) {
			return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1, Tokens: 900}}, nil
		}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	w := worker.New(e.client, e.taskQueue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	w.RegisterWorkflow(stranded)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx := context.Background()
	level := func() float64 {
		snap, err := store.Snapshot(ctx, key)
		require.NoError(t, err)
		return snap.Axes[0].Available
	}

	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "stranded", TaskQueue: e.taskQueue}, stranded)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return level() < 200 }, 10*time.Second, 10*time.Millisecond, "the workflow takes its place")

	d, err := store.Reserve(ctx, quota.Reservation{Key: key, Ticket: "probe", Cost: quota.Cost{}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome, "the place holds no concurrency slot before its activity starts: %+v", d)
	require.True(t, d.Lease)
	require.NoError(t, store.Cancel(ctx, key, "probe"))

	require.NoError(t, e.client.TerminateWorkflow(ctx, run.GetID(), "", "gone"))
	require.Eventually(t, func() bool { return level() > 990 }, 15*time.Second, 50*time.Millisecond,
		"the terminated workflow's place is given back (level %.1f)", level())
}
