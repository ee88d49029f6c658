package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
	"github.com/tollgate/tollgate/workflows"
)

// generous is a policy that never binds in these tests.
func generous() quota.Policy {
	return quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10_000).WithBurst(time.Minute), quota.PerMinute(quota.Tokens, 10_000_000).WithBurst(time.Minute)}}
}

func memoryStore(t *testing.T, policies map[quota.Key]quota.Policy) quota.Store {
	t.Helper()
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	s, err := memory.New(ps, memory.Options{})
	require.NoError(t, err)
	return s
}

func openaiKey(model string) quota.Key { return quota.Key{Provider: "openai", Model: model} }

func agent(model string) workflows.AgentInput {
	return workflows.AgentInput{Provider: "openai", Model: model, Task: "Plan a trip to Lisbon.", MaxOutputTokens: 64}
}

func simModels(names ...string) []llmsim.Model {
	var ms []llmsim.Model
	for _, n := range names {
		ms = append(ms, llmsim.Model{Provider: llmsim.OpenAI, Name: n, RequestsPerMinute: 10_000, TokensPerMinute: 10_000_000})
	}
	return ms
}

// A provider 429 with retry-after: 2 is retried by the server 2 s later.
// Three calls, on three models, each answered 429 once.
func TestProviderRetryAfterIsTheServersRetryDelay(t *testing.T) {
	const n = 3
	models := make([]string, n)
	policies := map[quota.Key]quota.Policy{}
	var faults []llmsim.Fault
	for i := range models {
		models[i] = fmt.Sprintf("gpt-a%d", i)
		policies[openaiKey(models[i])] = generous()
		faults = append(faults, llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: models[i], Times: 1, RetryAfter: 2 * time.Second})
	}
	e := newEnv(t, llmsim.Config{Models: simModels(models...), Faults: faults})
	ic, sl := e.startWorker(interceptor.Options{Store: memoryStore(t, policies)})

	runs := make([]client.WorkflowRun, n)
	for i, m := range models {
		runs[i] = e.start("retry-after-"+m, agent(m))
	}
	var samples []retrySample
	for i, m := range models {
		out, err := e.result(runs[i])
		require.NoError(t, err)
		require.Equal(t, m, out.Turns[0].Model)
		id := "retry-after-" + m
		acts := activityRuns(e.history(id))
		require.Len(t, acts, 1)
		r := acts[0]
		require.Equal(t, int32(2), r.attempt)
		require.Equal(t, tollgate.RateLimited, r.lastFailure)
		require.Equal(t, 2*time.Second, r.lastRetryDelay)
		samples = append(samples, retrySample{id: id, asked: r.lastRetryDelay, took: r.started.Sub(sl.endOf(t, id, 1))})
		require.EqualValues(t, 2, e.sim.Stats(m).Received)
	}
	requireRetriedAfter(t, samples)
	require.EqualValues(t, n, ic.Stats().ProviderRateLimited)
}

// retrySample is one retried call: the delay its failed attempt asked for
// and the time from that attempt's return to the server starting the next.
type retrySample struct {
	id          string
	asked, took time.Duration
}

// requireRetriedAfter requires that the server started each retry no
// earlier than asked (less the embedded server's timer precision), and
// within 500 ms after it: the median of the samples, so that one retry
// dispatched late on a loaded host does not decide. A retry timed by the
// retry policy instead (1 s, then doubling) misses that window by a second
// or more; a quiet host starts them within about 50 ms, a host running
// every package's tests at once within about 300.
func requireRetriedAfter(t *testing.T, samples []retrySample) {
	t.Helper()
	late := make([]time.Duration, len(samples))
	for i, s := range samples {
		t.Logf("%s: the retry started %s after the failed attempt returned; %s was asked for", s.id, s.took, s.asked)
		require.GreaterOrEqual(t, s.took, s.asked-devserver.TimerPrecision,
			"%s: the retry started %s after the failed attempt, before the %s asked for", s.id, s.took, s.asked)
		late[i] = s.took - s.asked
	}
	slices.Sort(late)
	require.LessOrEqual(t, late[len(late)/2], 500*time.Millisecond, "median lateness of the retries (each: %v)", late)
}

