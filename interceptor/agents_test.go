package interceptor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// agentTools are the tools of the tool-using agents below: activities of
// their names, registered on every test worker, not governed.
var agentTools = []activities.Tool{
	{Name: "find_flights", Description: "Find flights to a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
	{Name: "find_hotels", Description: "Find hotels in a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
}

func findFlights(ctx context.Context, call activities.ToolCall) (string, error) {
	return `[{"flight":"TP1351","departs":"08:05"}]`, nil
}

func findHotels(ctx context.Context, call activities.ToolCall) (string, error) {
	return `[{"hotel":"Casa do Rio","night_eur":120}]`, nil
}

func registerTools(w worker.Worker) {
	w.RegisterActivityWithOptions(findFlights, activity.RegisterOptions{Name: agentTools[0].Name})
	w.RegisterActivityWithOptions(findHotels, activity.RegisterOptions{Name: agentTools[1].Name})
}

// toolAgent is an agent on provider/model with both tools: three model
// calls (one per tool, then the answer). Its system prompt of about
// systemTokens tokens starts with its own number, so no two agents share
// a cached prefix.
func toolAgent(provider, model string, n, systemTokens int) workflows.AgentInput {
	const line = "You plan trips; call the tools for facts and answer briefly. "
	system := fmt.Sprintf("Agent %d. ", n) + strings.Repeat(line, systemTokens*4/len(line)+1)
	return workflows.AgentInput{
		Provider: provider, Model: model, System: system[:systemTokens*4],
		Task:  fmt.Sprintf("Plan trip %d to Lisbon.", n),
		Tools: agentTools, MaxOutputTokens: 64, Cache: provider == activities.Anthropic,
	}
}

// A burst of 20 tool-using agents on each provider, under a tight limit on
// the tokens it counts (Anthropic's input tokens per minute, counted as
// Anthropic counts them: cache reads free; OpenAI's and Gemini's tokens
// per minute): Tollgate makes the calls wait their turn, the provider
// refuses none, and every agent runs its tools and answers. llmsim's
// per-minute buckets are compressed to a second.
func TestToolAgentBurstOnEachProvider(t *testing.T) {
	const (
		agents       = 20
		tokensPerSec = 4000
	)
	for _, tc := range []struct {
		provider, model string
		sim             llmsim.Model
		axis            quota.Axis
		// systemTokens sizes the system prompt: for Anthropic, past the
		// 1024 tokens it caches at least, and charged for the first turn
		// only; OpenAI and Gemini count cached tokens, so every turn pays
		// the whole prompt.
		systemTokens int
	}{
		{activities.OpenAI, "gpt-agents", llmsim.Model{TokensPerMinute: tokensPerSec}, quota.Tokens, 400},
		{activities.Anthropic, "claude-agents", llmsim.Model{InputTokensPerMinute: tokensPerSec}, quota.InputTokens, 1500},
		{activities.Gemini, "gemini-agents", llmsim.Model{TokensPerMinute: tokensPerSec}, quota.Tokens, 400},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			m := tc.sim
			m.Provider, m.Name, m.RequestsPerMinute, m.Period = tc.provider, tc.model, 10_000, time.Second
			e := newEnv(t, llmsim.Config{Models: []llmsim.Model{m}, Latency: llmsim.Latency{Fixed: 20 * time.Millisecond}})
			key := quota.Key{Provider: tc.provider, Model: tc.model}
			store := memoryStore(t, map[quota.Key]quota.Policy{key: {
				Limits: []quota.Limit{
					quota.Per(quota.Requests, 10_000, time.Second),
					quota.Per(tc.axis, tokensPerSec, time.Second),
				},
				Headroom: burstHeadroom,
			}})
			ic, _ := e.startWorker(interceptor.Options{Store: store})

			runs := make([]client.WorkflowRun, agents)
			for i := range runs {
				runs[i] = e.start(fmt.Sprintf("%s-%d", tc.model, i), toolAgent(tc.provider, tc.model, i, tc.systemTokens))
			}
			var cacheReads int64
			for i, run := range runs {
				out, err := e.result(run)
				require.NoError(t, err, "agent %d", i)
				require.Equal(t, len(agentTools), out.ToolCalls, "agent %d ran each tool", i)
				require.Len(t, out.Turns, len(agentTools)+1)
				require.NotEmpty(t, out.Answer)
				cacheReads += out.Usage.CacheReadTokens
			}

			st := e.sim.Stats(tc.model)
			require.Zero(t, st.TooManyRequests, "the provider refused no call")
			require.EqualValues(t, agents*(len(agentTools)+1), st.Accepted)
			is := ic.Stats()
			require.Positive(t, is.Queued+is.Refused, "the limit made calls wait")
			snap, err := store.Snapshot(context.Background(), key)
			require.NoError(t, err)
			t.Logf("%s: %d calls, %d waited; cache reads %d tokens; learned estimate ratio %.2f",
				tc.provider, st.Accepted, is.Queued+is.Refused, cacheReads, snap.EstimateRatio)
			if tc.provider == activities.Anthropic {
				// Each turn after the first reads the conversation so far
				// from the cache, and calibration learns on the part not
				// read: llmsim's tokenizer is characters/4 here, so the
				// ratio stays near 1, not at the 0.5 floor it would reach
				// comparing the whole prompt with what Anthropic counts.
				require.Greater(t, cacheReads, int64(agents*len(agentTools)*tc.systemTokens), "later turns read the prompt from the cache")
				require.Greater(t, snap.EstimateRatio, 0.8, "calibration learned on the uncached part")
			}
		})
	}
}
