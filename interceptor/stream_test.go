package interceptor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// streamWorkflow runs one call under workflows.LLMActivityOptions with its
// HeartbeatTimeout set to heartbeat: a few seconds instead of the default
// 30, so that the tests take seconds.
func streamWorkflow(ctx workflow.Context, req activities.Request, heartbeat time.Duration) (activities.Response, error) {
	ao := workflows.LLMActivityOptions()
	ao.HeartbeatTimeout = heartbeat
	ctx = workflow.WithActivityOptions(ctx, ao)
	var resp activities.Response
	err := workflow.ExecuteActivity(ctx, activities.CompleteActivity, req).Get(ctx, &resp)
	return resp, err
}

// startStreamWorker is startStoppableWorker with streamWorkflow registered
// and the given worker options.
func (e *env) startStreamWorker(opts interceptor.Options, wo worker.Options) (*interceptor.WorkerInterceptor, *slots, func()) {
	e.t.Helper()
	return e.startWorkerWith(opts, workerSetup{options: wo, workflows: []any{streamWorkflow}})
}

// runStream starts streamWorkflow with id.
func (e *env) runStream(id string, req activities.Request, heartbeat time.Duration) client.WorkflowRun {
	e.t.Helper()
	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.taskQueue, WorkflowExecutionTimeout: 2 * time.Minute,
	}, streamWorkflow, req, heartbeat)
	require.NoError(e.t, err)
	e.endWithTest(run)
	return run
}

func streamResult(t *testing.T, run client.WorkflowRun) (activities.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var resp activities.Response
	err := run.Get(ctx, &resp)
	return resp, err
}

func claudeModel(name string) llmsim.Model {
	return llmsim.Model{Provider: llmsim.Anthropic, Name: name, RequestsPerMinute: 10_000,
		InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000}
}

func claudeKey(model string) quota.Key { return quota.Key{Provider: "anthropic", Model: model} }

func streamed(provider, model string, maxTokens int64) activities.Request {
	return activities.Request{Provider: provider, Model: model, Stream: true, MaxOutputTokens: maxTokens,
		Messages: []activities.Message{{Role: activities.RoleUser, Content: "Write a long story about a lighthouse keeper."}}}
}

// settlements is a quota.Store that records every Settle.
type settlements struct {
	quota.Store
	mu  sync.Mutex
	got []quota.Settlement
}

func (s *settlements) Settle(ctx context.Context, st quota.Settlement) error {
	s.mu.Lock()
	s.got = append(s.got, st)
	s.mu.Unlock()
	return s.Store.Settle(ctx, st)
}

func (s *settlements) all() []quota.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// A streamed call is settled at the usage in the stream's final chunk
// (Anthropic's message_delta, OpenAI's usage chunk), not at its estimate.
func TestStreamFinalUsageIsSettled(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: append(simModels("gpt-stream"), claudeModel("claude-stream"))})
	store := &settlements{Store: memoryStore(t, map[quota.Key]quota.Policy{
		openaiKey("gpt-stream"): generous(), claudeKey("claude-stream"): generous(),
	})}
	e.startStreamWorker(interceptor.Options{Store: store}, worker.Options{})

	for i, req := range []activities.Request{streamed("anthropic", "claude-stream", 4000), streamed("openai", "gpt-stream", 4000)} {
		resp, err := streamResult(t, e.runStream("settle-"+req.Provider, req, 10*time.Second))
		require.NoError(t, err)
		got := store.all()
		require.Len(t, got, i+1)
		s := got[i]
		charge, err := req.QuotaCharge()
		require.NoError(t, err)
		t.Logf("%s: estimated %+v, settled %+v", req.Provider, charge.Cost, s.Actual)
		require.Equal(t, resp.QuotaUsage(), s.Actual)
		require.Equal(t, resp.Usage.OutputTokens, s.Actual.OutputTokens)
		require.Less(t, s.Actual.OutputTokens, req.MaxOutputTokens, "the answer's tokens, not max_tokens")
		require.NotEmpty(t, s.Observed, "with the limits the stream's headers reported")
	}
}

