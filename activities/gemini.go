package activities

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/genai"

	"github.com/tollgate/tollgate/classify"
)

// geminiAPIVersion is the Gemini API version the SDK's generateContent calls
// are sent to ({base}/v1beta/models/{model}:generateContent).
const geminiAPIVersion = "v1beta"

// newGemini builds the Gemini API client from p alone: the backend, key,
// base URL and API version are all set, so the SDK consults none of its
// environment variables (GOOGLE_API_KEY, GEMINI_API_KEY,
// GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GEMINI_BASE_URL); its retries are off
// (one attempt); its transport records responses for the interceptor. The
// key is sent as x-goog-api-key, never in the URL.
func newGemini(p ProviderConfig) (*genai.Models, error) {
	base := p.BaseURL
	if base == "" {
		base = DefaultGeminiBaseURL
	}
	oneAttempt := int32(1)
	opts := genai.HTTPOptions{
		BaseURL:      base,
		APIVersion:   geminiAPIVersion,
		RetryOptions: &genai.HTTPRetryOptions{Attempts: &oneAttempt},
	}
	if p.Timeout > 0 {
		t := p.Timeout
		opts.Timeout = &t
	}
	// NewClient needs a context only to find Google Cloud credentials,
	// which an API-key client never looks for.
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      p.APIKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  p.httpClient(),
		HTTPOptions: opts,
	})
	if err != nil {
		// The SDK's messages print its whole ClientConfig, key included.
		msg := strings.ReplaceAll(err.Error(), p.APIKey, "(redacted)")
		return nil, invalid("config.gemini", "", "cannot build the Gemini client ("+msg+")",
			"set config.gemini.api_key to a Gemini API key and base_url to an absolute URL or leave it empty")
	}
	return c.Models, nil
}

func (a *clients) completeGemini(ctx context.Context, req Request) (Response, error) {
	contents := geminiContents(req)
	cfg := &genai.GenerateContentConfig{MaxOutputTokens: int32(req.MaxOutputTokens)} // Validate bounds it
	if req.System != "" {
		cfg.SystemInstruction = genai.NewContentFromText(req.System, genai.RoleUser)
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		cfg.Temperature = &t
	}
	geminiTools(req, cfg)
	// The SDK returns no HTTP response with its errors; the call's own
	// recorder keeps its status, to tell a 2xx it could not decode from a
	// failure to get an answer.
	var rec classify.Recorder
	resp, err := a.gemini.GenerateContent(withCallRecorder(ctx, &rec), req.Model, contents, cfg)
	raw := lastResponse(&rec)
	if err != nil {
		return Response{}, callError(req, raw, err)
	}
	return geminiAnswer(req, resp, raw)
}

// geminiAnswer turns a generateContent answer into a Response. An answer
// with no candidates is a blocked prompt when the prompt feedback says why
// (a Response with the block reason as its FinishReason and no text), and
// malformed otherwise.
func geminiAnswer(req Request, resp *genai.GenerateContentResponse, raw *http.Response) (Response, error) {
	if resp == nil {
		return Response{}, malformed(req, raw, "holds no response", nil)
	}
	out := Response{Provider: Gemini, Model: resp.ModelVersion, RequestID: resp.ResponseID}
	if out.Model == "" {
		out.Model = req.Model
	}
	if u := resp.UsageMetadata; u != nil {
		out.Usage = Usage{
			InputTokens:     int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
			OutputTokens:    int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
			CacheReadTokens: int64(u.CachedContentTokenCount),
		}
	}
	// Gemini's tokens per minute count the prompt alone.
	out.RateLimitTokens = out.Usage.InputTokens
	if out.RateLimitTokens == 0 {
		out.RateLimitTokens = EstimateGemini(req.Characters(), req.MaxOutputTokens).Tokens
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
			out.FinishReason = string(pf.BlockReason)
			return out, nil
		}
		return Response{}, malformed(req, raw, "holds no candidates and no block reason", nil)
	}
	c := resp.Candidates[0]
	out.FinishReason = string(c.FinishReason)
	if c.Content != nil {
		var text strings.Builder
		for i, p := range c.Content.Parts {
			switch {
			case p == nil || p.Thought:
			case p.FunctionCall != nil:
				out.ToolCalls = append(out.ToolCalls, geminiToolCall(p.FunctionCall, i))
			default:
				text.WriteString(p.Text)
			}
		}
		out.Text = text.String()
	}
	return out, nil
}
