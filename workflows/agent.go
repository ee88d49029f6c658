package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
)

// AgentInput is the input of AgentWorkflow.
type AgentInput struct {
	// Provider, Account and Model name the model the agent talks to.
	Provider string `json:"provider"`
	Account  string `json:"account,omitempty"`
	Model    string `json:"model"`
	// System is the agent's system prompt.
	System string `json:"system,omitempty"`
	// Task is the first user message.
	Task string `json:"task"`
	// Tools are the functions the model may call. Each is an activity of
	// the tool's name, registered on the workers by the user, with the
	// signature
	//
	//	func(ctx context.Context, call activities.ToolCall) (string, error)
	//
	// run with ToolActivityOptions: not an LLM call, so Tollgate does not
	// govern it. Its result goes back to the model as the call's
	// ToolResult; an error that outlasts its retries goes back as an
	// IsError result, for the model to react to. None makes a one-call,
	// text-only agent.
	Tools []activities.Tool `json:"tools,omitempty"`
	// MaxTurns bounds the model calls (turns) of a run; zero means
	// DefaultMaxTurns. The last turn it allows forbids tool calls
	// (ToolChoice none), so the run ends with an answer.
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxOutputTokens bounds each answer.
	MaxOutputTokens int64 `json:"max_output_tokens"`
	// Tenant and Priority are passed to every call (see activities.Request).
	Tenant   string         `json:"tenant,omitempty"`
	Priority quota.Priority `json:"priority,omitempty"`
	// Cache turns prompt caching on for every call (activities.Caching.On):
	// each turn whose previous call was answered within CacheLifetime
	// tells its estimate that the conversation so far is warm
	// (Caching.Warm), so Anthropic's input tokens are charged for the new
	// part alone, as Anthropic counts them.
	Cache bool `json:"cache,omitempty"`
}

// DefaultMaxTurns is AgentInput.MaxTurns's default: 10 model calls.
const DefaultMaxTurns = 10

// CacheLifetime is how long after a call the agent expects its prompt to
// stay in the provider's cache: 5 minutes, the lifetime of Anthropic's
// ephemeral cache and OpenAI's in-memory one, each use refreshing it.
const CacheLifetime = 5 * time.Minute

// AgentResult is what AgentWorkflow returns.
type AgentResult struct {
	// Answer is the last turn's text.
	Answer string `json:"answer"`
	// Turns are the model's answers in order, with the model that gave
	// each (a backup model when the call fell back) and the tool calls it
	// made.
	Turns []activities.Response `json:"turns"`
	// ToolCalls counts the tool calls run.
	ToolCalls int `json:"tool_calls"`
	// Usage adds up every turn's usage.
	Usage activities.Usage `json:"usage"`
}

// AgentWorkflow is a tool-using agent: it sends the task with the tools,
// runs the tool calls the model answers with (each an activity, all of a
// turn's at once), sends their results back, and so on until the model
// answers without calling a tool or MaxTurns calls have been made. Each
// model call is an ordinary activity call that Tollgate's interceptor
// governs (waits are scheduled retries, rate limits retry as the provider
// says, repeated rate limiting falls back to a backup model, tools and
// all), so the loop needs no retry logic of its own.
//
// It fails with a non-retryable tollgate.InvalidRequest error naming the
// field when the input is bad.
func AgentWorkflow(ctx workflow.Context, in AgentInput) (AgentResult, error) {
	maxTurns := in.MaxTurns
	if maxTurns == 0 {
		maxTurns = DefaultMaxTurns
	}
	if maxTurns < 0 {
		return AgentResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("AgentInput.MaxTurns is %d: set a positive bound on the model calls, or 0 for %d", in.MaxTurns, DefaultMaxTurns), tollgate.InvalidRequest, nil)
	}
	llm := workflow.WithActivityOptions(ctx, LLMActivityOptions())
	tools := workflow.WithActivityOptions(ctx, ToolActivityOptions())
	req := activities.Request{
		Provider:        in.Provider,
		Account:         in.Account,
		Model:           in.Model,
		System:          in.System,
		MaxOutputTokens: in.MaxOutputTokens,
		Tenant:          in.Tenant,
		Priority:        in.Priority,
		Tools:           in.Tools,
		Messages:        []activities.Message{{Role: activities.RoleUser, Content: in.Task}},
	}
	req.Caching.On = in.Cache
	var (
		out      AgentResult
		answered time.Time // when the previous call was answered
	)
	for turn := 1; turn <= maxTurns; turn++ {
		if in.Cache && turn > 1 && workflow.Now(ctx).Sub(answered) < CacheLifetime {
			// What the previous call sent: all but its answer and the
			// tool results that followed it.
			req.Caching.Warm = len(req.Messages) - 2
		} else {
			req.Caching.Warm = 0
		}
		if len(req.Tools) > 0 && turn == maxTurns {
			req.ToolChoice = activities.ToolChoice{Mode: activities.ToolNone}
		}
		var resp activities.Response
		if err := workflow.ExecuteActivity(llm, activities.CompleteActivity, req).Get(ctx, &resp); err != nil {
			return out, fmt.Errorf("turn %d: %w", turn, err)
		}
		answered = workflow.Now(ctx)
		out.Turns = append(out.Turns, resp)
		out.Answer = resp.Text
		out.Usage.InputTokens += resp.Usage.InputTokens
		out.Usage.OutputTokens += resp.Usage.OutputTokens
		out.Usage.CacheReadTokens += resp.Usage.CacheReadTokens
		out.Usage.CacheWriteTokens += resp.Usage.CacheWriteTokens
		if len(resp.ToolCalls) == 0 || turn == maxTurns {
			break
		}
		req.Messages = append(req.Messages, resp.Message(),
			activities.Message{Role: activities.RoleTool, ToolResults: runTools(tools, in.Tools, resp.ToolCalls)})
		out.ToolCalls += len(resp.ToolCalls)
	}
	return out, nil
}

// runTools runs a turn's tool calls as activities, all at once, and
// returns their results in the calls' order. A call of a tool the request
// did not declare, and a tool activity that failed, answer with an IsError
// result.
func runTools(ctx workflow.Context, declared []activities.Tool, calls []activities.ToolCall) []activities.ToolResult {
	futures := make([]workflow.Future, len(calls))
	for i, c := range calls {
		if slices.ContainsFunc(declared, func(t activities.Tool) bool { return t.Name == c.Name }) {
			futures[i] = workflow.ExecuteActivity(ctx, c.Name, c)
		}
	}
	results := make([]activities.ToolResult, len(calls))
	for i, c := range calls {
		results[i].CallID = c.ID
		if futures[i] == nil {
			results[i].Content, results[i].IsError = fmt.Sprintf("no tool named %q: use one of the tools given", c.Name), true
			continue
		}
		if err := futures[i].Get(ctx, &results[i].Content); err != nil {
			results[i].Content, results[i].IsError = fmt.Sprintf("tool %s failed: %v", c.Name, err), true
		}
	}
	return results
}

// Register registers AgentWorkflow and FallbackWorkflow (under
// tollgate.FallbackWorkflowName, where the interceptor starts it) on r.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(AgentWorkflow)
	r.RegisterWorkflowWithOptions(FallbackWorkflow, workflow.RegisterOptions{Name: tollgate.FallbackWorkflowName})
}
