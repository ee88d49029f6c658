package interceptor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
	"github.com/tollgate/tollgate/workflows"
)

// This file is a user's own tool-calling activity, written with openai-go
// directly rather than with package activities, and governed as fully as
// the shipped one. It takes three things:
//
//   - its input implements quota.Governed (the key and an estimate);
//   - its output implements quota.Metered (the usage, to settle and
//     calibrate from);
//   - its SDK client's HTTP client uses classify.Transport, and every call
//     is made with the activity's context, so the interceptor reads the
//     status and rate-limit headers of each answer; the SDK's error
//     (*openai.Error) is returned as it is (or wrapped), so a 429 is
//     classified with its Retry-After.

// ownKey is the quota key of the model the user's activity calls.
var ownKey = quota.Key{Provider: "openai", Model: "gpt-own"}

// askInput is the input of the user's Ask activity: a city to forecast
// for and, on the second turn, the tool call the model made and what the
// tool returned.
type askInput struct {
	City   string    `json:"city"`
	Call   *toolCall `json:"call,omitempty"`
	Result string    `json:"result,omitempty"`
}

type toolCall struct {
	ID, Name, Arguments string
}

// QuotaCharge implements quota.Governed: one request, and the prompt's
// characters/4 plus the answer's bound, as OpenAI counts its tokens per
// minute.
func (in askInput) QuotaCharge() (quota.Charge, error) {
	prompt := int64(len(in.City)+len(in.Result)+200) / 4
	return quota.Charge{Key: ownKey, Cost: quota.Cost{Requests: 1, Tokens: prompt + askMaxTokens}, Prompt: prompt}, nil
}

const askMaxTokens = 64

// askOutput is what Ask returns: the model's text, or the tool call it
// made instead, and the usage.
type askOutput struct {
	Text        string    `json:"text,omitempty"`
	Call        *toolCall `json:"call,omitempty"`
	InputTokens int64     `json:"input_tokens"`
	Output      int64     `json:"output_tokens"`
}

// QuotaUsage implements quota.Metered.
func (o askOutput) QuotaUsage() quota.Cost {
	return quota.Cost{Requests: 1, Tokens: o.InputTokens + o.Output, InputTokens: o.InputTokens, OutputTokens: o.Output}
}

// forecaster holds the user's openai-go client.
type forecaster struct {
	client openai.Client
}

func newForecaster(baseURL string) *forecaster {
	return &forecaster{client: openai.NewClient(
		option.WithAPIKey(apiKey),
		option.WithBaseURL(baseURL),
		option.WithMaxRetries(0), // Tollgate schedules the retries
		option.WithHTTPClient(&http.Client{Transport: classify.Transport{}}),
	)}
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Today's weather in a city."),
	Parameters: shared.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"query": map[string]any{"type": "string"}},
		"required":   []string{"query"},
	},
})

// Ask calls the model once, with the weather tool.
func (f *forecaster) Ask(ctx context.Context, in askInput) (askOutput, error) {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Forecast for " + in.City)}
	if in.Call != nil {
		var asked openai.ChatCompletionAssistantMessageParam
		asked.ToolCalls = []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: in.Call.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: in.Call.Name, Arguments: in.Call.Arguments},
		}}}
		msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &asked}, openai.ToolMessage(in.Result, in.Call.ID))
	}
	resp, err := f.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               ownKey.Model,
		Messages:            msgs,
		Tools:               []openai.ChatCompletionToolUnionParam{weatherTool},
		MaxCompletionTokens: openai.Int(askMaxTokens),
	})
	if err != nil {
		return askOutput{}, fmt.Errorf("ask: %w", err) // *openai.Error stays readable
	}
	out := askOutput{InputTokens: resp.Usage.PromptTokens, Output: resp.Usage.CompletionTokens}
	m := resp.Choices[0].Message
	if len(m.ToolCalls) > 0 {
		c := m.ToolCalls[0]
		out.Call = &toolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
		return out, nil
	}
	out.Text = m.Content
	return out, nil
}

// Weather is the tool, an ordinary activity Tollgate does not govern.
func Weather(ctx context.Context, call toolCall) (string, error) {
	return `{"sky":"clear","high_c":21}`, nil
}

// forecastWorkflow asks, runs the tool the model called, and asks again.
func forecastWorkflow(ctx workflow.Context, city string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflows.LLMActivityOptions())
	var f *forecaster
	in := askInput{City: city}
	for range 3 {
		var out askOutput
		if err := workflow.ExecuteActivity(ctx, f.Ask, in).Get(ctx, &out); err != nil {
			return "", err
		}
		if out.Call == nil {
			return out.Text, nil
		}
		var result string
		if err := workflow.ExecuteActivity(ctx, Weather, *out.Call).Get(ctx, &result); err != nil {
			return "", err
		}
		in.Call, in.Result = out.Call, result
	}
	return "", fmt.Errorf("no answer after 3 calls")
}

