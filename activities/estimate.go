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
// ceil(characters/4)) tokens against tokens per minute (as OpenAI
// documents). InputTokens and OutputTokens are the prompt's estimate and
// max_tokens, for input and output axes a policy may add.
func EstimateOpenAI(characters, maxOutputTokens int64) quota.Cost {
	in, out := EstimateTokens(characters), max(maxOutputTokens, 0)
	return quota.Cost{Requests: 1, Tokens: max(out, in), InputTokens: in, OutputTokens: out}
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
// Gemini counts from the prompt alone. Tokens and InputTokens are those
// input tokens. Gemini meters no output per minute, so no output is charged
// up front (maxOutputTokens is unused): the answer's tokens are settled from
// its usage, and calibration scales the prompt's estimate alone.
func EstimateGemini(characters, maxOutputTokens int64) quota.Cost {
	in := EstimateTokens(characters)
	return quota.Cost{Requests: 1, Tokens: in, InputTokens: in}
}
