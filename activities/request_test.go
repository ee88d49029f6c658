package activities

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/quota"
)

func validRequest(provider string) Request {
	return Request{
		Provider:        provider,
		Account:         "acct",
		Model:           "m",
		System:          "be brief",                                           // 8 chars
		Messages:        []Message{{Role: RoleUser, Content: "hello world!"}}, // 12 chars
		MaxOutputTokens: 100,
		Tenant:          "t1",
	}
}

func TestEstimators(t *testing.T) {
	for _, tc := range []struct {
		name             string
		chars, maxTokens int64
		openai           quota.Cost
		anthropic        quota.Cost
	}{
		{"max tokens dominate", 40, 100,
			quota.Cost{Requests: 1, Tokens: 100, InputTokens: 10, OutputTokens: 100},
			quota.Cost{Requests: 1, Tokens: 110, InputTokens: 10, OutputTokens: 100}},
		{"prompt dominates", 4000, 100,
			quota.Cost{Requests: 1, Tokens: 1000, InputTokens: 1000, OutputTokens: 100},
			quota.Cost{Requests: 1, Tokens: 1100, InputTokens: 1000, OutputTokens: 100}},
		{"characters round up", 5, 1,
			quota.Cost{Requests: 1, Tokens: 2, InputTokens: 2, OutputTokens: 1},
			quota.Cost{Requests: 1, Tokens: 3, InputTokens: 2, OutputTokens: 1}},
		{"empty prompt", 0, 7,
			quota.Cost{Requests: 1, Tokens: 7, OutputTokens: 7},
			quota.Cost{Requests: 1, Tokens: 7, OutputTokens: 7}},
		{"negatives count as zero", -5, -3,
			quota.Cost{Requests: 1},
			quota.Cost{Requests: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.openai, EstimateOpenAI(tc.chars, tc.maxTokens))
			require.Equal(t, tc.anthropic, EstimateAnthropic(tc.chars, tc.maxTokens))
		})
	}
	t.Run("tokens", func(t *testing.T) {
		for chars, want := range map[int64]int64{0: 0, 1: 1, 4: 1, 5: 2, 8: 2, 9: 3} {
			require.Equal(t, want, EstimateTokens(chars), "chars=%d", chars)
		}
	})
}

func TestQuotaCharge(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		c, err := validRequest(OpenAI).QuotaCharge()
		require.NoError(t, err)
		require.Equal(t, quota.Charge{
			Key:    quota.Key{Provider: OpenAI, Account: "acct", Model: "m", Tenant: "t1"},
			Cost:   quota.Cost{Requests: 1, Tokens: 100, InputTokens: 5, OutputTokens: 100},
			Prompt: 5,
		}, c)
	})
	t.Run("anthropic low priority", func(t *testing.T) {
		r := validRequest(Anthropic)
		r.Priority = quota.Low
		r.Messages = append(r.Messages, Message{Role: RoleAssistant, Content: "héllo"}) // 5 code points
		c, err := r.QuotaCharge()
		require.NoError(t, err)
		// 8 + 12 + 5 = 25 chars → 7 input tokens.
		require.Equal(t, quota.Cost{Requests: 1, Tokens: 107, InputTokens: 7, OutputTokens: 100}, c.Cost)
		require.Equal(t, int64(7), c.Prompt, "the prompt's part, which the store calibrates")
		require.Equal(t, quota.Low, c.Priority)
	})
	t.Run("bad key field", func(t *testing.T) {
		r := validRequest(OpenAI)
		r.Tenant = "a/b"
		_, err := r.QuotaCharge()
		var qe *quota.InvalidError
		require.ErrorAs(t, err, &qe)
		require.Equal(t, "key.tenant", qe.Field)
	})
}

func TestValidateNamesTheField(t *testing.T) {
	temp := 3.0
	for _, tc := range []struct {
		name  string
		edit  func(*Request)
		field string
	}{
		{"no provider", func(r *Request) { r.Provider = "" }, "request.provider"},
		{"unknown provider", func(r *Request) { r.Provider = "mistral" }, "request.provider"},
		{"no model", func(r *Request) { r.Model = "" }, "request.model"},
		{"no messages", func(r *Request) { r.Messages = nil }, "request.messages"},
		{"system role", func(r *Request) { r.Messages = []Message{{Role: "system", Content: "x"}} }, "request.messages[0].role"},
		{"no max tokens", func(r *Request) { r.MaxOutputTokens = 0 }, "request.max_output_tokens"},
		{"temperature", func(r *Request) { r.Temperature = &temp }, "request.temperature"},
		{"priority", func(r *Request) { r.Priority = 5 }, "request.priority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest(OpenAI)
			tc.edit(&r)
			_, err := r.QuotaCharge()
			var ie *InvalidRequestError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
			require.NotEmpty(t, ie.Fix)
			require.True(t, errors.Is(err, ErrInvalidRequest))
			require.True(t, strings.HasPrefix(err.Error(), "activities: "+tc.field))
		})
	}
}

