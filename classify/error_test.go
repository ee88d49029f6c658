package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/internal/testnet"
)

// serve starts a server that answers every request with status, header and
// body.
func serve(t *testing.T, status int, header http.Header, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// openAIError runs the official OpenAI SDK against url and returns its error.
func openAIError(t *testing.T, url string) error {
	t.Helper()
	client := openai.NewClient(
		openaioption.WithBaseURL(url+"/v1"),
		openaioption.WithAPIKey("sk-test"),
		openaioption.WithMaxRetries(0),
	)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.Error(t, err)
	return err
}

// anthropicError runs the official Anthropic SDK against url and returns its
// error.
func anthropicError(t *testing.T, url string) error {
	t.Helper()
	client := anthropic.NewClient(
		anthropicoption.WithBaseURL(url),
		anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithMaxRetries(0),
	)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	require.Error(t, err)
	return err
}

// sdkCase is one answer served to an official SDK and the verdict its
// error must get.
type sdkCase struct {
	name   string
	status int
	header http.Header
	body   string

	class         classify.Class
	retryable     bool
	retryAfter    time.Duration
	hasRetryAfter bool
	code          string
	resetAt       time.Time
	limits        int
}

// check classifies err, wrapped as an activity would, against tc.
func (tc sdkCase) check(t *testing.T, err error) {
	t.Helper()
	v := classify.Error(fmt.Errorf("activity: %w", err), now)
	require.Equal(t, tc.class, v.Class)
	require.Equal(t, tc.retryable, v.Retryable)
	require.Equal(t, tc.hasRetryAfter, v.HasRetryAfter)
	require.Equal(t, tc.retryAfter, v.RetryAfter)
	require.Equal(t, tc.code, v.Code)
	require.Equal(t, tc.resetAt, v.ResetAt)
	require.Equal(t, tc.status, v.Status)
	require.Len(t, v.Limits, tc.limits)
	require.NotContains(t, v.Reason, "sk-")
}

func TestErrorFromOpenAISDK(t *testing.T) {
	limits := hdr("X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "12ms")
	for _, tc := range []sdkCase{
		{
			name: "rate limited", status: 429,
			header: mergeHeaders(limits, hdr("Retry-After", "2")),
			body:   payload(openAICases, "openai/429 rate_limit_exceeded with retry-after"),
			class:  classify.RateLimited, retryable: true, retryAfter: 2 * time.Second, hasRetryAfter: true, code: "rate_limit_exceeded", limits: 1,
		},
		{
			name: "project spend limit", status: 429,
			body:  payload(openAICases, "openai/429 project_spend_limit_exceeded"),
			class: classify.SpendCap, code: "project_spend_limit_exceeded", resetAt: nextMonth,
		},
		{
			name: "context too long", status: 400,
			body:  payload(openAICases, "openai/400 context_length_exceeded"),
			class: classify.ContextTooLong, code: "context_length_exceeded",
		},
		{
			name: "overloaded", status: 503,
			header: hdr("Retry-After-Ms", "750"),
			body:   payload(openAICases, "openai/503 server_is_overloaded"),
			class:  classify.Overloaded, retryable: true, retryAfter: 750 * time.Millisecond, hasRetryAfter: true, code: "server_is_overloaded",
		},
		{
			name: "auth", status: 401,
			body:  payload(openAICases, "openai/401 invalid_api_key"),
			class: classify.Auth, code: "invalid_api_key",
		},
		{
			name: "html bad gateway", status: 502,
			body:  "<html><body>502 Bad Gateway</body></html>",
			class: classify.Transient, retryable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := openAIError(t, serve(t, tc.status, tc.header, tc.body).URL)
			var oe *openai.Error
			require.ErrorAs(t, err, &oe, "the SDK's own error type")

			tc.check(t, err)
		})
	}
}

func TestErrorFromAnthropicSDK(t *testing.T) {
	limits := hdr("Anthropic-Ratelimit-Input-Tokens-Limit", "50000", "Anthropic-Ratelimit-Input-Tokens-Remaining", "0",
		"Anthropic-Ratelimit-Input-Tokens-Reset", now.Add(10*time.Second).Format(time.RFC3339))
	for _, tc := range []sdkCase{
		{
			name: "rate limited", status: 429,
			header: mergeHeaders(limits, hdr("Retry-After", "14")),
			body:   payload(anthropicCases, "anthropic/429 rate_limit_error"),
			class:  classify.RateLimited, retryable: true, retryAfter: 14 * time.Second, hasRetryAfter: true, code: "rate_limit_error", limits: 1,
		},
		{
			name: "tier spend cap", status: 429,
			body:  payload(anthropicCases, "anthropic/429 enforced_spend_limit_reached"),
			class: classify.SpendCap, code: "enforced_spend_limit_reached", resetAt: nextMonth,
		},
		{
			name: "spend limit the user set", status: 400,
			body:  payload(anthropicCases, "anthropic/400 workspace API usage limits with a mid-month date"),
			class: classify.SpendCap, code: "invalid_request_error", resetAt: time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC),
		},
		{
			name: "overloaded", status: 529,
			body:  payload(anthropicCases, "anthropic/529 overloaded_error"),
			class: classify.Overloaded, retryable: true, code: "overloaded_error",
		},
		{
			name: "prompt too long", status: 400,
			body:  payload(anthropicCases, "anthropic/400 prompt is too long"),
			class: classify.ContextTooLong, code: "invalid_request_error",
		},
		{
			name: "not found", status: 404,
			body:  payload(anthropicCases, "anthropic/404 not_found_error"),
			class: classify.NotFound, code: "not_found_error",
		},
		{
			name: "x-should-retry false on a 500", status: 500,
			header: hdr("X-Should-Retry", "false"),
			body:   payload(anthropicCases, "anthropic/500 api_error"),
			class:  classify.Transient, retryable: false, code: "api_error",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := anthropicError(t, serve(t, tc.status, tc.header, tc.body).URL)
			var ae *anthropic.Error
			require.ErrorAs(t, err, &ae, "the SDK's own error type")

			tc.check(t, err)
		})
	}
}

