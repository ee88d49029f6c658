package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// bodies is a transport that records whether each request asked to
// stream.
type bodies struct {
	mu      sync.Mutex
	streams []bool
	next    http.RoundTripper
}

func (b *bodies) RoundTrip(r *http.Request) (*http.Response, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(raw, &body)
	b.mu.Lock()
	b.streams = append(b.streams, body.Stream)
	b.mu.Unlock()
	return b.next.RoundTrip(r)
}

// sent returns whether each request so far streamed.
func (b *bodies) sent() []bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bool(nil), b.streams...)
}

// streamFixture is llmsim (on the real clock: streams stall in real time)
// and Activities configured as a worker is by default: no request timeout.
type streamFixture struct {
	sim    *llmsim.Sim
	url    string
	acts   *Activities
	bodies *bodies
}

func newStreamFixture(t *testing.T) *streamFixture {
	t.Helper()
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{
		{Provider: llmsim.OpenAI, Name: "gpt-4o", RequestsPerMinute: 1000, TokensPerMinute: 1_000_000},
		{Provider: llmsim.Anthropic, Name: "claude-sonnet-4-5", RequestsPerMinute: 1000, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000, ContextWindow: 200_000},
		{Provider: llmsim.Anthropic, Name: "claude-opus-4-20250514", RequestsPerMinute: 1000},
	}})
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	f := &streamFixture{sim: sim, url: srv.URL, bodies: &bodies{next: srv.Client().Transport}}
	f.acts = f.activities(t, 0)
	return f
}

// activities returns Activities on the fixture's sim and transport, with
// the given Anthropic request timeout (0: none).
func (f *streamFixture) activities(t *testing.T, anthropicTimeout time.Duration) *Activities {
	t.Helper()
	hc := &http.Client{Transport: f.bodies}
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: testKey, BaseURL: f.url + "/v1/", HTTPClient: hc},
		Anthropic: ProviderConfig{APIKey: testKey, BaseURL: f.url, HTTPClient: hc, Timeout: anthropicTimeout},
	})
	require.NoError(t, err)
	return acts
}

func streamChat(provider, model, prompt string, maxTokens int64) Request {
	return Request{Provider: provider, Model: model, System: "You are terse.",
		Messages: []Message{{Role: RoleUser, Content: prompt}}, MaxOutputTokens: maxTokens}
}

// An Anthropic call with max_tokens 32,000, which anthropic-sdk-go refuses
// to send without streaming, streams and succeeds; so does one past a
// model's own non-streaming limit. A configured request timeout lifts the
// SDK's refusal, and then the call does not stream.
func TestStreamAnthropicMaxTokens32000Succeeds(t *testing.T) {
	f := newStreamFixture(t)
	ctx := context.Background()
	req := streamChat(Anthropic, "claude-sonnet-4-5", "Write the whole design document.", 32000)

	// The premise: the SDK itself refuses the non-streaming call, before
	// sending anything.
	_, err := f.acts.anthropic.Messages.New(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model(req.Model), MaxTokens: req.MaxOutputTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
	})
	require.ErrorContains(t, err, "streaming is required")
	require.Empty(t, f.bodies.sent())

	resp, err := f.acts.Complete(ctx, req)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, f.bodies.sent(), "streaming was chosen: Request.Stream is false")
	require.Equal(t, "end_turn", resp.FinishReason)
	require.Contains(t, resp.Text, "Write the whole design document.")
	require.Equal(t, EstimateTokens(req.Characters()), resp.Usage.InputTokens)
	require.Positive(t, resp.Usage.OutputTokens)

	short := req
	short.MaxOutputTokens = 1000
	whole, err := f.acts.Complete(ctx, short)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, f.bodies.sent(), "1,000 tokens need no stream")
	whole.RequestID = resp.RequestID
	require.Equal(t, whole, resp, "the streamed answer is the one a non-streaming call gets")

	t.Run("past a model's non-streaming limit", func(t *testing.T) {
		opus := streamChat(Anthropic, "claude-opus-4-20250514", "x", 10_000) // under 21,333; over Opus 4's 8,192
		before := len(f.bodies.sent())
		_, err := f.acts.Complete(ctx, opus)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, f.bodies.sent()[before:])
	})
	t.Run("a configured request timeout lifts the refusal", func(t *testing.T) {
		acts := f.activities(t, 20*time.Minute)
		before := len(f.bodies.sent())
		_, err := acts.Complete(ctx, req)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, f.bodies.sent()[before:])
	})
}

