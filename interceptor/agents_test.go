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
// calls (one per tool, then the answer). Every agent has the same system
// prompt, of systemTokens tokens, so an agent's first call may read it
// from the cache another agent's wrote.
func toolAgent(provider, model string, n, systemTokens int) workflows.AgentInput {
	const line = "You plan trips; call the tools for facts and answer briefly. "
	system := strings.Repeat(line, systemTokens*4/len(line)+1)
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
// per-minute buckets are compressed to a second, and its tokenizer is not
// the estimate's: it counts 30 % more, as a denser tokenizer does.
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
			m.Density = 1.3 // the provider counts 30 % more than characters/4: calibration has to learn it
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
				// from the cache, and a first turn may read the system
				// prompt another agent wrote; calibration learns on the
				// part not read: llmsim's tokenizer counts 1.3 times
				// characters/4 here, so the ratio comes near 1.3, not to
				// the 0.5 floor it would reach comparing what Anthropic
				// counts with the estimate of more than it counted.
				require.Greater(t, cacheReads, int64(agents*len(agentTools)*tc.systemTokens), "later turns read the prompt from the cache")
				require.Greater(t, snap.EstimateRatio, 0.8, "calibration learned on the uncached part")
			}
		})
	}
}

// Agents that share a long system prompt: each one's first call reads the
// prefix an earlier agent's call wrote to Anthropic's cache, though its
// estimate (a new conversation) charged the whole prompt. Calibration
// compares what Anthropic counted (the tokens not read from the cache)
// with the estimate of those same tokens, so the learned ratio stays at
// the tokenizer's (characters/4 here), not pulled to the 0.5 floor by the
// estimate of tokens Anthropic never counted.
func TestCalibrationLearnsOnTheUncachedPart(t *testing.T) {
	const model = "claude-shared"
	e := newEnv(t, llmsim.Config{Models: []llmsim.Model{{Provider: llmsim.Anthropic, Name: model,
		RequestsPerMinute: 10_000, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000}}})
	key := quota.Key{Provider: activities.Anthropic, Model: model}
	store := memoryStore(t, map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{
		quota.PerMinute(quota.Requests, 10_000).WithBurst(time.Minute),
		quota.PerMinute(quota.InputTokens, 1_000_000).WithBurst(time.Minute),
	}}})
	e.startWorker(interceptor.Options{Store: store})

	var read int64
	for i := range 5 {
		in := toolAgent(activities.Anthropic, model, i, 1500)
		in.Tools = nil // one call each
		out, err := e.result(e.start(fmt.Sprintf("shared-%d", i), in))
		require.NoError(t, err)
		if i > 0 {
			require.Positive(t, out.Usage.CacheReadTokens, "agent %d read the shared system prompt from the cache", i)
		}
		read += out.Usage.CacheReadTokens
	}
	snap, err := store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	t.Logf("5 agents read %d tokens from the cache; learned estimate ratio %.2f", read, snap.EstimateRatio)
	require.InDelta(t, 1, snap.EstimateRatio, 0.1, "the ratio is the tokenizer's")
}
