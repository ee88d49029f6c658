package classify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/internal/testnet"
)

// geminiError runs the official Gemini SDK (the Gemini API backend, retries
// off) against url and returns its error.
func geminiError(t *testing.T, url string) error {
	t.Helper()
	one := int32(1)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "AIza-test",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}},
	})
	require.NoError(t, err)
	_, err = client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil)
	require.Error(t, err)
	return err
}

func TestErrorFromGeminiSDK(t *testing.T) {
	for _, tc := range []sdkCase{
		{
			name: "per-day quota closes until midnight Pacific", status: 429,
			body:  payload(geminiCases, "gemini/429 RESOURCE_EXHAUSTED per day"),
			class: classify.DailyQuota, retryAfter: 22 * time.Second, hasRetryAfter: true, code: "RESOURCE_EXHAUSTED", resetAt: nextLAMidnight,
		},
		{
			name: "per-minute quota retries after retryDelay", status: 429,
			body:  payload(geminiCases, "gemini/429 RESOURCE_EXHAUSTED per minute"),
			class: classify.RateLimited, retryable: true, retryAfter: 34 * time.Second, hasRetryAfter: true, code: "RESOURCE_EXHAUSTED",
		},
		{
			name: "prepayment credits depleted", status: 429,
			body:  payload(geminiCases, "gemini/429 RESOURCE_EXHAUSTED prepayment credits depleted"),
			class: classify.SpendCap, code: "RESOURCE_EXHAUSTED",
		},
		{
			name: "overloaded", status: 503,
			body:  payload(geminiCases, "gemini/503 UNAVAILABLE"),
			class: classify.Overloaded, retryable: true, code: "UNAVAILABLE",
		},
		{
			name: "invalid key", status: 400,
			body:  payload(geminiCases, "gemini/400 API_KEY_INVALID"),
			class: classify.Auth, code: "API_KEY_INVALID",
		},
		{
			name: "input too long", status: 400,
			body:  payload(geminiCases, "gemini/400 input token count exceeds the maximum"),
			class: classify.ContextTooLong, code: "INVALID_ARGUMENT",
		},
		{
			name: "html bad gateway", status: 502,
			body:  "<html><body>502 Bad Gateway</body></html>",
			class: classify.Transient, retryable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := geminiError(t, serve(t, tc.status, tc.header, tc.body).URL)
			var ge genai.APIError
			require.ErrorAs(t, err, &ge, "the SDK's own error type")
			tc.check(t, err)
		})
	}
}

func TestErrorFromGeminiTransportAndHandMadeErrors(t *testing.T) {
	v := classify.Error(geminiError(t, "http://"+testnet.FreeAddr(t)), now)
	require.Equal(t, classify.Transient, v.Class, "connection refused")
	for _, tc := range []struct {
		name  string
		err   error
		class classify.Class
	}{
		{"zero value", genai.APIError{}, classify.Unknown},
		{"status only", genai.APIError{Code: 429}, classify.RateLimited},
		{"pointer", fmt.Errorf("call: %w", &genai.APIError{Code: 503, Status: "UNAVAILABLE"}), classify.Overloaded},
		{"nil pointer", fmt.Errorf("call: %w", (*genai.APIError)(nil)), classify.Unknown},
		{"unencodable detail", genai.APIError{Code: 429, Details: []map[string]any{{"x": func() {}}}}, classify.RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotPanics(t, func() { require.Equal(t, tc.class, classify.Error(tc.err, now).Class) })
		})
	}
}