// ownWorker runs a worker of the user's activity on its own task queue,
// with Tollgate's interceptor over store.
func (e *env) ownWorker(queue string, store quota.Store) *interceptor.WorkerInterceptor {
	e.t.Helper()
	ic, err := interceptor.New(interceptor.Options{Store: e.watch(store), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(e.t, err)
	w := worker.New(e.client, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	w.RegisterActivity(newForecaster(e.simURL + "/v1/"))
	w.RegisterActivity(Weather)
	w.RegisterWorkflow(forecastWorkflow)
	require.NoError(e.t, w.Start())
	e.t.Cleanup(w.Stop)
	return ic
}

func (e *env) forecast(queue, id, city string) client.WorkflowRun {
	e.t.Helper()
	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute,
	}, forecastWorkflow, city)
	require.NoError(e.t, err)
	e.endWithTest(run)
	return run
}

func (e *env) forecastResult(run client.WorkflowRun) string {
	e.t.Helper()
	ctx, cancel := e.waitCtx(time.Minute)
	defer cancel()
	var out string
	require.NoError(e.t, waited(ctx, run.Get(ctx, &out)))
	return out
}

// A user's own openai-go activity calling tools, on two workers sharing one
// Redis: the first learns the provider's request limit from the answers'
// headers, and a 429 its call meets pauses the key, so the other worker's
// call waits out the pause without reaching the provider.
func TestOwnActivityIsGovernedAsFully(t *testing.T) {
	const providerRPM = 10
	e := newEnv(t, llmsim.Config{Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: ownKey.Model, RequestsPerMinute: providerRPM, TokensPerMinute: 1_000_000}}})
	// The policy believes the account allows twice what it does.
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{ownKey: {Limits: []quota.Limit{
		quota.PerMinute(quota.Requests, 2*providerRPM).WithBurst(time.Minute),
	}}})
	require.NoError(t, err)
	srv := redistest.StartServer(t)
	stores := make([]*redis.Store, 2)
	for i := range stores {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		stores[i], err = redis.New(rdb, ps, redis.Options{})
		require.NoError(t, err)
	}
	a := e.ownWorker("own-a", stores[0])
	b := e.ownWorker("own-b", stores[1])

	// One forecast on worker A: a tool call, the tool, the answer.
	require.NotEmpty(t, e.forecastResult(e.forecast("own-a", "own-a-1", "Lisbon")))
	require.EqualValues(t, 2, e.sim.Stats(ownKey.Model).Accepted)
	require.EqualValues(t, 2, a.Stats().Admitted, "the tool activity is not governed")
	// Header learning: the provider said 8 requests remain (refilling at
	// 10 a minute since); the policy alone would have left 18.
	snap, err := stores[1].Snapshot(context.Background(), ownKey)
	require.NoError(t, err)
	require.Less(t, snap.Axes[0].Available, float64(providerRPM-1), "the budget learned the provider's remaining requests")

	// The provider answers A's next call with a 429 and retry-after 5s.
	require.NoError(t, e.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: ownKey.Model, Times: 1, RetryAfter: 5 * time.Second}))
	runA := e.forecast("own-a", "own-a-2", "Porto")
	require.Eventually(t, func() bool {
		snap, err := stores[1].Snapshot(context.Background(), ownKey)
		return err == nil && !snap.PausedUntil.IsZero()
	}, 30*time.Second, 5*time.Millisecond, "A's 429 paused the key")
	snap, err = stores[1].Snapshot(context.Background(), ownKey)
	require.NoError(t, err)
	require.Equal(t, quota.PauseRateLimited, snap.PauseReason)

	// B's call, started during the pause, waits it out in Tollgate.
	runB := e.forecast("own-b", "own-b-1", "Faro")
	require.NotEmpty(t, e.forecastResult(runA))
	require.NotEmpty(t, e.forecastResult(runB))

	st := e.sim.Stats(ownKey.Model)
	require.EqualValues(t, 1, st.TooManyRequests, "the provider refused only the injected call")
	require.EqualValues(t, 6, st.Accepted, "two calls per forecast")
	require.EqualValues(t, 1, a.Stats().ProviderRateLimited, "A's 429 was classified as a rate limit")
	require.Zero(t, b.Stats().ProviderRateLimited, "B never met the 429")
	require.Positive(t, b.Stats().Refused, "B was refused while the key was paused")
	first := activityRuns(e.history("own-b-1"))[0]
	require.Greater(t, first.attempt, int32(1))
	require.Equal(t, tollgate.QuotaRefused, first.lastFailure, "B's first call waited for the pause, not for the provider")
	t.Logf("B's first call: attempt %d, last waited %s after %s", first.attempt, first.lastRetryDelay, first.lastFailure)
}
