package llmsim

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// num digs a number out of a decoded JSON body by path.
func (r reply) num(path string) int64 {
	var v any = r.body
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return -1
		}
		v = m[p]
	}
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

// An Anthropic conversation that moves its breakpoint to its last message
// each turn writes its prefix on one turn and reads it on the next; the
// input-tokens bucket counts input_tokens plus cache writes, never reads;
// the entry lapses CacheTTL after its last use.
func TestAnthropicPromptCache(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "m", InputTokensPerMinute: 100000}}})
	system := strings.Repeat("s", 8000) // 2,000 tokens
	eph := map[string]any{"type": "ephemeral"}
	turn := func(msgs ...string) reply {
		var ms []any
		for i, m := range msgs {
			block := map[string]any{"type": "text", "text": m}
			if i == len(msgs)-1 {
				block["cache_control"] = eph
			}
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			ms = append(ms, map[string]any{"role": role, "content": []any{block}})
		}
		return f.post(t, "/v1/messages", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}, map[string]any{
			"model": "m", "max_tokens": 10,
			"system":   []any{map[string]any{"type": "text", "text": system, "cache_control": eph}},
			"messages": ms,
		})
	}
	remaining := func(r reply) string { return r.header.Get("anthropic-ratelimit-input-tokens-remaining") }

	one := strings.Repeat("a", 400) // 100 tokens
	r := turn(one)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, int64(0), r.num("usage.cache_read_input_tokens"))
	require.Equal(t, int64(2100), r.num("usage.cache_creation_input_tokens"), "system and message written")
	require.Equal(t, int64(0), r.num("usage.input_tokens"))
	require.Equal(t, "97900", remaining(r), "writes count against ITPM")

	r = turn(one, strings.Repeat("b", 400), strings.Repeat("c", 400))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, int64(2100), r.num("usage.cache_read_input_tokens"))
	require.Equal(t, int64(200), r.num("usage.cache_creation_input_tokens"))
	require.Equal(t, "97700", remaining(r), "reads do not count against ITPM")

	f.clock.Advance(DefaultCacheTTL)
	r = turn(one, strings.Repeat("b", 400), strings.Repeat("c", 400))
	require.Equal(t, int64(0), r.num("usage.cache_read_input_tokens"), "lapsed after its TTL")
	require.Equal(t, int64(2300), r.num("usage.cache_creation_input_tokens"))

	// Without breakpoints nothing is cached.
	r = f.anthropic(t, "k", "m", strings.Repeat("x", 8000), 10)
	r = f.anthropic(t, "k", "m", strings.Repeat("x", 8000), 10)
	require.Equal(t, int64(0), r.num("usage.cache_read_input_tokens"))
	require.Equal(t, int64(2000), r.num("usage.input_tokens"))
}

// OpenAI and Gemini cache prompts on their own: a repeated prompt of at
// least CacheMinTokens reports its cached tokens, a shorter one none, and
// their token buckets count the whole prompt.
func TestAutomaticPromptCache(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{
		{Provider: OpenAI, Name: "o", TokensPerMinute: 100000},
		{Provider: Gemini, Name: "g", TokensPerMinute: 100000},
	}})
	long, short := strings.Repeat("l", 8000), strings.Repeat("s", 400)
	for _, p := range []string{long, short} {
		f.openai(t, "k", "o", p, 10)
		f.gemini(t, "k", "g", p, 10)
	}
	o, g := f.openai(t, "k", "o", long, 10), f.gemini(t, "k", "g", long, 10)
	require.Equal(t, int64(2000), o.num("usage.prompt_tokens_details.cached_tokens"))
	require.Equal(t, int64(2000), o.num("usage.prompt_tokens"))
	require.Equal(t, int64(2000), g.num("usageMetadata.cachedContentTokenCount"))
	require.Equal(t, "95900", o.header.Get("x-ratelimit-remaining-tokens"), "cached tokens count toward TPM")
	o, g = f.openai(t, "k", "o", short, 10), f.gemini(t, "k", "g", short, 10)
	require.Equal(t, int64(0), o.num("usage.prompt_tokens_details.cached_tokens"))
	require.Equal(t, int64(-1), g.num("usageMetadata.cachedContentTokenCount"))

	st := f.sim.Stats("o")
	require.Equal(t, int64(2000), st.CacheReadTokens)
}