// A stream that stalls for longer than its HeartbeatTimeout is cut and
// retried, and the retry is counted against the transient budget.
func TestStreamStallIsRetriedWithinTheTransientBudget(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{claudeModel("claude-stall")},
		Faults: []llmsim.Fault{{Kind: llmsim.FaultStall, Stall: 10 * time.Minute, AfterChunks: 2, Times: 1}},
	})
	ic, _, _ := e.startStreamWorker(interceptor.Options{
		Store: memoryStore(t, map[quota.Key]quota.Policy{claudeKey("claude-stall"): generous()}), BackoffBase: 200 * time.Millisecond,
	}, worker.Options{})

	const heartbeat = 5 * time.Second
	start := time.Now()
	resp, err := streamResult(t, e.runStream("stall", streamed("anthropic", "claude-stall", 500), heartbeat))
	require.NoError(t, err)
	require.Equal(t, "end_turn", resp.FinishReason)
	t.Logf("the workflow completed %s after it started (heartbeat timeout %s, stall 10m)", time.Since(start).Round(time.Millisecond), heartbeat)

	acts := activityRuns(e.history("stall"))
	require.Len(t, acts, 1)
	require.Equal(t, int32(2), acts[0].attempt, "one retry")
	st := ic.Stats()
	require.EqualValues(t, 1, st.Transient, "counted against the transient budget")
	require.EqualValues(t, 2, e.sim.Stats("claude-stall").Received)
	// The worker's own watchdog cuts the stream at the HeartbeatTimeout of
	// silence; its pulse keeps the server from timing it out first unless
	// the host stalls for a second or more, in which case the next attempt
	// counts it as lost: counted once, either way.
	switch st.LostAttempts {
	case 0:
		require.Equal(t, tollgate.Transient, acts[0].lastFailure)
	default:
		t.Logf("the server timed the attempt out before the watchdog cut it (a loaded host)")
		require.EqualValues(t, 1, st.LostAttempts)
	}
}

// An overloaded_error event in the middle of a stream retries like a 529:
// after the hint, pausing the key. The event carries no Retry-After (the
// stream's headers went out with its 200), so the hint is the
// interceptor's RateLimitWait; a 529 answered to a stream request
// before it began carries its own.
func TestStreamOverloadMidStreamRetriesAfterTheHint(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{claudeModel("claude-mid"), claudeModel("claude-before")},
		Faults: []llmsim.Fault{
			{Kind: llmsim.FaultOverload, Model: "claude-mid", MidStream: true, AfterChunks: 3, Times: 1},
			{Kind: llmsim.FaultOverload, Model: "claude-before", RetryAfter: 2 * time.Second, Times: 1},
		},
	})
	const hint = 1500 * time.Millisecond
	ic, sl, _ := e.startStreamWorker(interceptor.Options{
		Store: memoryStore(t, map[quota.Key]quota.Policy{
			claudeKey("claude-mid"): generous(), claudeKey("claude-before"): generous(),
		}),
		RateLimitWait: hint,
	}, worker.Options{})

	for _, tc := range []struct {
		model string
		asked time.Duration
	}{{"claude-mid", hint}, {"claude-before", 2 * time.Second}} {
		id := "overload-" + tc.model
		_, err := streamResult(t, e.runStream(id, streamed("anthropic", tc.model, 500), 10*time.Second))
		require.NoError(t, err)
		acts := activityRuns(e.history(id))
		require.Len(t, acts, 1)
		r := acts[0]
		require.Equal(t, int32(2), r.attempt)
		require.Equal(t, tollgate.RateLimited, r.lastFailure)
		require.Equal(t, tc.asked, r.lastRetryDelay)
		took := r.started.Sub(sl.endOf(t, id, 1))
		t.Logf("%s: retried %s after the failed attempt returned; %s was asked for", tc.model, took, tc.asked)
		require.GreaterOrEqual(t, took, tc.asked-50*time.Millisecond, "not before the hint")
	}
	require.EqualValues(t, 2, ic.Stats().ProviderRateLimited)
	require.Zero(t, ic.Stats().Transient, "an overload is not a transient failure")
}

// A spend-cap error inside a stream closes the key, like its HTTP twin: the
// call fails for good and the next call on the key never reaches the
// provider.
func TestStreamSpendCapMidStreamClosesTheKey(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{claudeModel("claude-capped")},
		Faults: []llmsim.Fault{{Kind: llmsim.FaultSpendCap, MidStream: true, AfterChunks: 1}},
	})
	ic, _, _ := e.startStreamWorker(interceptor.Options{
		Store: memoryStore(t, map[quota.Key]quota.Policy{claudeKey("claude-capped"): generous()}),
	}, worker.Options{})

	for _, id := range []string{"capped-stream-1", "capped-stream-2"} {
		_, err := streamResult(t, e.runStream(id, streamed("anthropic", "claude-capped", 500), 10*time.Second))
		require.True(t, tollgate.IsType(err, tollgate.SpendCapReached), "%s: got %v", id, err)
	}
	require.EqualValues(t, 1, e.sim.Stats("claude-capped").Received, "the key closed after the first stream")
	require.EqualValues(t, 1, ic.Stats().SpendCapped)
}