// A call the bucket cannot take now is retried by the server exactly when
// its reserved place matures, and is then admitted at once. Three keys of
// one request per 2 s, two calls each: the second call on each key waits.
func TestQuotaRefusalIsTheServersRetryDelay(t *testing.T) {
	const keys = 3
	e := newEnv(t, llmsim.Config{Models: simModels("gpt-b0", "gpt-b1", "gpt-b2")})
	policies := map[quota.Key]quota.Policy{}
	for i := range keys {
		policies[openaiKey(fmt.Sprintf("gpt-b%d", i))] = quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 1, 2*time.Second).WithBurst(2 * time.Second)}}
	}
	ic, sl := e.startWorker(interceptor.Options{Store: memoryStore(t, policies)})

	var ids []string
	var runs []client.WorkflowRun
	for i := range keys {
		for j := range 2 {
			id := fmt.Sprintf("refusal-%d-%d", i, j)
			ids = append(ids, id)
			runs = append(runs, e.start(id, agent(fmt.Sprintf("gpt-b%d", i))))
		}
	}
	for _, run := range runs {
		_, err := e.result(run)
		require.NoError(t, err)
	}

	var samples []retrySample
	for _, id := range ids {
		r := activityRuns(e.history(id))[0]
		if r.attempt == 1 {
			continue
		}
		require.Equal(t, int32(2), r.attempt, "%s: a call waits once", id)
		require.Equal(t, tollgate.QuotaRefused, r.lastFailure)
		require.Greater(t, r.lastRetryDelay, time.Second)
		require.LessOrEqual(t, r.lastRetryDelay, 2*time.Second+interceptor.DefaultRetryMargin)
		samples = append(samples, retrySample{id: id, asked: r.lastRetryDelay, took: r.started.Sub(sl.endOf(t, id, 1))})
	}
	require.Len(t, samples, keys, "one call per key waited")
	requireRetriedAfter(t, samples)
	st := ic.Stats()
	require.EqualValues(t, 2*keys, st.Admitted)
	require.EqualValues(t, keys, st.Queued)
	for i := range keys {
		require.Zero(t, e.sim.Stats(fmt.Sprintf("gpt-b%d", i)).TooManyRequests)
	}
}

// Four 429s from the primary escalate; a FallbackWorkflow child answers on
// the backup model and the workflow completes with its answer.
func TestEscalationFallsBackToTheBackupModel(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: append(simModels("gpt-primary"), llmsim.Model{Provider: llmsim.Anthropic, Name: "claude-backup", RequestsPerMinute: 10_000, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000}),
		Faults: []llmsim.Fault{{Kind: llmsim.FaultRateLimit, Model: "gpt-primary", Times: 0, RetryAfter: time.Second}},
	})
	reader := sdkmetric.NewManualReader()
	ic, _ := e.startWorker(interceptor.Options{
		Store: memoryStore(t, map[quota.Key]quota.Policy{
			openaiKey("gpt-primary"):                        generous(),
			{Provider: "anthropic", Model: "claude-backup"}: generous(),
		}),
		Fallbacks: map[string][]string{"openai/gpt-primary": {"anthropic/claude-backup"}},
		Meter:     sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"),
	})

	out, err := e.result(e.start("escalate", agent("gpt-primary")))
	require.NoError(t, err)
	require.Equal(t, "claude-backup", out.Turns[0].Model)
	require.Equal(t, []string{tollgate.FallbackWorkflowName}, childWorkflowTypes(e.history("escalate")))
	require.EqualValues(t, 4, e.sim.Stats("gpt-primary").TooManyRequests)
	require.EqualValues(t, 1, e.sim.Stats("claude-backup").Accepted)
	st := ic.Stats()
	require.EqualValues(t, 1, st.Escalations)
	require.EqualValues(t, 1, st.Fallbacks)
	require.EqualValues(t, 1, counterSum(t, reader, interceptor.MetricEscalations))
	require.EqualValues(t, 1, counterSum(t, reader, interceptor.MetricFallbacks))

	child := activityRuns(e.history("escalate/fallback/5"))
	require.Len(t, child, 1)
	require.Equal(t, int32(1), child[0].attempt)
}

// When every model of the chain is rate limited, the workflow fails with an
// error naming each one.
func TestFallbackChainExhaustedNamesEveryModel(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: simModels("gpt-x", "gpt-y"),
		Faults: []llmsim.Fault{{Kind: llmsim.FaultRateLimit, Times: 0, RetryAfter: time.Second}},
	})
	e.startWorker(interceptor.Options{
		Store:         memoryStore(t, map[quota.Key]quota.Policy{openaiKey("gpt-x"): generous(), openaiKey("gpt-y"): generous()}),
		Fallbacks:     map[string][]string{"openai/gpt-x": {"openai/gpt-y"}},
		EscalateAfter: 1,
	})
	_, err := e.result(e.start("exhausted", agent("gpt-x")))
	require.Error(t, err)
	require.True(t, tollgate.IsType(err, tollgate.FallbackChainExhausted), "got %v", err)
	require.ErrorContains(t, err, "tried openai/gpt-x, openai/gpt-y")
}

// A spend cap fails the call non-retryably after exactly one provider call.
func TestSpendCapFailsAfterOneCall(t *testing.T) {
	e := newEnv(t, llmsim.Config{
		Models: simModels("gpt-capped"),
		Faults: []llmsim.Fault{{Kind: llmsim.FaultSpendCap, Model: "gpt-capped", Times: 0}},
	})
	// Two workers, each with its own Store on one Redis, one after the
	// other: the key worker A closes stays closed for worker B.
	srv := redistest.StartServer(t)
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-capped"): generous()})
	require.NoError(t, err)
	worker := func() (*interceptor.WorkerInterceptor, func()) {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		store, err := redis.New(rdb, ps, redis.Options{})
		require.NoError(t, err)
		ic, _, stop := e.startStoppableWorker(interceptor.Options{Store: store})
		return ic, stop
	}
	capped := func(id string) {
		t.Helper()
		_, err := e.result(e.start(id, agent("gpt-capped")))
		require.True(t, tollgate.IsType(err, tollgate.SpendCapReached), "%s: got %v", id, err)
	}

	a, stopA := worker()
	capped("capped-a")
	require.EqualValues(t, 1, a.Stats().SpendCapped)
	stopA()

	b, _ := worker()
	for i := range 3 {
		capped(fmt.Sprintf("capped-b-%d", i))
	}
	require.EqualValues(t, 1, e.sim.Stats("gpt-capped").Received, "the key is closed fleet-wide after the first answer")
	require.Zero(t, b.Stats().SpendCapped, "worker B never asked the provider")
}