func TestValidateTemperatureByProvider(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider string
		temp     float64
		fix      string // empty: valid
	}{
		{"openai zero", OpenAI, 0, ""},
		{"openai one and a half", OpenAI, 1.5, ""},
		{"openai two", OpenAI, 2, ""},
		{"openai above two", OpenAI, 2.01, "use a value in [0, 2]"},
		{"openai negative", OpenAI, -0.1, "use a value in [0, 2]"},
		{"openai NaN", OpenAI, math.NaN(), "use a value in [0, 2]"},
		{"anthropic zero", Anthropic, 0, ""},
		{"anthropic one", Anthropic, 1, ""},
		{"anthropic above one", Anthropic, 1.5, "use a value in [0, 1]"},
		{"anthropic two", Anthropic, 2, "use a value in [0, 1]"},
		{"anthropic negative", Anthropic, -1, "use a value in [0, 1]"},
		{"anthropic infinite", Anthropic, math.Inf(1), "use a value in [0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest(tc.provider)
			temp := tc.temp
			r.Temperature = &temp
			err := r.Validate()
			if tc.fix == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidRequestError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "request.temperature", ie.Field)
			require.Equal(t, "is out of range for "+tc.provider, ie.Problem)
			require.Contains(t, ie.Fix, tc.fix)
		})
	}
	t.Run("a fallback to anthropic rechecks the range", func(t *testing.T) {
		temp := 1.5
		r := validRequest(OpenAI)
		r.Temperature = &temp
		require.NoError(t, r.Validate())
		_, err := r.WithModel(Anthropic, "claude-haiku-4-5").QuotaCharge()
		var ie *InvalidRequestError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "request.temperature", ie.Field)
		require.Contains(t, err.Error(), "[0, 1]")
	})
}

func TestQuotaUsage(t *testing.T) {
	r := Response{Usage: Usage{InputTokens: 30, OutputTokens: 12}}
	require.Equal(t, quota.Cost{Requests: 1, Tokens: 42, InputTokens: 30, OutputTokens: 12}, r.QuotaUsage())

	// OpenAI's tokens-per-minute limit keeps its up-front estimate.
	r.RateLimitTokens = 100
	require.Equal(t, quota.Cost{Requests: 1, Tokens: 100, InputTokens: 30, OutputTokens: 12}, r.QuotaUsage())
}

func TestWithModel(t *testing.T) {
	temp := 0.5
	r := validRequest(OpenAI)
	r.Temperature = &temp
	fb := r.WithModel(Anthropic, "claude-haiku-4-5")
	require.Equal(t, Anthropic, fb.Provider)
	require.Equal(t, "claude-haiku-4-5", fb.Model)
	require.Equal(t, r.Messages, fb.Messages)
	require.Equal(t, r.Tenant, fb.Tenant)
	fb.Messages[0].Content = "changed"
	*fb.Temperature = 1
	require.Equal(t, "hello world!", r.Messages[0].Content, "the original is untouched")
	require.Equal(t, 0.5, *r.Temperature)
	require.Equal(t, OpenAI, r.Provider)
}

func TestJSONShape(t *testing.T) {
	temp := 0.2
	r := validRequest(Anthropic)
	r.Temperature = &temp
	r.Priority = quota.Low
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"provider": "anthropic", "account": "acct", "model": "m", "system": "be brief",
		"messages": [{"role": "user", "content": "hello world!"}],
		"max_output_tokens": 100, "temperature": 0.2, "tenant": "t1", "priority": -1
	}`, string(b))
	var back Request
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, r, back)

	resp := Response{Text: "hi", FinishReason: "end_turn", Usage: Usage{InputTokens: 1, OutputTokens: 2}, Provider: Anthropic, Model: "m", RequestID: "req_1"}
	b, err = json.Marshal(resp)
	require.NoError(t, err)
	require.JSONEq(t, `{"text": "hi", "finish_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 2},
		"provider": "anthropic", "model": "m", "request_id": "req_1"}`, string(b))
}
