package activities

import (
	"context"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate"
)

// CompleteActivity is the name Complete is registered under by Register.
const CompleteActivity = "Complete"

// Register registers a's activities on r under their exported names
// (CompleteActivity). r.RegisterActivity(a) does the same: Activities has
// no exported method other than its activities (which is why Register is a
// function, not a method).
func Register(r worker.ActivityRegistry, a *Activities) {
	r.RegisterActivityWithOptions(a.Complete, activity.RegisterOptions{Name: CompleteActivity})
}

// Complete runs req on its provider: OpenAI through Chat Completions,
// Anthropic through Messages, Gemini through generateContent, with the
// SDK's retries off.
//
// It streams (the SDKs' streaming APIs, assembled into the same Response)
// when req.Stream is set, and for Anthropic also when the SDK would refuse
// the call without streaming: max_tokens implying more than ten minutes
// (about 21,000 tokens, fewer for some models) with no request timeout
// configured. Inside an activity it heartbeats while the call runs, a
// Progress with the tokens so far as a stream's events arrive, so that a
// HeartbeatTimeout detects a lost worker; a stream that sends nothing for
// the HeartbeatTimeout is cut and fails with a *StallError (a transient
// timeout). A stream that breaks off after the provider began to answer
// fails with a *StreamError carrying the usage so far.
//
// A request that can never succeed (an invalid field, a provider this worker
// has no config for) fails with a non-retryable *temporal.ApplicationError of
// type tollgate.InvalidRequest or tollgate.ProviderNotConfigured. A provider or
// transport failure is returned as the SDK gave it, wrapped with %w, so
// errors.As finds *openai.Error, *anthropic.Error (status, headers, body) or
// genai.APIError (status and body) and the interceptor classifies it. A 2xx
// answer that holds no answer (no choices, no content, no candidates and no
// block reason, a body the SDK cannot decode) fails with a non-retryable
// *temporal.ApplicationError of type tollgate.MalformedResponse, wrapping the
// SDK's error if there was one:
// nothing classifies such an answer, so no retry budget would bound it.
func (a *Activities) Complete(ctx context.Context, req Request) (Response, error) {
	if err := req.Validate(); err != nil {
		return Response{}, temporal.NewNonRetryableApplicationError(err.Error(), tollgate.InvalidRequest, err)
	}
	var (
		resp Response
		err  error
	)
	p := startPulse(ctx)
	defer p.stop()
	c := a.clientsFor(req.Provider, req.Account)
	switch {
	case req.Provider == OpenAI && c.openai != nil:
		resp, err = c.completeOpenAI(ctx, req, p)
	case req.Provider == Anthropic && c.anthropic != nil:
		resp, err = c.completeAnthropic(ctx, req, p)
	case req.Provider == Gemini && c.gemini != nil:
		resp, err = c.completeGemini(ctx, req)
	default:
		err := invalid("request.provider", req.Provider, "is not configured on this worker",
			"set config."+req.Provider+".api_key on the worker, or send the request to a worker that has it")
		return Response{}, temporal.NewNonRetryableApplicationError(err.Error(), tollgate.ProviderNotConfigured, err)
	}
	if err == nil {
		resp.PromptEstimate = EstimateTokens(req.Characters())
	}
	if activity.IsActivity(ctx) {
		// Never the key, the prompt or the answer: only what the call was and used.
		logger := activity.GetLogger(ctx)
		if err != nil {
			logger.Debug("LLM call failed", "provider", req.Provider, "model", req.Model, "error", err)
		} else {
			logger.Debug("LLM call done", "provider", resp.Provider, "model", resp.Model, "request_id", resp.RequestID,
				"finish_reason", resp.FinishReason, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens)
		}
	}
	return resp, err
}

func (a *clients) completeOpenAI(ctx context.Context, req Request, p *pulse) (Response, error) {
	msgs := openAIMessages(req)
	params := openai.ChatCompletionNewParams{
		Model:               req.Model,
		Messages:            msgs,
		MaxCompletionTokens: openai.Int(req.MaxOutputTokens),
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	openAITools(req, &params)
	openAICaching(req, &params)
	if req.Stream {
		return a.streamOpenAI(ctx, req, params, p)
	}
	var raw *http.Response
	c, err := a.openai.New(ctx, params, openaioption.WithResponseInto(&raw))
	if err != nil {
		return Response{}, callError(req, raw, err)
	}
	return openAIAnswer(req, c, raw)
}

func (a *clients) completeAnthropic(ctx context.Context, req Request, p *pulse) (Response, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: req.MaxOutputTokens,
		Messages:  anthropicMessages(req),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	anthropicTools(req, &params)
	anthropicCaching(req, &params)
	var opts []anthropicoption.RequestOption
	if req.Temperature != nil {
		// The SDK no longer models temperature; the API still reads it.
		opts = append(opts, anthropicoption.WithJSONSet("temperature", *req.Temperature))
	}
	if req.Stream || anthropicNeedsStream(req, a.anthropic.Messages.Options) {
		return a.streamAnthropic(ctx, req, params, opts, p)
	}
	var raw *http.Response
	opts = append(opts, anthropicoption.WithResponseInto(&raw))
	msg, err := a.anthropic.Messages.New(ctx, params, opts...)
	if err != nil {
		return Response{}, callError(req, raw, err)
	}
	return anthropicAnswer(req, msg, raw)
}
