package activities

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// toolActs is Activities for all three providers against one llmsim.
func toolActs(t *testing.T) *Activities {
	t.Helper()
	sim, err := llmsim.New(llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.OpenAI, Name: "gpt-tools", RequestsPerMinute: 600, TokensPerMinute: 600000},
			{Provider: llmsim.Anthropic, Name: "claude-tools", RequestsPerMinute: 600, InputTokensPerMinute: 600000, OutputTokensPerMinute: 600000},
			{Provider: llmsim.Gemini, Name: "gemini-tools", RequestsPerMinute: 600, TokensPerMinute: 600000},
		},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: testKey}},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: testKey, BaseURL: srv.URL + "/v1/", HTTPClient: srv.Client()},
		Anthropic: ProviderConfig{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: 10 * time.Second},
		Gemini:    ProviderConfig{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: 10 * time.Second},
	})
	require.NoError(t, err)
	return acts
}

var weatherTools = []Tool{
	{Name: "get_weather", Description: "Current weather in a city.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
	{Name: "get_time", Description: "Local time in a city."},
}

// A tool-using conversation runs on every provider, streamed or not: the
// model calls each declared tool in turn (llmsim's rule), the results go
// back as a tool message, and it ends in text. The finish reasons are the
// providers' own.
func TestCompleteToolLoop(t *testing.T) {
	acts := toolActs(t)
	for _, tc := range []struct {
		provider, model string
		stream          bool
		toolFinish      string
		textFinish      string
	}{
		{OpenAI, "gpt-tools", false, "tool_calls", "stop"},
		{OpenAI, "gpt-tools", true, "tool_calls", "stop"},
		{Anthropic, "claude-tools", false, "tool_use", "end_turn"},
		{Anthropic, "claude-tools", true, "tool_use", "end_turn"},
		{Gemini, "gemini-tools", false, "STOP", "STOP"},
	} {
		name := tc.provider
		if tc.stream {
			name += "/stream"
		}
		t.Run(name, func(t *testing.T) {
			req := Request{
				Provider: tc.provider, Account: "acct", Model: tc.model, System: "Use tools.",
				Messages:        []Message{{Role: RoleUser, Content: "Weather in Lisbon?"}},
				MaxOutputTokens: 200, Tools: weatherTools, Stream: tc.stream,
			}
			var prompts []int64
			for _, want := range []string{"get_weather", "get_time"} {
				resp, err := acts.Complete(context.Background(), req)
				require.NoError(t, err)
				require.Equal(t, tc.toolFinish, resp.FinishReason)
				require.Len(t, resp.ToolCalls, 1)
				call := resp.ToolCalls[0]
				require.Equal(t, want, call.Name)
				require.NotEmpty(t, call.ID)
				require.JSONEq(t, `{"query":"Weather in Lisbon?"}`, string(call.Arguments))
				require.Positive(t, resp.Usage.OutputTokens)
				prompts = append(prompts, resp.Usage.InputTokens)
				req.Messages = append(req.Messages, resp.Message(),
					Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: call.ID, Content: `{"sunny":true,"celsius":21}`}}})
			}
			resp, err := acts.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tc.textFinish, resp.FinishReason)
			require.Empty(t, resp.ToolCalls)
			require.Contains(t, resp.Text, "Weather in Lisbon?")
			prompts = append(prompts, resp.Usage.InputTokens)
			require.Less(t, prompts[0], prompts[1], "tool calls and results count as prompt")
			require.Less(t, prompts[1], prompts[2])
		})
	}
}

// Tool choice reaches each provider: none answers in text, a named tool is
// called even when it is not the one llmsim would pick.
func TestCompleteToolChoice(t *testing.T) {
	acts := toolActs(t)
	for _, p := range []struct{ provider, model string }{
		{OpenAI, "gpt-tools"}, {Anthropic, "claude-tools"}, {Gemini, "gemini-tools"},
	} {
		t.Run(p.provider, func(t *testing.T) {
			req := Request{Provider: p.provider, Account: "acct", Model: p.model,
				Messages: []Message{{Role: RoleUser, Content: "Time?"}}, MaxOutputTokens: 100, Tools: weatherTools}
			req.ToolChoice = ToolChoice{Mode: ToolNone}
			resp, err := acts.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Empty(t, resp.ToolCalls)
			req.ToolChoice = ToolChoice{Name: "get_time"}
			resp, err = acts.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Len(t, resp.ToolCalls, 1)
			require.Equal(t, "get_time", resp.ToolCalls[0].Name)
		})
	}
}