// A stream whose workflow is cancelled stops, and its lease and reservation
// are released: the concurrency slot is free and the output tokens reserved
// for it are refunded down to what it had used.
func TestStreamCanceledByTheWorkflowReleasesItsLease(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{claudeModel("claude-cancel")},
		Faults: []llmsim.Fault{{Kind: llmsim.FaultStall, Stall: 10 * time.Minute, AfterChunks: 2, Times: 1}},
	})
	key := claudeKey("claude-cancel")
	store := &settlements{Store: memoryStore(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{
		quota.PerMinute(quota.Requests, 1000).WithBurst(time.Minute), quota.Per(quota.OutputTokens, 100_000, time.Hour).WithBurst(time.Hour), quota.Concurrent(1),
	}}})}
	// The SDK learns of a cancellation from a heartbeat's answer; a short
	// throttle sends the pulse's next heartbeat at once.
	e.startStreamWorker(interceptor.Options{Store: store}, worker.Options{MaxHeartbeatThrottleInterval: 200 * time.Millisecond})
	level := func(axis quota.Axis) float64 {
		snap, err := store.Snapshot(context.Background(), key)
		require.NoError(t, err)
		for _, l := range snap.Axes {
			if l.Axis == axis {
				return l.Available
			}
		}
		t.Fatalf("no axis %s", axis)
		return 0
	}

	run := e.runStream("cancel-stream", streamed("anthropic", "claude-cancel", 50_000), 8*time.Second)
	require.Eventually(t, func() bool { return level(quota.Concurrency) < 0.5 }, 30*time.Second, 20*time.Millisecond, "the stream holds the lease")
	require.Less(t, level(quota.OutputTokens), 51_000.0, "and its max_tokens")
	require.Eventually(t, func() bool { return e.sim.Stats("claude-cancel").Received == 1 }, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, e.client.CancelWorkflow(context.Background(), "cancel-stream", ""))
	_, err := streamResult(t, run)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled)
	require.Eventually(t, func() bool { return len(store.all()) == 1 }, 30*time.Second, 20*time.Millisecond, "the stream is settled")
	s := store.all()[0]
	t.Logf("settled %+v", s.Actual)
	require.EqualValues(t, 1, s.Actual.Requests)
	require.EqualValues(t, 8, s.Actual.OutputTokens, "two deltas of 16 characters, not the 50,000 reserved")
	require.InDelta(t, 1, level(quota.Concurrency), 1e-9, "the lease is released")
	require.Greater(t, level(quota.OutputTokens), 99_000.0, "the reservation is refunded")
}

// An OpenAI stream that breaks off is settled with its prompt as charged,
// calibrated: OpenAI counted the prompt when it accepted the call and sends
// its count only in the final chunk, so the estimate the stream error
// carries (characters/4, uncalibrated) would refund what OpenAI counted.
func TestStreamBrokenOffKeepsTheCalibratedPromptCharge(t *testing.T) {
	const warm = 3 // streamed calls that teach the ratio before the break
	m := simModels("gpt-dense")[0]
	m.Density = 2 // the provider counts twice characters/4
	e := newEnv(t, llmsim.Config{
		Models: []llmsim.Model{m},
		Faults: []llmsim.Fault{{Kind: llmsim.FaultDisconnect, Model: "gpt-dense", After: warm, Times: 1, AfterChunks: 2}},
	})
	store := &settlements{Store: memoryStore(t, map[quota.Key]quota.Policy{openaiKey("gpt-dense"): generous()})}
	e.startStreamWorker(interceptor.Options{Store: store, BackoffBase: 200 * time.Millisecond}, worker.Options{})

	req := streamed("openai", "gpt-dense", 400)
	for i := range warm + 1 {
		_, err := streamResult(t, e.runStream(fmt.Sprintf("dense-%d", i), req, 10*time.Second))
		require.NoError(t, err, "call %d (the last one retried after the break)", i)
	}
	got := store.all()
	require.Len(t, got, warm+2, "the broken attempt settled too")
	broken := got[warm]
	require.False(t, broken.Counted, "a broken stream's usage is no count to calibrate from")
	estimate := activities.EstimateOpenAI(req.Characters(), req.MaxOutputTokens).Tokens
	t.Logf("uncalibrated estimate %d tokens; broken attempt charged %+v, settled %+v", estimate, broken.Charged, broken.Actual)
	require.Greater(t, broken.Charged.Tokens, estimate, "the warm calls taught the ratio, so the charge is above the raw estimate")
	require.Equal(t, broken.Charged.Tokens, broken.Actual.Tokens, "the prompt stays charged as calibrated, with max_tokens as OpenAI counts them")
	require.EqualValues(t, 1, broken.Actual.Requests)
}
