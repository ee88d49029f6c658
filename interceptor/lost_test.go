package interceptor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// The environment of the worker process TestWorkerLostMidStream… starts
// and kills: TestMain runs lostWorker instead of the tests when
// lostWorkerEnv is set.
const (
	lostWorkerEnv   = "TOLLGATE_TEST_LOST_WORKER"
	lostTemporalEnv = "TOLLGATE_TEST_LOST_WORKER_TEMPORAL"
	lostSimEnv      = "TOLLGATE_TEST_LOST_WORKER_SIM"
	lostQueueEnv    = "TOLLGATE_TEST_LOST_WORKER_QUEUE"
	lostModel       = "claude-lost"
)

// lostWorker runs a worker (Tollgate's interceptor, the activities, the
// workflows) until the process is killed.
func lostWorker() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "lost worker:", err)
		return 1
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv(lostTemporalEnv), Logger: quietLogger()})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	acts, err := activities.New(activities.Config{Anthropic: activities.ProviderConfig{APIKey: apiKey, BaseURL: os.Getenv(lostSimEnv)}})
	if err != nil {
		return fail(err)
	}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{claudeKey(lostModel): generous()})
	if err != nil {
		return fail(err)
	}
	store, err := memory.New(ps, memory.Options{})
	if err != nil {
		return fail(err)
	}
	ic, err := interceptor.New(interceptor.Options{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fail(err)
	}
	w := worker.New(c, os.Getenv(lostQueueEnv), worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	activities.Register(w, acts)
	workflows.Register(w)
	w.RegisterWorkflow(streamWorkflow)
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fail(err)
	}
	return 0
}

// A worker killed (SIGKILL, no goodbye) in the middle of a streaming call:
// the server notices at the HeartbeatTimeout, not after the 30-minute
// StartToCloseTimeout, and retries the call on the other worker of the task
// queue, which counts the lost attempt against the transient budget; the
// workflow completes.
func TestWorkerLostMidStreamRetriesWithinHeartbeatTimeout(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{claudeModel(lostModel)},
		// The first stream stalls after two deltas, so it is surely in the
		// middle when its worker dies; the retry's stream runs through.
		Faults: []llmsim.Fault{{Kind: llmsim.FaultStall, Stall: 10 * time.Minute, AfterChunks: 2, Times: 1}},
	})
	const heartbeat = 4 * time.Second
	startToClose := workflows.LLMActivityOptions().StartToCloseTimeout
	retryInterval := workflows.LLMActivityOptions().RetryPolicy.InitialInterval

	// Worker A, in a process of its own: the only worker when the call is
	// scheduled, so the call runs there.
	var out syncbuf.Buffer
	a := exec.Command(os.Args[0])
	a.Env = append(os.Environ(), lostWorkerEnv+"=1", lostTemporalEnv+"="+server.Address(), lostSimEnv+"="+e.simURL, lostQueueEnv+"="+e.taskQueue)
	a.Stdout, a.Stderr = &out, &out
	require.NoError(t, a.Start())
	t.Cleanup(func() {
		_ = a.Process.Kill()
		_ = a.Wait()
		if t.Failed() {
			t.Logf("worker A's output:\n%s", out.String())
		}
	})

	run := e.runStream("lost", streamed("anthropic", lostModel, 32000), heartbeat)
	var beat time.Time
	require.Eventually(t, func() bool {
		var err error
		beat, err = lastHeartbeat(e, "lost")
		return err == nil && e.sim.Stats(lostModel).Received == 1
	}, time.Minute, 20*time.Millisecond, "worker A streams and heartbeats")

	// Worker B joins the task queue; then A dies without a word.
	b, sl, _ := e.startStreamWorker(interceptor.Options{
		Store: memoryStore(t, map[quota.Key]quota.Policy{claudeKey(lostModel): generous()}),
	}, worker.Options{})
	require.NoError(t, a.Process.Kill())
	killed := time.Now()
	t.Logf("worker A killed %s after the server's last heartbeat from it", killed.Sub(beat).Round(time.Millisecond))

	resp, err := streamResult(t, run)
	require.NoError(t, err, "the workflow completes on worker B")
	require.Equal(t, "end_turn", resp.FinishReason)

	acts := activityRuns(e.history("lost"))
	require.Len(t, acts, 1)
	retry := acts[0]
	require.Equal(t, int32(2), retry.attempt)
	require.Equal(t, enumspb.TIMEOUT_TYPE_HEARTBEAT, lastTimeoutType(t, e, "lost"), "attempt 1 timed out on its heartbeat")
	after := retry.started.Sub(killed)
	t.Logf("attempt 2 started on worker B %s after worker A was killed (heartbeat timeout %s, then the retry interval %s; StartToClose %s)",
		after.Round(time.Millisecond), heartbeat, retryInterval, startToClose)
	// The server times the attempt out a HeartbeatTimeout after the last
	// heartbeat it heard (before the kill), then waits the retry interval;
	// a second of slack covers dispatch on a loaded host.
	require.Less(t, after, heartbeat+retryInterval+time.Second, "retried within the heartbeat timeout")
	require.Less(t, after, startToClose)
	sl.endOf(t, "lost", 2) // attempt 2 ran on worker B

	st := b.Stats()
	require.EqualValues(t, 1, st.LostAttempts, "worker B counted the lost attempt")
	require.EqualValues(t, 1, st.Transient, "against the transient budget")
	require.EqualValues(t, 2, e.sim.Stats(lostModel).Received)
}

