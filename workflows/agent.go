package workflows

import (
	"fmt"
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
	// Turns is how many LLM calls the agent makes (at least 1).
	Turns int `json:"turns"`
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

// CacheLifetime is how long after a call the agent expects its prompt to
// stay in the provider's cache: 5 minutes, the lifetime of Anthropic's
// ephemeral cache and OpenAI's in-memory one, each use refreshing it.
const CacheLifetime = 5 * time.Minute

// AgentResult is what AgentWorkflow returns.
type AgentResult struct {
	// Answer is the last turn's text.
	Answer string `json:"answer"`
	// Turns are the answers in order, with the model that gave each (a
	// backup model when the call fell back).
	Turns []activities.Response `json:"turns"`
	// Usage adds up every turn's usage.
	Usage activities.Usage `json:"usage"`
}

// AgentWorkflow is a multi-turn agent loop: it sends the task, reads the
// answer, asks for the next step, and so on for in.Turns calls, keeping the
// whole conversation. Each call is an ordinary activity call; Tollgate's
// interceptor governs it (waits are scheduled retries, rate limits retry as
// the provider says, repeated rate limiting falls back to a backup model),
// so the loop needs no retry logic of its own.
func AgentWorkflow(ctx workflow.Context, in AgentInput) (AgentResult, error) {
	if in.Turns < 1 {
		return AgentResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("AgentInput.Turns is %d: ask for at least one turn", in.Turns), tollgate.InvalidRequest, nil)
	}
	ctx = workflow.WithActivityOptions(ctx, LLMActivityOptions())
	req := activities.Request{
		Provider:        in.Provider,
		Account:         in.Account,
		Model:           in.Model,
		System:          in.System,
		MaxOutputTokens: in.MaxOutputTokens,
		Tenant:          in.Tenant,
		Priority:        in.Priority,
		Messages:        []activities.Message{{Role: activities.RoleUser, Content: in.Task}},
	}
	req.Caching.On = in.Cache
	var (
		out      AgentResult
		answered time.Time // when the previous call was answered
	)
	for turn := 1; turn <= in.Turns; turn++ {
		if in.Cache && turn > 1 && workflow.Now(ctx).Sub(answered) < CacheLifetime {
			// What the previous call sent: all but its answer and the
			// new user message.
			req.Caching.Warm = len(req.Messages) - 2
		} else {
			req.Caching.Warm = 0
		}
		var resp activities.Response
		if err := workflow.ExecuteActivity(ctx, activities.CompleteActivity, req).Get(ctx, &resp); err != nil {
			return out, fmt.Errorf("turn %d of %d: %w", turn, in.Turns, err)
		}
		out.Turns = append(out.Turns, resp)
		out.Answer = resp.Text
		out.Usage.InputTokens += resp.Usage.InputTokens
		out.Usage.OutputTokens += resp.Usage.OutputTokens
		out.Usage.CacheReadTokens += resp.Usage.CacheReadTokens
		out.Usage.CacheWriteTokens += resp.Usage.CacheWriteTokens
		answered = workflow.Now(ctx)
		req.Messages = append(req.Messages,
			activities.Message{Role: activities.RoleAssistant, Content: resp.Text},
			activities.Message{Role: activities.RoleUser, Content: fmt.Sprintf("Good. Now step %d: refine the plan.", turn+1)})
	}
	return out, nil
}

// Register registers AgentWorkflow and FallbackWorkflow (under
// tollgate.FallbackWorkflowName, where the interceptor starts it) on r.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(AgentWorkflow)
	r.RegisterWorkflowWithOptions(FallbackWorkflow, workflow.RegisterOptions{Name: tollgate.FallbackWorkflowName})
}
