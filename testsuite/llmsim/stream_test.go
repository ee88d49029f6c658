package llmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
)

// sse is one received server-sent event.
type sse struct {
	name string
	data string
}

// json decodes the event's data.
func (e sse) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.data), &m), "data: %s", e.data)
	return m
}

// streamed is a streamed answer as a test sees it: the status, headers,
// events, and the error that ended the body, if any.
type streamReply struct {
	status int
	header http.Header
	events []sse
	err    error
}

// names lists the events' names.
func (r streamReply) names() []string {
	var names []string
	for _, e := range r.events {
		names = append(names, e.name)
	}
	return names
}

// stream posts body with stream: true and reads the events until the body
// ends.
func (f *fixture) stream(t *testing.T, ctx context.Context, provider string, body map[string]any) streamReply {
	t.Helper()
	body["stream"] = true
	path, headers := "/v1/chat/completions", map[string]string{"Authorization": "Bearer k"}
	if provider == Anthropic {
		path, headers = "/v1/messages", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("content-type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := streamReply{status: resp.StatusCode, header: resp.Header}
	sc := bufio.NewScanner(resp.Body)
	var cur sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				r.events = append(r.events, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	r.err = sc.Err()
	return r
}

func openAIBody(model, prompt string, maxTokens int64, includeUsage bool) map[string]any {
	b := map[string]any{"model": model, "max_completion_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": prompt}}}
	if includeUsage {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

func anthropicBody(model, prompt string, maxTokens int64) map[string]any {
	return map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": prompt}}}
}

var streamModels = []Model{
	{Provider: OpenAI, Name: "gpt-4o", RequestsPerMinute: 1000, TokensPerMinute: 1_000_000},
	{Provider: Anthropic, Name: "claude-sonnet-4-5", RequestsPerMinute: 1000, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000},
}

// An OpenAI stream is chunks of the non-streamed answer, a finish chunk,
// a usage chunk with empty choices when asked for, and [DONE].
func TestStreamOpenAIChunksEndWithTheUsage(t *testing.T) {
	f := newFixture(t, Config{Models: streamModels})
	prompt := strings.Repeat("plan a trip to Lisbon ", 4)
	whole := f.openai(t, "k", "gpt-4o", prompt, 500)
	wantText := whole.body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	wantUsage := whole.body["usage"].(map[string]any)

	r := f.stream(t, context.Background(), OpenAI, openAIBody("gpt-4o", prompt, 500, true))
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	require.True(t, strings.HasPrefix(r.header.Get("content-type"), "text/event-stream"))
	require.NotEmpty(t, r.header.Get("x-request-id"))
	require.NotEmpty(t, r.header.Get("x-ratelimit-remaining-requests"), "the limit headers come with the stream")

	n := len(r.events)
	require.Equal(t, "[DONE]", r.events[n-1].data)
	first := r.events[0].json(t)
	require.Equal(t, "chat.completion.chunk", first["object"])
	require.Equal(t, "assistant", first["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["role"])
	var text strings.Builder
	for _, e := range r.events[1 : n-3] {
		c := e.json(t)
		require.Nil(t, c["usage"], "usage is null until the last chunk")
		text.WriteString(c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"].(string))
	}
	require.Equal(t, wantText, text.String())
	require.Greater(t, n-4, 1, "the answer comes in several deltas")
	finish := r.events[n-3].json(t)
	require.Equal(t, "stop", finish["choices"].([]any)[0].(map[string]any)["finish_reason"])
	last := r.events[n-2].json(t)
	require.Empty(t, last["choices"])
	require.Equal(t, wantUsage, last["usage"])

	t.Run("without include_usage no usage is sent", func(t *testing.T) {
		r := f.stream(t, context.Background(), OpenAI, openAIBody("gpt-4o", prompt, 500, false))
		require.NoError(t, r.err)
		for _, e := range r.events[:len(r.events)-1] {
			_, has := e.json(t)["usage"]
			require.False(t, has)
		}
		require.Equal(t, "stop", r.events[len(r.events)-2].json(t)["choices"].([]any)[0].(map[string]any)["finish_reason"])
	})
	t.Run("stream_options without stream is refused", func(t *testing.T) {
		body := openAIBody("gpt-4o", prompt, 500, true)
		r := f.post(t, "/v1/chat/completions", map[string]string{"Authorization": "Bearer k"}, body)
		require.Equal(t, http.StatusBadRequest, r.status)
		require.Equal(t, "stream_options", r.body["error"].(map[string]any)["param"])
	})
}

// An Anthropic stream has the Messages API's event names, the input tokens
// in message_start and the final output tokens in message_delta.
func TestStreamAnthropicEventNamesAndFinalUsage(t *testing.T) {
	f := newFixture(t, Config{Models: streamModels})
	prompt := strings.Repeat("summarise the report ", 4)
	whole := f.anthropic(t, "k", "claude-sonnet-4-5", prompt, 500)
	usage := whole.body["usage"].(map[string]any)

	r := f.stream(t, context.Background(), Anthropic, anthropicBody("claude-sonnet-4-5", prompt, 500))
	require.NoError(t, r.err)
	names := r.names()
	deltas := len(names) - 6
	require.Greater(t, deltas, 1)
	want := append([]string{"message_start", "content_block_start", "ping"}, slicesRepeat("content_block_delta", deltas)...)
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	require.Equal(t, want, names)
	for _, e := range r.events {
		require.Equal(t, e.name, e.json(t)["type"], "each event's data names its type")
	}
	start := r.events[0].json(t)["message"].(map[string]any)
	require.Equal(t, usage["input_tokens"], start["usage"].(map[string]any)["input_tokens"])
	var text strings.Builder
	for _, e := range r.events[3 : 3+deltas] {
		text.WriteString(e.json(t)["delta"].(map[string]any)["text"].(string))
	}
	require.Equal(t, whole.body["content"].([]any)[0].(map[string]any)["text"], text.String())
	delta := r.events[len(names)-2].json(t)
	require.Equal(t, "end_turn", delta["delta"].(map[string]any)["stop_reason"])
	require.Equal(t, usage["output_tokens"], delta["usage"].(map[string]any)["output_tokens"])
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The official SDKs' streaming APIs assemble the same message as their
// non-streaming ones.
func TestStreamThroughTheOfficialSDKs(t *testing.T) {
	f := newFixture(t, Config{Models: streamModels})
	ctx := context.Background()
	t.Run("openai", func(t *testing.T) {
		c := openai.NewClient(openaioption.WithBaseURL(f.srv.URL+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{
			Model:               "gpt-4o",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write a long essay about the sea.")},
			MaxCompletionTokens: openai.Int(8),
		}
		whole, err := c.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			require.True(t, acc.AddChunk(s.Current()))
		}
		require.NoError(t, s.Err())
		require.Equal(t, whole.Choices[0].Message.Content, acc.Choices[0].Message.Content)
		require.Equal(t, "length", acc.Choices[0].FinishReason, "cut at max_tokens")
		require.Equal(t, whole.Usage.PromptTokens, acc.Usage.PromptTokens)
		require.Equal(t, whole.Usage.CompletionTokens, acc.Usage.CompletionTokens)
	})
	t.Run("anthropic", func(t *testing.T) {
		c := anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(f.srv.URL),
			anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		params := anthropic.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 500,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Write a long essay about the sea."))},
		}
		whole, err := c.Messages.New(ctx, params)
		require.NoError(t, err)
		s := c.Messages.NewStreaming(ctx, params)
		var msg anthropic.Message
		for s.Next() {
			require.NoError(t, msg.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err())
		require.Equal(t, whole.Content[0].Text, msg.Content[0].Text)
		require.Equal(t, whole.StopReason, msg.StopReason)
		require.Equal(t, whole.Usage.InputTokens, msg.Usage.InputTokens)
		require.Equal(t, whole.Usage.OutputTokens, msg.Usage.OutputTokens)
	})
}

// A mid-stream error arrives after the deltas let through, as the
// provider's error event, and ends the stream.
func TestStreamMidStreamErrorEvents(t *testing.T) {
	for _, tc := range []struct {
		provider string
		kind     FaultKind
		field    string
		want     string
	}{
		{Anthropic, FaultOverload, "error.type", "overloaded_error"},
		{Anthropic, FaultRateLimit, "error.type", "rate_limit_error"},
		{Anthropic, FaultSpendCap, "error.details.error_code", "enforced_spend_limit_reached"},
		{OpenAI, FaultServerError, "error.type", "server_error"},
		{OpenAI, FaultSpendCap, "error.code", "insufficient_quota"},
	} {
		t.Run(tc.provider+" "+string(tc.kind), func(t *testing.T) {
			f := newFixture(t, Config{Models: streamModels})
			require.NoError(t, f.sim.Inject(Fault{Kind: tc.kind, MidStream: true, AfterChunks: 2, Times: 1}))
			body := anthropicBody("claude-sonnet-4-5", "tell me a story", 500)
			if tc.provider == OpenAI {
				body = openAIBody("gpt-4o", "tell me a story", 500, true)
			}
			r := f.stream(t, context.Background(), tc.provider, body)
			require.NoError(t, r.err)
			require.Equal(t, http.StatusOK, r.status, "the stream was accepted before the error")
			last := r.events[len(r.events)-1]
			if tc.provider == Anthropic {
				require.Equal(t, "error", last.name)
				require.Equal(t, []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "error"}, r.names())
			} else {
				require.Len(t, r.events, 4, "role chunk, two deltas, the error")
			}
			require.Equal(t, tc.want, reply{body: last.json(t)}.str(tc.field))

			again := f.stream(t, context.Background(), tc.provider, body)
			require.NotEqual(t, "error", again.events[len(again.events)-1].name, "the rule is spent")
			require.EqualValues(t, 2, f.sim.Stats("").Accepted)
		})
	}
	t.Run("a non-streamed call does not spend the rule", func(t *testing.T) {
		f := newFixture(t, Config{Models: streamModels})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultOverload, MidStream: true, Times: 1}))
		require.Equal(t, http.StatusOK, f.anthropic(t, "k", "claude-sonnet-4-5", "x", 10).status)
		r := f.stream(t, context.Background(), Anthropic, anthropicBody("claude-sonnet-4-5", "x", 10))
		require.Equal(t, "error", r.events[len(r.events)-1].name)
	})
	t.Run("an overload before the stream is an HTTP answer with retry-after", func(t *testing.T) {
		f := newFixture(t, Config{Models: streamModels})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultOverload, Times: 1, RetryAfter: 2 * time.Second}))
		r := f.stream(t, context.Background(), Anthropic, anthropicBody("claude-sonnet-4-5", "x", 10))
		require.Equal(t, 529, r.status)
		require.Equal(t, "2", r.header.Get("retry-after"))
	})
}

// A stall holds the stream silent for its duration, then finishes it; a
// caller that gives up ends it early. A disconnect cuts the body short.
func TestStreamStallAndDisconnect(t *testing.T) {
	t.Run("stall", func(t *testing.T) {
		f := newFixture(t, Config{Models: streamModels})
		const stall = 300 * time.Millisecond
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultStall, AfterChunks: 1, Stall: stall, Times: 1}))
		start := time.Now()
		r := f.stream(t, context.Background(), Anthropic, anthropicBody("claude-sonnet-4-5", "tell me a story", 500))
		require.NoError(t, r.err)
		require.GreaterOrEqual(t, time.Since(start), stall, "the stream waited out its stall")
		require.Equal(t, "message_stop", r.names()[len(r.events)-1], "and then finished")
	})
	t.Run("a caller that gives up ends the stall", func(t *testing.T) {
		f := newFixture(t, Config{Models: streamModels})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultStall, AfterChunks: 1, Stall: time.Hour, Times: 1}))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		r := f.stream(t, ctx, OpenAI, openAIBody("gpt-4o", "tell me a story", 500, true))
		require.ErrorIs(t, r.err, context.DeadlineExceeded)
		require.Len(t, r.events, 2, "the role chunk and one delta came before the stall")
	})
	t.Run("disconnect", func(t *testing.T) {
		f := newFixture(t, Config{Models: streamModels})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultDisconnect, AfterChunks: 2, Times: 1}))
		r := f.stream(t, context.Background(), Anthropic, anthropicBody("claude-sonnet-4-5", "tell me a story", 500))
		require.True(t, errors.Is(r.err, io.ErrUnexpectedEOF), "got %v", r.err)
		require.Equal(t, []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta"}, r.names())
	})
}

