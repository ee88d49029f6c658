package llmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)

// reply is one answer as a test sees it.
type reply struct {
	status int
	header http.Header
	body   map[string]any
}

// str digs a string out of a decoded JSON body by path ("error.type").
func (r reply) str(path string) string {
	var v any = r.body
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

type fixture struct {
	sim   *Sim
	srv   *httptest.Server
	clock *ManualClock
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	clock := NewManualClock(epoch)
	sim, err := New(cfg, WithClock(clock))
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return &fixture{sim: sim, srv: srv, clock: clock}
}

// openai sends a Chat Completions call with prompt and max_tokens (0: none).
func (f *fixture) openai(t *testing.T, key, model, prompt string, maxTokens int64) reply {
	t.Helper()
	body := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": prompt}}}
	if maxTokens > 0 {
		body["max_completion_tokens"] = maxTokens
	}
	return f.post(t, "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + key}, body)
}

// anthropic sends a Messages call.
func (f *fixture) anthropic(t *testing.T, key, model, prompt string, maxTokens int64) reply {
	t.Helper()
	body := map[string]any{
		"model": model, "max_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}},
	}
	return f.post(t, "/v1/messages", map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}, body)
}

func (f *fixture) post(t *testing.T, path string, headers map[string]string, body any) reply {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("content-type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, header: resp.Header}
	require.NoError(t, json.Unmarshal(raw, &r.body), "body: %s", raw)
	return r
}

func TestSuccessBodies(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{
		{Provider: OpenAI, Name: "gpt-4o"},
		{Provider: Anthropic, Name: "claude-sonnet-4-5"},
	}})
	t.Run("openai", func(t *testing.T) {
		r := f.openai(t, "k", "gpt-4o", "abcdefgh", 100) // 8 chars → 2 tokens
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "chat.completion", r.str("object"))
		require.Equal(t, "gpt-4o", r.str("model"))
		require.True(t, strings.HasPrefix(r.str("id"), "chatcmpl-"))
		require.NotEmpty(t, r.header.Get("x-request-id"))
		choice := r.body["choices"].([]any)[0].(map[string]any)
		require.Equal(t, "stop", choice["finish_reason"])
		text := choice["message"].(map[string]any)["content"].(string)
		require.Contains(t, text, "abcdefgh")
		usage := r.body["usage"].(map[string]any)
		require.EqualValues(t, 2, usage["prompt_tokens"])
		require.EqualValues(t, (runeCount(text)+3)/4, usage["completion_tokens"])
		again := f.openai(t, "k", "gpt-4o", "abcdefgh", 100)
		require.Equal(t, text, again.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"], "answers are deterministic")
	})
	t.Run("anthropic", func(t *testing.T) {
		r := f.anthropic(t, "k", "claude-sonnet-4-5", "hello", 100) // 5 chars → 2 tokens
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "message", r.str("type"))
		require.Equal(t, "end_turn", r.str("stop_reason"))
		require.True(t, strings.HasPrefix(r.str("id"), "msg_"))
		require.NotEmpty(t, r.header.Get("request-id"))
		require.EqualValues(t, 2, r.body["usage"].(map[string]any)["input_tokens"])
	})
	t.Run("truncated at max tokens", func(t *testing.T) {
		r := f.anthropic(t, "k", "claude-sonnet-4-5", strings.Repeat("x", 400), 3)
		require.Equal(t, "max_tokens", r.str("stop_reason"))
		require.EqualValues(t, 3, r.body["usage"].(map[string]any)["output_tokens"])
		o := f.openai(t, "k", "gpt-4o", strings.Repeat("x", 400), 3)
		require.Equal(t, "length", o.body["choices"].([]any)[0].(map[string]any)["finish_reason"])
		require.EqualValues(t, 3, o.body["usage"].(map[string]any)["completion_tokens"])
	})
}

func TestRequestErrors(t *testing.T) {
	f := newFixture(t, Config{
		Models: []Model{
			{Provider: OpenAI, Name: "gpt-4o", ContextWindow: 100},
			{Provider: Anthropic, Name: "claude-haiku-4-5", ContextWindow: 100},
		},
		Accounts: []Account{{Name: "a", APIKey: "sk-good"}},
	})
	long := strings.Repeat("y", 400) // 100 tokens
	for _, tc := range []struct {
		name   string
		send   func(t *testing.T) reply
		status int
		field  string
		want   string
	}{
		{"openai missing key", func(t *testing.T) reply { return f.openai(t, "", "gpt-4o", "hi", 10) }, 401, "error.code", "invalid_api_key"},
		{"openai wrong key", func(t *testing.T) reply { return f.openai(t, "sk-bad", "gpt-4o", "hi", 10) }, 401, "error.code", "invalid_api_key"},
		{"openai unknown model", func(t *testing.T) reply { return f.openai(t, "sk-good", "gpt-9", "hi", 10) }, 404, "error.code", "model_not_found"},
		{"openai context too long", func(t *testing.T) reply { return f.openai(t, "sk-good", "gpt-4o", long, 10) }, 400, "error.code", "context_length_exceeded"},
		{"anthropic wrong key", func(t *testing.T) reply { return f.anthropic(t, "sk-bad", "claude-haiku-4-5", "hi", 10) }, 401, "error.type", "authentication_error"},
		{"anthropic unknown model", func(t *testing.T) reply { return f.anthropic(t, "sk-good", "claude-9", "hi", 10) }, 404, "error.type", "not_found_error"},
		{"anthropic context too long", func(t *testing.T) reply { return f.anthropic(t, "sk-good", "claude-haiku-4-5", long, 10) }, 400, "error.type", "invalid_request_error"},
		{"anthropic missing max_tokens", func(t *testing.T) reply {
			return f.post(t, "/v1/messages", map[string]string{"x-api-key": "sk-good"},
				map[string]any{"model": "claude-haiku-4-5", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		}, 400, "error.message", "max_tokens: Field required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.send(t)
			require.Equal(t, tc.status, r.status)
			require.Equal(t, tc.want, r.str(tc.field))
			require.NotContains(t, r.str("error.message"), "sk-bad", "errors never echo the key")
		})
	}
	t.Run("anthropic error envelope", func(t *testing.T) {
		r := f.anthropic(t, "sk-bad", "claude-haiku-4-5", "hi", 10)
		require.Equal(t, "error", r.str("type"))
		require.Equal(t, r.header.Get("request-id"), r.str("request_id"))
	})
	t.Run("openai error envelope", func(t *testing.T) {
		r := f.openai(t, "sk-good", "gpt-9", "hi", 10)
		e := r.body["error"].(map[string]any)
		require.Contains(t, e, "param")
		require.Nil(t, e["param"])
		require.Equal(t, "invalid_request_error", e["type"])
	})
}

func TestServeStandalone(t *testing.T) {
	sim, err := New(Config{Models: []Model{{Provider: OpenAI, Name: "gpt-4o"}}})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, l) }()

	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}
