package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
)

// testNow is when the tests' calls end, for classify.
var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// requireMalformed checks err is the non-retryable MalformedResponse error
// and that its message says what is wrong.
func requireMalformed(t *testing.T, err error, contains ...string) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, tollgate.MalformedResponse, appErr.Type())
	require.Equal(t, tollgate.MalformedResponse, appErr.Type())
	require.True(t, appErr.NonRetryable(), "no budget bounds a malformed answer's retries")
	for _, s := range contains {
		require.Contains(t, appErr.Error(), s)
	}
	return appErr
}

func TestAnswerWithNothingInItIsMalformed(t *testing.T) {
	raw := func(idHeader string) *http.Response {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{http.CanonicalHeaderKey(idHeader): {"req_42"}}}
	}
	t.Run("openai without choices", func(t *testing.T) {
		_, err := openAIAnswer(chat(OpenAI, "gpt-4o", "hi"), &openai.ChatCompletion{Model: "gpt-4o"}, raw("x-request-id"))
		appErr := requireMalformed(t, err, "openai chat completion (model gpt-4o)", "HTTP 200 answer holds no choices",
			"request id req_42", "config.openai.base_url")
		require.Nil(t, appErr.Unwrap())
	})
	t.Run("openai nil", func(t *testing.T) {
		_, err := openAIAnswer(chat(OpenAI, "gpt-4o", "hi"), nil, nil)
		requireMalformed(t, err, "HTTP 2xx answer holds no choices", "request id none")
	})
	t.Run("anthropic without content", func(t *testing.T) {
		_, err := anthropicAnswer(chat(Anthropic, "claude-haiku-4-5", "hi"), &anthropic.Message{}, raw("request-id"))
		requireMalformed(t, err, "anthropic message (model claude-haiku-4-5)", "HTTP 200 answer holds no content",
			"request id req_42", "config.anthropic.base_url")
	})
	t.Run("the interceptor cannot read it either", func(t *testing.T) {
		// So it stands as returned: non-retryable, not retried for the
		// activity's whole schedule-to-close timeout.
		_, err := openAIAnswer(chat(OpenAI, "gpt-4o", "hi"), &openai.ChatCompletion{}, raw("x-request-id"))
		require.Equal(t, classify.Unknown, classify.Error(err, testNow).Class)
	})
}

// TestCompleteMalformedAnswers sends 2xx answers that hold no answer through
// the real SDKs, and checks each fails at once as MalformedResponse while a
// body cut short stays a transient failure for the interceptor.
func TestCompleteMalformedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		provider    string
		contentType string
		body        string
		short       bool   // declare a longer body than is sent
		want        string // in the MalformedResponse message; empty: not malformed
	}{
		{"openai empty choices", OpenAI, "application/json",
			`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[]}`, false, "holds no choices"},
		{"openai empty object", OpenAI, "application/json", `{}`, false, "holds no choices"},
		{"openai html page", OpenAI, "text/html", `<html>Sign in to the proxy</html>`, false, "could not be read"},
		{"openai broken json", OpenAI, "application/json", `{"choices": nope}`, false, "could not be read"},
		{"openai body cut short", OpenAI, "application/json", `{"choices":[`, true, ""},
		{"anthropic empty object", Anthropic, "application/json", `{}`, false, "holds no content"},
		{"anthropic null content", Anthropic, "application/json",
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":null}`, false, "holds no content"},
		{"anthropic html page", Anthropic, "text/html", `<html>Sign in to the proxy</html>`, false, "could not be read"},
		{"anthropic broken json", Anthropic, "application/json", `{"content": nope}`, false, "could not be read"},
		{"anthropic body cut short", Anthropic, "application/json", `{"content":[`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.Header().Set("x-request-id", "req_7")
				w.Header().Set("request-id", "req_7")
				if tc.short {
					w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)+100))
				}
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			acts := newActs(t, srv, testKey)
			req := chat(tc.provider, "gpt-4o", "hi")
			if tc.provider == Anthropic {
				req.Model = "claude-haiku-4-5"
			}
			_, err := acts.Complete(context.Background(), req)
			require.Error(t, err)
			if tc.want == "" {
				var appErr *temporal.ApplicationError
				require.False(t, errors.As(err, &appErr), "left for the interceptor: %v", err)
				require.Equal(t, classify.Transient, classify.Error(err, testNow).Class, "%v", err)
				return
			}
			requireMalformed(t, err, tc.want, "request id req_7", "config."+tc.provider+".base_url")
		})
	}
	t.Run("an empty content array is an empty answer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":0}}`))
		}))
		t.Cleanup(srv.Close)
		resp, err := newActs(t, srv, testKey).Complete(context.Background(), chat(Anthropic, "claude-haiku-4-5", "hi"))
		require.NoError(t, err)
		require.Empty(t, resp.Text)
		require.Equal(t, "end_turn", resp.FinishReason)
	})
}
