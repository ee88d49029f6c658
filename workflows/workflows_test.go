package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/fallback"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/workflows"
)

// fakeModels stands in for the provider: each model answers or fails as
// the test says, and every call is recorded by the model it reached (after
// Tollgate applied the fallback step's target).
type fakeModels struct {
	mu     sync.Mutex
	calls  []string
	answer map[string]error // nil: answer
}

func (f *fakeModels) Complete(ctx context.Context, req activities.Request) (activities.Response, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.Model)
	f.mu.Unlock()
	if err := f.answer[req.Model]; err != nil {
		return activities.Response{}, err
	}
	return activities.Response{Text: "answer from " + req.Model, Provider: req.Provider, Model: req.Model}, nil
}

func newEnv(t *testing.T, f *fakeModels) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var policies = map[quota.Key]quota.Policy{}
	for _, m := range []string{"m0", "m1", "m2"} {
		policies[quota.Key{Provider: "openai", Model: m}] = quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1000)}}
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	store, err := memory.New(ps, memory.Options{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)

	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	workflows.Register(env)
	env.RegisterActivityWithOptions(f.Complete, activity.RegisterOptions{Name: activities.CompleteActivity})
	return env
}

func escalation(from string, backups ...string) error {
	return temporal.NewApplicationErrorWithOptions("rate limited 4 times", tollgate.RateLimitEscalation,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{tollgate.EscalationDetails{From: from, Backups: backups, Reason: "rate_limited", RateLimited: 4}}})
}

func agentInput(model string) workflows.AgentInput {
	return workflows.AgentInput{Provider: "openai", Model: model, Task: "Plan a trip.", Turns: 2, MaxOutputTokens: 64}
}

// An escalated turn is answered by the backup in a FallbackWorkflow child,
// and the loop goes on with the primary for the next turn.
func TestAgentTurnFallsBackAndTheLoopGoesOn(t *testing.T) {
	f := &fakeModels{answer: map[string]error{"m0": escalation("openai/m0", "openai/m1")}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.AgentWorkflow, agentInput("m0"))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out workflows.AgentResult
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Len(t, out.Turns, 2)
	require.Equal(t, "m1", out.Turns[0].Model)
	require.Equal(t, "answer from m1", out.Answer)
	require.Equal(t, []string{"m0", "m1", "m0", "m1"}, f.calls)
}

func TestFallbackWorkflowMovesPastCappedModels(t *testing.T) {
	f := &fakeModels{answer: map[string]error{
		"m1": temporal.NewNonRetryableApplicationError("capped", tollgate.SpendCapReached, nil),
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(tollgate.FallbackWorkflowName, tollgate.FallbackInput{
		ActivityType: activities.CompleteActivity, From: "openai/m0", Chain: []string{"openai/m1", "openai/m2"},
		Options: fallback.OptionsFrom(workflows.LLMActivityOptions()),
	}, request("m0"))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out activities.Response
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, "m2", out.Model)
	require.Equal(t, []string{"m1", "m2"}, f.calls)
}

func TestFallbackWorkflowStopsAtOtherFailures(t *testing.T) {
	f := &fakeModels{answer: map[string]error{
		"m1": temporal.NewNonRetryableApplicationError("bad request", tollgate.ProviderRejected, nil),
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(tollgate.FallbackWorkflowName, tollgate.FallbackInput{
		ActivityType: activities.CompleteActivity, From: "openai/m0", Chain: []string{"openai/m1", "openai/m2"},
	}, request("m0"))
	err := env.GetWorkflowError()
	require.True(t, tollgate.IsType(err, tollgate.ProviderRejected), "got %v", err)
	require.Equal(t, []string{"m1"}, f.calls)
}

func TestFallbackWorkflowNamesEveryModelTried(t *testing.T) {
	f := &fakeModels{answer: map[string]error{
		"m1": escalation("openai/m1"),
		"m2": temporal.NewNonRetryableApplicationError("capped", tollgate.DailyQuotaExhausted, nil),
	}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(tollgate.FallbackWorkflowName, tollgate.FallbackInput{
		ActivityType: activities.CompleteActivity, From: "openai/m0", Chain: []string{"openai/m1", "openai/m2"},
	}, request("m0"))
	err := env.GetWorkflowError()
	require.True(t, tollgate.IsType(err, tollgate.FallbackChainExhausted), "got %v", err)
	require.ErrorContains(t, err, "tried openai/m0, openai/m1, openai/m2")
}

func TestFallbackWorkflowRejectsAnEmptyChain(t *testing.T) {
	env := newEnv(t, &fakeModels{})
	env.ExecuteWorkflow(tollgate.FallbackWorkflowName, tollgate.FallbackInput{ActivityType: activities.CompleteActivity}, request("m0"))
	require.True(t, tollgate.IsType(env.GetWorkflowError(), tollgate.InvalidRequest))
}

func TestAgentWorkflowRejectsZeroTurns(t *testing.T) {
	env := newEnv(t, &fakeModels{})
	in := agentInput("m0")
	in.Turns = 0
	env.ExecuteWorkflow(workflows.AgentWorkflow, in)
	require.ErrorContains(t, env.GetWorkflowError(), "Turns is 0")
}

func request(model string) activities.Request {
	return activities.Request{Provider: "openai", Model: model, MaxOutputTokens: 64,
		Messages: []activities.Message{{Role: activities.RoleUser, Content: "hi"}}}
}