// Mid-stream fault fields are checked like the others: the error names the
// field and the fix.
func TestStreamFaultErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault Fault
		field string
	}{
		{"stall without a duration", Fault{Kind: FaultStall}, "faults[0].stall"},
		{"stall on another kind", Fault{Kind: FaultOverload, MidStream: true, Stall: time.Second}, "faults[0].stall"},
		{"after_chunks on an outright refusal", Fault{Kind: FaultOverload, AfterChunks: 3}, "faults[0].after_chunks"},
		{"negative after_chunks", Fault{Kind: FaultDisconnect, AfterChunks: -1}, "faults[0].after_chunks"},
		{"retry-after inside a stream", Fault{Kind: FaultOverload, MidStream: true, RetryAfter: time.Second}, "faults[0].retry_after"},
		{"status inside a stream", Fault{Kind: FaultOverload, MidStream: true, Status: 503}, "faults[0].status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Models: streamModels, Faults: []Fault{tc.fault}})
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
			require.NotEmpty(t, ce.Fix)
		})
	}
	_, err := ParseConfig([]byte(`{models: [{provider: anthropic, name: c}], faults: [{kind: stall, stall: 30s, after_chunks: 2}, {kind: overload, mid_stream: true}]}`))
	require.NoError(t, err, "mid-stream faults load from a config file")
}
