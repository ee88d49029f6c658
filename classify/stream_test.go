package classify_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// An error event inside a stream, as the official SDKs return it, is
// classified like the same error answered over HTTP: same class and code,
// but no Retry-After (a stream's headers went out with its 200).
func TestStreamErrorsClassifyLikeTheirHTTPTwins(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		provider string
		kind     llmsim.FaultKind
		class    classify.Class
	}{
		{llmsim.Anthropic, llmsim.FaultOverload, classify.Overloaded},
		{llmsim.Anthropic, llmsim.FaultRateLimit, classify.RateLimited},
		{llmsim.Anthropic, llmsim.FaultSpendCap, classify.SpendCap},
		{llmsim.Anthropic, llmsim.FaultServerError, classify.Transient},
		{llmsim.OpenAI, llmsim.FaultServerError, classify.Transient},
		{llmsim.OpenAI, llmsim.FaultRateLimit, classify.RateLimited},
		{llmsim.OpenAI, llmsim.FaultSpendCap, classify.SpendCap},
	} {
		t.Run(tc.provider+" "+string(tc.kind), func(t *testing.T) {
			sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{
				{Provider: llmsim.OpenAI, Name: "gpt-4o"}, {Provider: llmsim.Anthropic, Name: "claude-sonnet-4-5"},
			}})
			require.NoError(t, err)
			srv := httptest.NewServer(sim)
			defer srv.Close()
			oc := openai.NewClient(openaioption.WithBaseURL(srv.URL+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
			ac := anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(srv.URL),
				anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
			oparams := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxCompletionTokens: openai.Int(100),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a story")}}
			aparams := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me a story"))}}

			require.NoError(t, sim.Inject(llmsim.Fault{Kind: tc.kind, Provider: tc.provider, Times: 1}))
			var httpErr error
			if tc.provider == llmsim.OpenAI {
				_, httpErr = oc.Chat.Completions.New(ctx, oparams)
			} else {
				_, httpErr = ac.Messages.New(ctx, aparams)
			}
			require.Error(t, httpErr)

			require.NoError(t, sim.Inject(llmsim.Fault{Kind: tc.kind, Provider: tc.provider, MidStream: true, AfterChunks: 1, Times: 1}))
			var streamErr error
			if tc.provider == llmsim.OpenAI {
				s := oc.Chat.Completions.NewStreaming(ctx, oparams)
				for s.Next() {
				}
				streamErr = s.Err()
			} else {
				s := ac.Messages.NewStreaming(ctx, aparams)
				for s.Next() {
				}
				streamErr = s.Err()
			}
			require.Error(t, streamErr)

			over, in := classify.Error(httpErr, now), classify.Error(streamErr, now)
			t.Logf("HTTP: %s %q; stream: %s %q (%v)", over.Class, over.Code, in.Class, in.Code, streamErr)
			require.Equal(t, tc.class, over.Class)
			require.Equal(t, over.Class, in.Class)
			require.Equal(t, over.Code, in.Code)
			require.Equal(t, over.Axis, in.Axis)
			require.Equal(t, over.Retryable, in.Retryable)
			require.False(t, in.HasRetryAfter)
			require.Zero(t, in.Status, "an error inside a stream has no status of its own")
		})
	}
}
