package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A conversation with caching on reads its earlier turns from the prompt
// cache on every provider (Anthropic through the breakpoints Complete puts
// on it), the usage says how much, and Anthropic's charge and settle leave
// the cache reads off the input axis, as its ITPM does.
func TestCompletePromptCache(t *testing.T) {
	acts := toolActs(t)
	system := strings.Repeat("You are a careful agent. ", 400) // 10,000 characters
	for _, p := range []struct{ provider, model string }{
		{OpenAI, "gpt-tools"}, {Anthropic, "claude-tools"}, {Gemini, "gemini-tools"},
	} {
		t.Run(p.provider, func(t *testing.T) {
			req := Request{Provider: p.provider, Account: "acct", Model: p.model, System: system,
				Messages: []Message{{Role: RoleUser, Content: "first question"}}, MaxOutputTokens: 50,
				Tools: weatherTools, Caching: Caching{On: true, Key: "conv-1"}}
			first, err := acts.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Zero(t, first.Usage.CacheReadTokens)

			req.Messages = append(req.Messages, first.Message(),
				Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: first.ToolCalls[0].ID, Content: "sunny"}}})
			req.Caching.Warm = 1
			second, err := acts.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Greater(t, second.Usage.CacheReadTokens, int64(2500), "the system prompt, tools and first turn were read from the cache")
			require.Less(t, second.Usage.CacheReadTokens, second.Usage.InputTokens)

			charge, err := req.QuotaCharge()
			require.NoError(t, err)
			used := second.QuotaUsage()
			if p.provider == Anthropic {
				require.Positive(t, first.Usage.CacheWriteTokens)
				require.Less(t, charge.Cost.InputTokens, int64(100), "the warm prefix is not charged")
				require.Equal(t, charge.Cost.InputTokens, charge.Prompt)
				require.Equal(t, second.Usage.InputTokens-second.Usage.CacheReadTokens, used.InputTokens)
			} else {
				require.Greater(t, charge.Cost.Tokens, int64(2500), "cached tokens count toward TPM")
				require.Equal(t, second.Usage.InputTokens, used.InputTokens)
			}
		})
	}
}

func TestValidateCaching(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Caching
	}{
		{"warm past the messages", Caching{On: true, Warm: 2}},
		{"negative warm", Caching{On: true, Warm: -1}},
		{"warm with caching off", Caching{Warm: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest(Anthropic)
			r.Caching = tc.c
			var ie *InvalidRequestError
			require.True(t, errors.As(r.Validate(), &ie))
			require.Equal(t, "request.caching.warm", ie.Field)
		})
	}
}

// QuotaPrompt is the estimate of the part of the prompt the usage's input
// tokens count: for Anthropic, the share not read from the cache.
func TestResponseQuotaPrompt(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp Response
		want int64
	}{
		{"anthropic, half read from the cache", Response{Provider: Anthropic, PromptEstimate: 1000, Usage: Usage{InputTokens: 1200, CacheReadTokens: 600}}, 500},
		{"anthropic, nothing read", Response{Provider: Anthropic, PromptEstimate: 1000, Usage: Usage{InputTokens: 1200}}, 1000},
		{"openai counts cached tokens", Response{Provider: OpenAI, PromptEstimate: 1000, Usage: Usage{InputTokens: 1200, CacheReadTokens: 600}}, 1000},
		{"size unknown", Response{Provider: Anthropic, Usage: Usage{InputTokens: 1200, CacheReadTokens: 600}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.resp.QuotaPrompt())
		})
	}
}
