package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// Tollgate applied the fallback step's target). Given tools, a model calls
// the next one not yet answered (or call, when set) unless the tool choice
// forbids it, then answers in text.
type fakeModels struct {
	mu     sync.Mutex
	calls  []string
	answer map[string]error // nil: answer
	call   string           // the tool every turn calls, when set
	last   activities.Request
}

func (f *fakeModels) Complete(ctx context.Context, req activities.Request) (activities.Response, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.Model)
	f.last = req
	f.mu.Unlock()
	if err := f.answer[req.Model]; err != nil {
		return activities.Response{}, err
	}
	resp := activities.Response{Text: "answer from " + req.Model, Provider: req.Provider, Model: req.Model}
	answered := 0
	for _, m := range req.Messages {
		answered += len(m.ToolResults)
	}
	if req.ToolChoice.Mode != activities.ToolNone && (f.call != "" || answered < len(req.Tools)) {
		name := f.call
		if name == "" {
			name = req.Tools[answered].Name
		}
		resp.Text = ""
		resp.ToolCalls = []activities.ToolCall{{ID: fmt.Sprintf("call_%d", answered), Name: name, Arguments: json.RawMessage(`{"q":"Lisbon"}`)}}
	}
	return resp, nil
}

// lookup and fails are the tools the agents below are given.
func lookup(ctx context.Context, call activities.ToolCall) (string, error) {
	return "looked up " + string(call.Arguments), nil
}

func fails(ctx context.Context, call activities.ToolCall) (string, error) {
	return "", temporal.NewNonRetryableApplicationError("the index is down", "ToolDown", nil)
}

var (
	lookupTool = activities.Tool{Name: "lookup", Description: "Look a city up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	failsTool  = activities.Tool{Name: "fails", Parameters: json.RawMessage(`{"type":"object"}`)}
)

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
	env.RegisterActivityWithOptions(lookup, activity.RegisterOptions{Name: lookupTool.Name})
	env.RegisterActivityWithOptions(fails, activity.RegisterOptions{Name: failsTool.Name})
	return env
}

func escalation(from string, backups ...string) error {
	return temporal.NewApplicationErrorWithOptions("rate limited 4 times", tollgate.RateLimitEscalation,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{tollgate.EscalationDetails{From: from, Backups: backups, Reason: "rate_limited", RateLimited: 4}}})
}

func agentInput(model string) workflows.AgentInput {
	return workflows.AgentInput{Provider: "openai", Model: model, Task: "Plan a trip.", Tools: []activities.Tool{lookupTool}, MaxOutputTokens: 64}
}

func agentResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.AgentResult {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out workflows.AgentResult
	require.NoError(t, env.GetWorkflowResult(&out))
	return out
}

// The model calls a tool, the tool runs as an activity, its result goes
// back, and the model's answer without tool calls ends the loop.
func TestAgentRunsToolsUntilTheModelAnswers(t *testing.T) {
	f := &fakeModels{}
	env := newEnv(t, f)
	in := agentInput("m0")
	in.Tools = append(in.Tools, failsTool)
	env.ExecuteWorkflow(workflows.AgentWorkflow, in)
	out := agentResult(t, env)
	require.Len(t, out.Turns, 3)
	require.Equal(t, 2, out.ToolCalls)
	require.Equal(t, "answer from m0", out.Answer)
	msgs := f.last.Messages
	require.Len(t, msgs, 5, "task, then a call and its result per tool")
	require.Equal(t, []activities.ToolResult{{CallID: "call_0", Content: `looked up {"q":"Lisbon"}`}}, msgs[2].ToolResults)
	require.Equal(t, "fails", msgs[3].ToolCalls[0].Name)
	require.True(t, msgs[4].ToolResults[0].IsError, "a failed tool answers with an error result")
	require.Contains(t, msgs[4].ToolResults[0].Content, "the index is down")
}

// A call of a tool the agent was not given answers with an error result,
// and the turn limit's last call forbids tools, so the run ends with an
// answer.
func TestAgentStopsAtTheTurnLimit(t *testing.T) {
	f := &fakeModels{call: "nonexistent"}
	env := newEnv(t, f)
	in := agentInput("m0")
	in.MaxTurns = 3
	env.ExecuteWorkflow(workflows.AgentWorkflow, in)
	out := agentResult(t, env)
	require.Len(t, out.Turns, 3)
	require.Equal(t, 2, out.ToolCalls)
	require.Equal(t, "answer from m0", out.Answer)
	require.Equal(t, activities.ToolNone, f.last.ToolChoice.Mode)
	res := f.last.Messages[2].ToolResults[0]
	require.True(t, res.IsError)
	require.Contains(t, res.Content, `no tool named "nonexistent"`)
}

// An escalated turn is answered by the backup in a FallbackWorkflow child,
// tools and all, and the loop goes on with the primary for the next turn.
func TestAgentTurnFallsBackAndTheLoopGoesOn(t *testing.T) {
	f := &fakeModels{answer: map[string]error{"m0": escalation("openai/m0", "openai/m1")}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(workflows.AgentWorkflow, agentInput("m0"))
	out := agentResult(t, env)
	require.Len(t, out.Turns, 2)
	require.Equal(t, "m1", out.Turns[0].Model)
	require.Equal(t, "lookup", out.Turns[0].ToolCalls[0].Name, "the backup was given the tools")
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

func TestAgentWorkflowRejectsANegativeTurnLimit(t *testing.T) {
	env := newEnv(t, &fakeModels{})
	in := agentInput("m0")
	in.MaxTurns = -1
	env.ExecuteWorkflow(workflows.AgentWorkflow, in)
	err := env.GetWorkflowError()
	require.True(t, tollgate.IsType(err, tollgate.InvalidRequest), "got %v", err)
	require.ErrorContains(t, err, "AgentInput.MaxTurns is -1")
}

func request(model string) activities.Request {
	return activities.Request{Provider: "openai", Model: model, MaxOutputTokens: 64,
		Messages: []activities.Message{{Role: activities.RoleUser, Content: "hi"}}}
}