// Request.Stream streams either provider, and the Response is the one the
// non-streaming call returns (but for the request id).
func TestStreamResponseIsTheNonStreamingOne(t *testing.T) {
	f := newStreamFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"openai", streamChat(OpenAI, "gpt-4o", "Compare three token bucket designs in detail.", 500)},
		{"openai cut at max_tokens", streamChat(OpenAI, "gpt-4o", "Compare three token bucket designs in detail.", 5)},
		{"anthropic", streamChat(Anthropic, "claude-sonnet-4-5", "Compare three token bucket designs in detail.", 500)},
		{"anthropic cut at max_tokens", streamChat(Anthropic, "claude-sonnet-4-5", "Compare three token bucket designs in detail.", 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := f.acts.Complete(ctx, tc.req)
			require.NoError(t, err)
			streamed := tc.req
			streamed.Stream = true
			before := len(f.bodies.sent())
			got, err := f.acts.Complete(ctx, streamed)
			require.NoError(t, err)
			require.Equal(t, []bool{true}, f.bodies.sent()[before:])
			require.NotEmpty(t, got.RequestID)
			whole.RequestID = got.RequestID
			require.Equal(t, whole, got)
			require.Equal(t, whole.QuotaUsage(), got.QuotaUsage())
		})
	}
}

