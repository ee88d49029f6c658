package activities

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
)

// errEndedEarly is the cause of a stream that ended, without an error,
// before its final event: the connection closed mid-answer.
var errEndedEarly = fmt.Errorf("the stream ended before its final event: %w", io.ErrUnexpectedEOF)

// anthropicNeedsStream reports whether anthropic-sdk-go would refuse req
// as a non-streaming Messages.New, by the SDK's own rule
// (anthropic.CalculateNonStreamingTimeout, given the client's options):
// unless a request timeout is configured, max_tokens that implies more than
// ten minutes (an hour per 128,000 tokens: about 21,000) or more than the
// model's non-streaming limit (constant.ModelNonStreamingTokens, 8,192 for
// Claude Opus 4 and 4.1) needs streaming.
func anthropicNeedsStream(req Request, clientOpts []anthropicoption.RequestOption) bool {
	_, err := anthropic.CalculateNonStreamingTimeout(int(req.MaxOutputTokens), anthropic.Model(req.Model), clientOpts)
	return err != nil
}

// streamOpenAI runs a Chat Completions call with stream: true and
// stream_options.include_usage, assembling the chunks with the SDK's
// ChatCompletionAccumulator into the ChatCompletion a non-streaming call
// returns.
func (a *clients) streamOpenAI(ctx context.Context, req Request, params openai.ChatCompletionNewParams, p *pulse) (Response, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	sctx, w := watch(ctx, p.idle)
	defer w.stop()
	var raw *http.Response
	s := a.openai.NewStreaming(sctx, params, openaioption.WithResponseInto(&raw), openaioption.WithMiddleware(w.middleware))
	defer s.Close()

	var (
		acc      openai.ChatCompletionAccumulator
		events   int64
		runes    int64
		hasUsage bool
	)
	for s.Next() {
		chunk := s.Current()
		events++
		if !acc.AddChunk(chunk) {
			return Response{}, malformed(req, raw, fmt.Sprintf("streamed chunk %d that does not continue chunk %q", events, acc.ID), nil)
		}
		for _, c := range chunk.Choices {
			if c.Index == 0 {
				runes += int64(utf8.RuneCountInString(c.Delta.Content))
				for _, tc := range c.Delta.ToolCalls {
					runes += int64(utf8.RuneCountInString(tc.Function.Arguments))
				}
			}
		}
		hasUsage = hasUsage || chunk.JSON.Usage.Valid()
		p.event(ctx, EstimateTokens(runes))
	}
	err := w.cause(s.Err())
	finished := len(acc.Choices) > 0 && acc.Choices[0].FinishReason != ""
	if err == nil && !finished {
		err = errEndedEarly
	}
	if err != nil {
		if events == 0 {
			return Response{}, callError(req, raw, err)
		}
		return Response{}, streamFailed(req, raw, &StreamError{
			Provider: OpenAI, Model: req.Model, Events: events, Err: err,
			Usage:           Usage{InputTokens: EstimateTokens(req.Characters()), OutputTokens: EstimateTokens(runes)},
			RateLimitTokens: EstimateOpenAI(req.Characters(), req.MaxOutputTokens).Tokens,
			PromptEstimated: true,
		})
	}
	if !hasUsage {
		return Response{}, malformed(req, raw, "streamed no usage chunk (stream_options.include_usage was sent)", nil)
	}
	return openAIAnswer(req, &acc.ChatCompletion, raw)
}

// streamAnthropic runs a Messages call as a stream, assembling the events
// with Message.Accumulate into the Message a non-streaming call returns.
func (a *clients) streamAnthropic(ctx context.Context, req Request, params anthropic.MessageNewParams, opts []anthropicoption.RequestOption, p *pulse) (Response, error) {
	sctx, w := watch(ctx, p.idle)
	defer w.stop()
	var raw *http.Response
	opts = append(opts, anthropicoption.WithResponseInto(&raw), anthropicoption.WithMiddleware(w.middleware))
	s := a.anthropic.Messages.NewStreaming(sctx, params, opts...)
	defer s.Close()

	var (
		msg     anthropic.Message
		events  int64
		runes   int64
		stopped bool
	)
	for s.Next() {
		ev := s.Current()
		events++
		if err := msg.Accumulate(ev); err != nil {
			return Response{}, malformed(req, raw, fmt.Sprintf("streamed event %d (%s) that does not fit the message: %v", events, ev.Type, err), err)
		}
		switch ev.Type {
		case "content_block_delta":
			runes += int64(utf8.RuneCountInString(ev.Delta.Text) + utf8.RuneCountInString(ev.Delta.PartialJSON))
		case "message_stop":
			stopped = true
		}
		p.event(ctx, max(msg.Usage.OutputTokens, EstimateTokens(runes)))
	}
	err := w.cause(s.Err())
	if err == nil && !stopped {
		err = errEndedEarly
	}
	if err != nil {
		if events == 0 {
			return Response{}, callError(req, raw, err)
		}
		in, estimated := msg.Usage.InputTokens+msg.Usage.CacheCreationInputTokens, false
		if in == 0 { // message_start never came
			in, estimated = EstimateTokens(req.Characters()), true
		}
		return Response{}, streamFailed(req, raw, &StreamError{
			Provider: Anthropic, Model: req.Model, Events: events, Err: err,
			Usage:           Usage{InputTokens: in, OutputTokens: max(msg.Usage.OutputTokens, EstimateTokens(runes))},
			PromptEstimated: estimated,
		})
	}
	return anthropicAnswer(req, &msg, raw)
}