func TestErrorFromTransport(t *testing.T) {
	// A port nobody listens on: the SDK's error wraps a refused connection.
	closedURL := "http://" + testnet.FreeAddr(t)

	// A server that hangs up without answering.
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(hangUp.Close)

	for _, tc := range []struct {
		name  string
		err   func(t *testing.T) error
		class classify.Class
	}{
		{"openai connection refused", func(t *testing.T) error { return openAIError(t, closedURL) }, classify.Transient},
		{"anthropic connection refused", func(t *testing.T) error { return anthropicError(t, closedURL) }, classify.Transient},
		{"openai hang-up", func(t *testing.T) error { return openAIError(t, hangUp.URL) }, classify.Transient},
		{"anthropic hang-up", func(t *testing.T) error { return anthropicError(t, hangUp.URL) }, classify.Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify.Error(tc.err(t), now)
			require.Equal(t, tc.class, v.Class)
			require.True(t, v.Retryable)
			require.Zero(t, v.Status)
			require.NotContains(t, v.Reason, "127.0.0.1", "transport reasons are fixed phrases")
		})
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestErrorFromPlainErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		class     classify.Class
		retryable bool
	}{
		{"nil", nil, classify.OK, false},
		{"canceled", fmt.Errorf("call: %w", context.Canceled), classify.Canceled, false},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), classify.Transient, true},
		{"os deadline", os.ErrDeadlineExceeded, classify.Transient, true},
		{"net timeout", timeoutErr{}, classify.Transient, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, classify.Transient, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), classify.Transient, true},
		{"unexpected EOF", fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF), classify.Transient, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "api.example.com"}, classify.Transient, true},
		{"text rate limit", errors.New("provider: rate limit exceeded, slow down"), classify.RateLimited, true},
		{"text 429", errors.New("upstream answered 429 Too Many Requests"), classify.RateLimited, true},
		{"text 429 at the end", errors.New("status 429"), classify.RateLimited, true},
		{"text overloaded", errors.New("model overloaded"), classify.Overloaded, true},
		{"429 inside a number", errors.New("processed 14290 tokens"), classify.Unknown, false},
		{"anything else", errors.New("json: cannot unmarshal"), classify.Unknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify.Error(tc.err, now)
			require.Equal(t, tc.class, v.Class)
			require.Equal(t, tc.retryable, v.Retryable)
			require.Zero(t, v.Status)
			require.False(t, v.HasRetryAfter)
		})
	}
}

// Errors built by hand (not by the SDK) with odd fields must not panic.
func TestErrorFromHandMadeSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		class classify.Class
	}{
		{"openai zero value", &openai.Error{}, classify.Unknown},
		{"openai status only", &openai.Error{StatusCode: 429}, classify.RateLimited},
		{"anthropic zero value", &anthropic.Error{}, classify.Unknown},
		{"anthropic status only", &anthropic.Error{StatusCode: 529}, classify.Overloaded},
		{"anthropic 200 with error body", func() error {
			e := &anthropic.Error{StatusCode: 200}
			require.NoError(t, e.UnmarshalJSON([]byte(payload(anthropicCases, "anthropic/529 overloaded_error"))))
			return e
		}(), classify.Overloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotPanics(t, func() { require.Equal(t, tc.class, classify.Error(tc.err, now).Class) })
		})
	}
}

func mergeHeaders(hs ...http.Header) http.Header {
	out := http.Header{}
	for _, h := range hs {
		for k, vs := range h {
			out[k] = append(out[k], vs...)
		}
	}
	return out
}