// Errors inside a stream come back as a *StreamError that wraps the SDK's
// error (classified like its HTTP twin) and carries the usage so far.
func TestStreamErrorsKeepTheirClassAndTheUsageSoFar(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		provider string
		fault    llmsim.Fault
		class    classify.Class
		sdkError bool
	}{
		{"anthropic overloaded_error", Anthropic, llmsim.Fault{Kind: llmsim.FaultOverload, MidStream: true, AfterChunks: 2}, classify.Overloaded, true},
		{"anthropic rate_limit_error", Anthropic, llmsim.Fault{Kind: llmsim.FaultRateLimit, MidStream: true, AfterChunks: 2}, classify.RateLimited, true},
		{"anthropic spend cap", Anthropic, llmsim.Fault{Kind: llmsim.FaultSpendCap, MidStream: true, AfterChunks: 2}, classify.SpendCap, true},
		{"anthropic dropped connection", Anthropic, llmsim.Fault{Kind: llmsim.FaultDisconnect, AfterChunks: 2}, classify.Transient, false},
		{"openai server_error", OpenAI, llmsim.Fault{Kind: llmsim.FaultServerError, MidStream: true, AfterChunks: 2}, classify.Transient, false},
		{"openai insufficient_quota", OpenAI, llmsim.Fault{Kind: llmsim.FaultSpendCap, MidStream: true, AfterChunks: 2}, classify.SpendCap, false},
		{"openai dropped connection", OpenAI, llmsim.Fault{Kind: llmsim.FaultDisconnect, AfterChunks: 2}, classify.Transient, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStreamFixture(t)
			tc.fault.Times = 1
			require.NoError(t, f.sim.Inject(tc.fault))
			model := "gpt-4o"
			if tc.provider == Anthropic {
				model = "claude-sonnet-4-5"
			}
			req := streamChat(tc.provider, model, "Tell me a long story about a lighthouse keeper.", 500)
			req.Stream = true
			_, err := f.acts.Complete(ctx, req)
			require.Error(t, err)
			var se *StreamError
			require.ErrorAs(t, err, &se)
			t.Logf("%v", err)
			if tc.sdkError {
				var ae *anthropic.Error
				require.ErrorAs(t, err, &ae, "errors.As still finds the SDK's error")
			}
			require.Equal(t, tc.class, classify.Error(err, time.Now()).Class)

			require.Equal(t, EstimateTokens(req.Characters()), se.Usage.InputTokens)
			require.EqualValues(t, 8, se.Usage.OutputTokens, "two deltas of 16 characters")
			u := se.QuotaUsage()
			require.EqualValues(t, 1, u.Requests)
			if tc.provider == OpenAI {
				require.Equal(t, EstimateOpenAI(req.Characters(), req.MaxOutputTokens).Tokens, u.Tokens, "OpenAI counted its estimate")
			} else {
				require.Equal(t, se.Usage.InputTokens+se.Usage.OutputTokens, u.Tokens)
			}
		})
	}
	t.Run("an error answer before the stream is the HTTP error", func(t *testing.T) {
		f := newStreamFixture(t)
		require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload, Times: 1, RetryAfter: 3 * time.Second}))
		req := streamChat(Anthropic, "claude-sonnet-4-5", "x", 50)
		req.Stream = true
		_, err := f.acts.Complete(ctx, req)
		var se *StreamError
		require.False(t, errors.As(err, &se), "nothing was streamed")
		v := classify.Error(err, time.Now())
		require.Equal(t, classify.Overloaded, v.Class)
		require.Equal(t, 3*time.Second, v.RetryAfter)
	})
	t.Run("a caller that gives up", func(t *testing.T) {
		f := newStreamFixture(t)
		require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultStall, Stall: time.Hour, AfterChunks: 1, Times: 1}))
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, cancel)
		req := streamChat(Anthropic, "claude-sonnet-4-5", "Tell me a long story.", 500)
		req.Stream = true
		_, err := f.acts.Complete(ctx, req)
		var se *StreamError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, classify.Canceled, classify.Error(err, time.Now()).Class)
		require.EqualValues(t, 4, se.Usage.OutputTokens, "one delta of 16 characters")
	})
}

// streamOnce is a workflow that runs one Complete with a heartbeat timeout
// and no retries, so a test sees the attempt's own error.
func streamOnce(ctx workflow.Context, req Request, heartbeat time.Duration) (Response, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var resp Response
	err := workflow.ExecuteActivity(ctx, CompleteActivity, req).Get(ctx, &resp)
	return resp, err
}

// A stream silent for longer than the activity's HeartbeatTimeout is cut
// there, long before its StartToClose, with a *StallError that classify
// counts as transient; while it was alive, the activity heartbeated the
// tokens so far.
func TestStreamStallIsCutAtTheHeartbeatTimeout(t *testing.T) {
	f := newStreamFixture(t)
	require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultStall, Stall: time.Hour, AfterChunks: 3, Times: 1}))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env, f.acts)
	env.RegisterWorkflow(streamOnce)
	var (
		mu    sync.Mutex
		beats []Progress
	)
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p Progress
		if details.HasValues() && details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	req := streamChat(Anthropic, "claude-sonnet-4-5", "Tell me a long story about a lighthouse keeper.", 500)
	req.Stream = true
	env.ExecuteWorkflow(streamOnce, req, 2*time.Second)
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.ErrorContains(t, err, "the stream sent nothing for 2s")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, "StreamError", appErr.Type(), "a *StreamError, which wraps the *StallError")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, beats)
	last := beats[len(beats)-1]
	require.EqualValues(t, 12, last.OutputTokens, "three deltas of 16 characters")
	require.EqualValues(t, 5, last.Events, "message_start, content_block_start, three deltas (the SDK keeps pings to itself)")
	for i := 1; i < len(beats); i++ {
		require.GreaterOrEqual(t, beats[i].OutputTokens, beats[i-1].OutputTokens, "tokens so far never go back")
	}
}