// middleware is the SDKs' middleware hook (option.WithMiddleware, the same
// signature in both): it arms the watchdog on the stream's body.
func (w *watchdog) middleware(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return w.wrap(next(r))
}

// StreamError is the error of a streamed call the provider had begun to
// answer when it failed: an error event inside the stream (Anthropic's
// overloaded_error, a spend cap), a connection dropped mid-answer, a stream
// silent for the activity's HeartbeatTimeout (*StallError), or one whose
// context was cancelled (the workflow cancelled the activity).
//
// It wraps the cause, so errors.As still finds the SDK's error and classify
// reads it like its HTTP twin. It implements quota.Metered with what the
// answer had used by then, so the interceptor settles the reservation at
// that usage instead of the estimate, and releases its lease.
type StreamError struct {
	// Provider and Model name the call.
	Provider string
	Model    string
	// Events counts the stream events received before it failed.
	Events int64
	// Usage is what the answer had used: the provider's counts where it had
	// sent them (Anthropic's input tokens in message_start), else
	// EstimateTokens of the prompt and of the text received.
	Usage Usage
	// RateLimitTokens is as in Response: for OpenAI, what it counted
	// against its tokens-per-minute limit when it accepted the call.
	RateLimitTokens int64
	// PromptEstimated is set when the provider sent no count of the prompt
	// before the stream broke off (OpenAI counts it only in the final
	// chunk), so Usage.InputTokens and RateLimitTokens are EstimateTokens
	// of the request, uncalibrated. The provider counted the prompt all
	// the same when it accepted the call, so the interceptor keeps what it
	// charged the prompt's axes, calibrated, where that is more.
	PromptEstimated bool
	// Err is the cause.
	Err error
}

var _ price.Billed = (*StreamError)(nil)

// Error names the call, how far it got and the cause.
func (e *StreamError) Error() string {
	return fmt.Sprintf("activities: %s (model %s): the stream broke off after %d events: %v", callName(e.Provider), e.Model, e.Events, e.Err)
}

// Unwrap returns the cause.
func (e *StreamError) Unwrap() error { return e.Err }

// QuotaUsage implements quota.Metered: one request and the usage so far,
// counted as Response.QuotaUsage counts it.
func (e *StreamError) QuotaUsage() quota.Cost {
	return Response{Usage: e.Usage, RateLimitTokens: e.RateLimitTokens}.QuotaUsage()
}

// QuotaBilled implements price.Billed: what the answer had used by the
// time it broke off, as Usage says, priced by money budgets.
func (e *StreamError) QuotaBilled() price.Usage { return e.Usage.billed() }

// QuotaPromptEstimated reports PromptEstimated: the interceptor reads it
// (any failure's method of that name and signature) to keep the prompt's
// charge instead of refunding it to an uncalibrated estimate.
func (e *StreamError) QuotaPromptEstimated() bool { return e.PromptEstimated }

// streamFailed is what Complete returns for a stream that broke off: the
// StreamError, or a MalformedResponse error wrapping it when classify
// cannot read its cause (a chunk the SDK could not decode), which no retry
// budget would bound.
func streamFailed(req Request, raw *http.Response, se *StreamError) error {
	// The class of an error that is not an HTTP answer does not depend on
	// the time.
	if classify.Error(se, time.Time{}).Class == classify.Unknown {
		return malformed(req, raw, "broke off unreadably after "+fmt.Sprint(se.Events)+" events ("+se.Err.Error()+")", se)
	}
	return se
}
