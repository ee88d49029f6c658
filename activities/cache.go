package activities

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// Caching is how a Request uses the provider's prompt cache, and what its
// estimate may expect to be read from it.
//
// Providers count cached prompt tokens differently against their limits,
// and Tollgate charges as each does:
//
//   - Anthropic: cache reads do not count toward input tokens per minute
//     for its current models; input_tokens and cache_creation_input_tokens
//     do (https://docs.anthropic.com/en/api/rate-limits). The estimate
//     charges the warm prefix nothing on the input axis.
//   - OpenAI: caching does not change rate limits; cached tokens count
//     toward tokens per minute (https://platform.openai.com/docs/guides/prompt-caching).
//   - Gemini: implicit caching lowers the price of cached tokens, not the
//     input tokens per minute, which count the whole prompt
//     (https://ai.google.dev/gemini-api/docs/caching).
type Caching struct {
	// On marks the prompt for caching: Anthropic cache_control breakpoints
	// (ephemeral, 5 minutes) on the last tool, the system prompt and the
	// last message, so each turn writes the conversation so far and the
	// next reads it. OpenAI and Gemini cache prompts of 1024 tokens or
	// more on their own, whatever On says.
	On bool `json:"on,omitempty"`
	// Key is OpenAI's prompt_cache_key: calls sharing a long prefix and a
	// key are routed to the same cache. Empty sends none.
	Key string `json:"key,omitempty"`
	// Warm is how many leading messages of Request.Messages the same
	// conversation sent, with caching on, in a call answered within the
	// cache's lifetime (5 minutes) before this one: with the tools and the
	// system prompt, the prefix expected to be read from the cache. The
	// estimate charges that prefix as the provider counts cache reads (see
	// above), and calibration learns from the rest. Zero expects nothing
	// cached. At most len(Messages).
	Warm int `json:"warm,omitempty"`
}

// validateCaching checks r.Caching.
func (r Request) validateCaching() error {
	c := r.Caching
	if c.Warm < 0 || c.Warm > len(r.Messages) {
		return invalid("request.caching.warm", strconv.Itoa(c.Warm), fmt.Sprintf("is not in [0, %d], the request's messages", len(r.Messages)),
			"give how many leading messages the previous call of the conversation sent, or 0")
	}
	if c.Warm > 0 && !c.On && r.Provider == Anthropic {
		return invalid("request.caching.warm", strconv.Itoa(c.Warm), "is set with caching off",
			"set request.caching.on: Anthropic caches only a prompt marked for caching")
	}
	return nil
}

// warmCharacters is the characters of the prefix expected to be read from
// the cache: tools, system prompt and the first Caching.Warm messages.
func (r Request) warmCharacters() int64 {
	if r.Caching.Warm == 0 {
		return 0
	}
	n := int64(utf8.RuneCountInString(r.System)) + r.toolCharacters()
	for _, m := range r.Messages[:r.Caching.Warm] {
		n += m.characters()
	}
	return n
}

// anthropicCaching puts cache_control breakpoints on params' last tool,
// system prompt and last message's last block.
func anthropicCaching(req Request, params *anthropic.MessageNewParams) {
	if !req.Caching.On {
		return
	}
	eph := anthropic.NewCacheControlEphemeralParam()
	if n := len(params.Tools); n > 0 && params.Tools[n-1].OfTool != nil {
		params.Tools[n-1].OfTool.CacheControl = eph
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = eph
	}
	if n := len(params.Messages); n > 0 {
		var blocks []anthropic.ContentBlockParamUnion
		switch m := params.Messages[n-1]; {
		case m.OfUser != nil:
			blocks = m.OfUser.Content
		case m.OfAssistant != nil:
			blocks = m.OfAssistant.Content
		}
		if k := len(blocks); k > 0 {
			if cc := blocks[k-1].GetCacheControl(); cc != nil {
				*cc = eph
			}
		}
	}
}

// openAICaching sets prompt_cache_key.
func openAICaching(req Request, params *openai.ChatCompletionNewParams) {
	if req.Caching.Key != "" {
		params.PromptCacheKey = openai.String(req.Caching.Key)
	}
}