// progressActivity is a user's own LLM activity that keeps progress in its
// heartbeat details: its first attempt records "page-3" and is rate limited;
// the second must still read "page-3".
type progressActivity struct{ attempts atomic.Int32 }

func (p *progressActivity) Read(ctx context.Context, doc string) (string, error) {
	if p.attempts.Add(1) == 1 {
		activity.RecordHeartbeat(ctx, "page-3")
		return "", errors.New("provider said 429 Too Many Requests: rate limit reached")
	}
	if !activity.HasHeartbeatDetails(ctx) {
		return "", temporal.NewNonRetryableApplicationError("no heartbeat details", "test", nil)
	}
	var page string
	if err := activity.GetHeartbeatDetails(ctx, &page); err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), "test", nil)
	}
	return "resumed from " + page, nil
}

func readWorkflow(ctx workflow.Context, doc string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflows.LLMActivityOptions())
	var out string
	err := workflow.ExecuteActivity(ctx, "Read", doc).Get(ctx, &out)
	return out, err
}

// A user activity governed by name keeps its own heartbeat details across
// a rate-limited attempt: Tollgate's budget rides beside them.
func TestOwnHeartbeatDetailsSurviveTheBudget(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: simModels("unused")})
	key := quota.Key{Provider: "openai", Model: "gpt-reader"}
	ic, err := interceptor.New(interceptor.Options{
		Store:         memoryStore(t, map[quota.Key]quota.Policy{key: generous()}),
		RateLimitWait: 200 * time.Millisecond,
		Activities: map[string]interceptor.ChargeFunc{
			"Read": func(args []any) (quota.Charge, error) {
				return quota.Charge{Key: key, Cost: quota.Cost{Requests: 1, Tokens: int64(len(args[0].(string)))}}, nil
			},
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	w := worker.New(e.client, e.taskQueue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	p := &progressActivity{}
	w.RegisterActivityWithOptions(p.Read, activity.RegisterOptions{Name: "Read"})
	w.RegisterWorkflow(readWorkflow)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "reader", TaskQueue: e.taskQueue}, readWorkflow, "a long document")
	require.NoError(t, err)
	var out string
	ctx, cancel := e.waitCtx(2 * time.Minute)
	defer cancel()
	require.NoError(t, waited(ctx, run.Get(ctx, &out)))
	require.Equal(t, "resumed from page-3", out)
	require.EqualValues(t, 2, p.attempts.Load())
	st := ic.Stats()
	require.EqualValues(t, 1, st.ProviderRateLimited)
	require.EqualValues(t, 2, st.Admitted)
}

// counterSum collects reader and returns the sum of the Int64 counter name
// over its attributes.
func counterSum(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is a %T", name, m.Data)
			var total int64
			for _, dp := range sum.DataPoints {
				total += dp.Value
			}
			return total
		}
	}
	return 0
}

// With WaitInWorkflow, a workflow canceled while it waits for its place
// gives the place back: the budget it held is free again.
func TestCanceledWaitGivesItsPlaceBack(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: simModels("gpt-cancel")})
	key := openaiKey("gpt-cancel")
	store := memoryStore(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.Per(quota.Requests, 1, time.Minute).WithBurst(time.Minute)}}})
	ic, _ := e.startWorker(interceptor.Options{Store: store, WaitInWorkflow: true})

	_, err := e.result(e.start("cancel-first", agent("gpt-cancel")))
	require.NoError(t, err)
	waiting := e.start("cancel-second", agent("gpt-cancel"))
	require.Eventually(t, func() bool { return ic.Stats().WaitedInWorkflow == 1 }, 10*time.Second, 10*time.Millisecond)
	level := func() float64 {
		snap, err := store.Snapshot(context.Background(), key)
		require.NoError(t, err)
		return snap.Axes[0].Available
	}
	require.Less(t, level(), -0.5, "the waiting call holds a place: the bucket owes it a request")

	require.NoError(t, e.client.CancelWorkflow(context.Background(), "cancel-second", ""))
	_, err = e.result(waiting)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled)
	require.Eventually(t, func() bool { return level() > -0.5 }, 10*time.Second, 10*time.Millisecond,
		"the place is given back when the workflow is canceled")
	require.Zero(t, e.sim.Stats("gpt-cancel").Received-1, "only the first call reached the provider")
}
