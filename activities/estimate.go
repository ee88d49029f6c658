package activities

import "github.com/tollgate/tollgate/quota"

// EstimateTokens is the providers' rule of thumb for a prompt's size before it
// is tokenized: one token per four characters, rounded up. Negative counts
// are treated as zero.
func EstimateTokens(characters int64) int64 {
	if characters <= 0 {
		return 0
	}
	return (characters + 3) / 4
}

// EstimateOpenAI is what OpenAI charges a Chat Completions call against its
// limits before running it: one request, and max(max_tokens,
// ceil(characters/4)) tokens against tokens per minute (as OpenAI documents).
func EstimateOpenAI(characters, maxOutputTokens int64) quota.Cost {
	return quota.Cost{Requests: 1, Tokens: max(max(maxOutputTokens, 0), EstimateTokens(characters))}
}

// EstimateAnthropic is what Anthropic charges a Messages call: one request,
// ceil(characters/4) input tokens against input tokens per minute and
// max_tokens against output tokens per minute. Tokens is their sum, for
// combined and daily token axes.
func EstimateAnthropic(characters, maxOutputTokens int64) quota.Cost {
	in, out := EstimateTokens(characters), max(maxOutputTokens, 0)
	return quota.Cost{Requests: 1, Tokens: in + out, InputTokens: in, OutputTokens: out}
}

// EstimateGemini is what Gemini charges a generateContent call: one request,
// and ceil(characters/4) input tokens against tokens per minute, which
// Gemini counts from the prompt alone. Tokens is those input tokens (the
// axis a policy's tokens_per_minute meters); OutputTokens is max_tokens, for
// a policy that meters output as well.
func EstimateGemini(characters, maxOutputTokens int64) quota.Cost {
	in := EstimateTokens(characters)
	return quota.Cost{Requests: 1, Tokens: in, InputTokens: in, OutputTokens: max(maxOutputTokens, 0)}
}