// lastTimeoutType returns the timeout type of the failure the activity's
// last attempt started after.
func lastTimeoutType(t *testing.T, e *env, id string) enumspb.TimeoutType {
	t.Helper()
	for _, ev := range e.history(id) {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			return a.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType()
		}
	}
	return enumspb.TIMEOUT_TYPE_UNSPECIFIED
}

// lastHeartbeat returns when the server last heard a heartbeat from the
// workflow's pending activity.
func lastHeartbeat(e *env, id string) (time.Time, error) {
	d, err := e.client.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		return time.Time{}, err
	}
	for _, p := range d.GetPendingActivities() {
		if hb := p.GetLastHeartbeatTime(); hb != nil {
			return hb.AsTime(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s has no pending activity that heartbeated", id)
}

// hangingActivity heartbeats once and then hangs, as a call does whose
// worker froze: the server times each attempt out on its heartbeat.
type hangingActivity struct{ attempts atomic.Int32 }

func (h *hangingActivity) Hang(ctx context.Context, doc string) (string, error) {
	h.attempts.Add(1)
	activity.RecordHeartbeat(ctx, "reading "+doc)
	<-ctx.Done()
	return "", ctx.Err()
}

func hangWorkflow(ctx workflow.Context, doc string) (string, error) {
	ao := workflows.LLMActivityOptions()
	ao.HeartbeatTimeout = time.Second
	ctx = workflow.WithActivityOptions(ctx, ao)
	var out string
	err := workflow.ExecuteActivity(ctx, "Hang", doc).Get(ctx, &out)
	return out, err
}

// Lost attempts spend the transient budget like any transient failure:
// with a budget of 1, the second lost attempt ends the call with
// TransientBudgetExhausted, and the attempt that finds it out never runs.
func TestLostAttemptsExhaustTheTransientBudget(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: simModels("unused")})
	key := quota.Key{Provider: "openai", Model: "gpt-hang"}
	ic, err := interceptor.New(interceptor.Options{
		Store:           memoryStore(t, map[quota.Key]quota.Policy{key: generous()}),
		TransientBudget: 1,
		Activities: map[string]interceptor.ChargeFunc{
			"Hang": func(args []any) (quota.Charge, error) {
				return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1, Tokens: 10}}, nil
			},
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	w := worker.New(e.client, e.taskQueue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}, WorkerStopTimeout: time.Second})
	h := &hangingActivity{}
	w.RegisterActivityWithOptions(h.Hang, activity.RegisterOptions{Name: "Hang"})
	w.RegisterWorkflow(hangWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "hang", TaskQueue: e.taskQueue}, hangWorkflow, "a long document")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run.Get(ctx, nil)
	require.True(t, tollgate.IsType(err, tollgate.TransientBudgetExhausted), "got %v", err)
	require.ErrorContains(t, err, "attempt 2 was lost")
	require.EqualValues(t, 2, h.attempts.Load(), "the third attempt found the budget spent and did not run")
	st := ic.Stats()
	require.EqualValues(t, 2, st.LostAttempts)
	require.EqualValues(t, 2, st.Transient)
}
