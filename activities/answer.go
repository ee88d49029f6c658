package activities

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
)

// openAIAnswer turns a Chat Completions answer into a Response. An answer
// with no choices holds nothing to return: a MalformedResponse error.
func openAIAnswer(req Request, c *openai.ChatCompletion, raw *http.Response) (Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return Response{}, malformed(req, raw, "holds no choices", nil)
	}
	return Response{
		Text:         c.Choices[0].Message.Content,
		FinishReason: c.Choices[0].FinishReason,
		Usage: Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens,
			CacheReadTokens: c.Usage.PromptTokensDetails.CachedTokens},
		Provider:  OpenAI,
		Model:     c.Model,
		RequestID: header(raw, requestIDHeader(OpenAI)),
		// OpenAI's tokens-per-minute limit keeps its up-front estimate:
		// max_tokens or the prompt, as OpenAI counts the prompt.
		RateLimitTokens: max(req.MaxOutputTokens, c.Usage.PromptTokens),
		ToolCalls:       openAIToolCalls(c.Choices[0].Message.ToolCalls),
	}, nil
}

// anthropicAnswer turns a Messages answer into a Response. An answer without
// a content array (an empty one is a valid, empty answer) is not a message:
// a MalformedResponse error.
func anthropicAnswer(req Request, msg *anthropic.Message, raw *http.Response) (Response, error) {
	if msg == nil || !msg.JSON.Content.Valid() {
		return Response{}, malformed(req, raw, "holds no content", nil)
	}
	var (
		text  strings.Builder
		calls []ToolCall
	)
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, ToolCall{ID: b.ID, Name: b.Name, Arguments: rawArguments(string(b.Input))})
		}
	}
	return Response{
		Text:         text.String(),
		FinishReason: string(msg.StopReason),
		Usage: Usage{
			InputTokens:      msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens,
			OutputTokens:     msg.Usage.OutputTokens,
			CacheReadTokens:  msg.Usage.CacheReadInputTokens,
			CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
		},
		Provider:  Anthropic,
		Model:     string(msg.Model),
		RequestID: header(raw, requestIDHeader(Anthropic)),
		ToolCalls: calls,
	}, nil
}

// callError is what Complete returns for an error from an SDK call. A
// provider's error answer or a transport failure is wrapped with %w, for the
// interceptor to classify. An error after a 2xx answer that classify cannot
// read (the SDK could not decode the body) is a MalformedResponse error:
// left as it is, it would be Unknown to the interceptor and retried under
// the activity's default policy, outside every budget.
func callError(req Request, raw *http.Response, err error) error {
	// The class of an error that is not an HTTP error answer does not depend
	// on the time.
	if ok2xx(raw) && classify.Error(err, time.Time{}).Class == classify.Unknown {
		return malformed(req, raw, "could not be read ("+err.Error()+")", err)
	}
	return fmt.Errorf("activities: %s (model %s): %w", callName(req.Provider), req.Model, err)
}

// malformed is the non-retryable MalformedResponse error for a 2xx answer
// that holds no answer.
func malformed(req Request, raw *http.Response, problem string, cause error) error {
	status := "2xx"
	if raw != nil {
		status = fmt.Sprint(raw.StatusCode)
	}
	id := header(raw, requestIDHeader(req.Provider))
	if id == "" {
		id = "none"
	}
	msg := fmt.Sprintf("activities: %s (model %s): the HTTP %s answer %s (request id %s); "+
		"check that config.%s.base_url points at the provider's API or a compatible proxy",
		callName(req.Provider), req.Model, status, problem, id, req.Provider)
	return temporal.NewNonRetryableApplicationError(msg, tollgate.MalformedResponse, cause)
}

func ok2xx(r *http.Response) bool {
	return r != nil && r.StatusCode >= 200 && r.StatusCode < 300
}

func callName(provider string) string {
	switch provider {
	case Anthropic:
		return "anthropic message"
	case Gemini:
		return "gemini generate content"
	}
	return "openai chat completion"
}

// requestIDHeader names the header that carries the provider's request id;
// "" for Gemini, which puts its responseId in the body.
func requestIDHeader(provider string) string {
	switch provider {
	case Anthropic:
		return "request-id"
	case Gemini:
		return ""
	}
	return "x-request-id"
}

func header(r *http.Response, name string) string {
	if r == nil || name == "" {
		return ""
	}
	return r.Header.Get(name)
}