// A fallback carries the tools, in a copy of its own.
func TestWithModelCarriesTools(t *testing.T) {
	req := Request{Provider: OpenAI, Model: "m", Tools: append([]Tool(nil), weatherTools...)}
	fb := req.WithModel(Anthropic, "claude")
	require.Equal(t, req.Tools, fb.Tools)
	fb.Tools[0].Name = "changed"
	require.Equal(t, "get_weather", req.Tools[0].Name)
}

func TestValidateTools(t *testing.T) {
	call := ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"query":"x"}`)}
	base := func() Request {
		r := validRequest(OpenAI)
		r.Tools = append([]Tool(nil), weatherTools...)
		return r
	}
	withTurns := func(msgs ...Message) Request {
		r := base()
		r.Messages = append(r.Messages, msgs...)
		return r
	}
	for _, tc := range []struct {
		name  string
		req   Request
		field string
	}{
		{"bad tool name", func() Request { r := base(); r.Tools[0].Name = "get weather"; return r }(), "request.tools[0].name"},
		{"duplicate tool", func() Request { r := base(); r.Tools[1].Name = "get_weather"; return r }(), "request.tools[1].name"},
		{"schema not an object", func() Request { r := base(); r.Tools[0].Parameters = json.RawMessage(`[1]`); return r }(), "request.tools[0].parameters"},
		{"schema of a string", func() Request { r := base(); r.Tools[0].Parameters = json.RawMessage(`{"type":"string"}`); return r }(), "request.tools[0].parameters.type"},
		{"unknown mode", func() Request { r := base(); r.ToolChoice.Mode = "any"; return r }(), "request.tool_choice.mode"},
		{"choice without tools", func() Request { r := validRequest(OpenAI); r.ToolChoice.Mode = ToolAuto; return r }(), "request.tool_choice"},
		{"undeclared forced tool", func() Request { r := base(); r.ToolChoice.Name = "nope"; return r }(), "request.tool_choice.name"},
		{"none with a name", func() Request { r := base(); r.ToolChoice = ToolChoice{Mode: ToolNone, Name: "get_time"}; return r }(), "request.tool_choice.mode"},
		{"calls on a user turn", withTurns(Message{Role: RoleUser, Content: "x", ToolCalls: []ToolCall{call}}), "request.messages[1].tool_calls"},
		{"call without id", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "get_weather"}}}), "request.messages[1].tool_calls[0].id"},
		{"arguments not an object", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`"x"`)}}}), "request.messages[1].tool_calls[0].arguments"},
		{"calls left unanswered", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{call}}, Message{Role: RoleUser, Content: "go on"}), "request.messages[2].role"},
		{"results without calls", withTurns(Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c1"}}}), "request.messages[1].role"},
		{"result for another call", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{call}}, Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c2"}}}), "request.messages[2].tool_results[0].call_id"},
		{"a call unanswered", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{call, {ID: "c2", Name: "get_time"}}}, Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c1"}}}), "request.messages[2].tool_results"},
		{"tool turn with text", withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{call}}, Message{Role: RoleTool, Content: "x", ToolResults: []ToolResult{{CallID: "c1"}}}), "request.messages[2].content"},
		{"results on a user turn", withTurns(Message{Role: RoleUser, Content: "x", ToolResults: []ToolResult{{CallID: "c1"}}}), "request.messages[1].tool_results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			var ie *InvalidRequestError
			require.True(t, errors.As(err, &ie), "got %v", err)
			require.Equal(t, tc.field, ie.Field)
			require.NotEmpty(t, ie.Fix)
		})
	}
	t.Run("a whole tool turn", func(t *testing.T) {
		r := withTurns(Message{Role: RoleAssistant, ToolCalls: []ToolCall{call}}, Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: "c1", Content: "sunny"}}})
		require.NoError(t, r.Validate())
		require.Greater(t, r.Characters(), validRequest(OpenAI).Characters()+int64(len("sunny")))
	})
}
