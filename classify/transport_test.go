package classify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// A user's own openai-go client, calling tools directly, records its
// answers through classify.Transport into the Recorder the interceptor
// puts in the activity's context: the limits of a success and the 429 of
// an exhausted bucket, which classify reads as a rate limit with its
// Retry-After.
func TestTransportRecordsAUsersOwnClient(t *testing.T) {
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: "gpt-own", RequestsPerMinute: 1, TokensPerMinute: 100000}}})
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL+"/v1/"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: classify.Transport{Next: srv.Client().Transport}}))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-own",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Lisbon?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}},
		})},
	}

	var rec classify.Recorder
	ctx := classify.NewContext(context.Background(), &rec)
	resp, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Equal(t, "get_weather", resp.Choices[0].Message.ToolCalls[0].Function.Name)
	status, h, ok := rec.Last()
	require.True(t, ok)
	require.Equal(t, http.StatusOK, status)
	var sawRequests bool
	for _, o := range classify.Limits(h, time.Now()) {
		if o.Axis == quota.Requests {
			sawRequests = true
			require.Equal(t, int64(0), o.Remaining)
		}
	}
	require.True(t, sawRequests, "the request limit was learned from the headers")

	_, err = client.Chat.Completions.New(ctx, params)
	require.Error(t, err)
	status, _, _ = rec.Last()
	require.Equal(t, http.StatusTooManyRequests, status)
	v := classify.Error(err, time.Now())
	require.Equal(t, classify.RateLimited, v.Class)
	require.Equal(t, quota.Requests, v.Axis, "the 429 names the request limit")
	require.Positive(t, v.RetryAfter)
	require.Equal(t, 2, rec.Count())

	// Outside a governed activity it records nothing.
	_, _ = client.Chat.Completions.New(context.Background(), params)
	require.Equal(t, 2, rec.Count())
}
