package llmsim

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDensityCountsAsTheModelsTokenizer: a model with Density 1.5 counts
// 1.5 × characters/4 in the usage it reports and in the limits it enforces,
// so a caller estimating characters/4 is 50 % low, as against a real
// tokenizer.
func TestDensityCountsAsTheModelsTokenizer(t *testing.T) {
	prompt := strings.Repeat("abcd", 100) // 400 characters: 100 tokens at characters/4
	f := newFixture(t, Config{Models: []Model{
		{Provider: OpenAI, Name: "dense", TokensPerMinute: 1000, Density: 1.5},
		{Provider: Anthropic, Name: "dense", InputTokensPerMinute: 1000, OutputTokensPerMinute: 1000, Density: 1.5},
		{Provider: Anthropic, Name: "sparse", InputTokensPerMinute: 1000, Density: 0.7},
	}})

	t.Run("openai", func(t *testing.T) {
		r := f.openai(t, "k", "dense", prompt, 10)
		require.Equal(t, http.StatusOK, r.status)
		usage := r.body["usage"].(map[string]any)
		require.EqualValues(t, 150, usage["prompt_tokens"])
		require.Equal(t, "850", r.header.Get("x-ratelimit-remaining-tokens"), "TPM charged max(max_tokens, 150)")
	})
	t.Run("anthropic", func(t *testing.T) {
		r := f.anthropic(t, "k", "dense", prompt, 500)
		require.Equal(t, http.StatusOK, r.status)
		usage := r.body["usage"].(map[string]any)
		require.EqualValues(t, 150, usage["input_tokens"])
		require.Equal(t, "850", r.header.Get("anthropic-ratelimit-input-tokens-remaining"))
		out := int64(usage["output_tokens"].(float64))
		require.Less(t, out, int64(500))
		// max_tokens is charged while the call runs, the unused part given
		// back with the answer, as Anthropic documents for OTPM.
		again := f.anthropic(t, "k", "dense", "x", 1)
		require.Equal(t, http.StatusOK, again.status)
		require.Equal(t, itoa(1000-out-1), again.header.Get("anthropic-ratelimit-output-tokens-remaining"))
	})
	t.Run("sparse", func(t *testing.T) {
		r := f.anthropic(t, "k", "sparse", prompt, 5)
		usage := r.body["usage"].(map[string]any)
		require.EqualValues(t, 70, usage["input_tokens"])
		require.EqualValues(t, 5, usage["output_tokens"], "cut at max_tokens as the model counts them")
	})
	t.Run("limit", func(t *testing.T) {
		// 6 more calls of 150 tokens do not fit the 1000-token minute the
		// way 100-token estimates would.
		var limited bool
		for range 7 {
			if r := f.anthropic(t, "k", "dense", prompt, 1); r.status == http.StatusTooManyRequests {
				limited = true
				break
			}
		}
		require.True(t, limited, "the bucket binds at the model's own count")
	})
}

func TestDensityIsValidated(t *testing.T) {
	for _, d := range []float64{-1, MaxDensity + 1} {
		err := Config{Models: []Model{{Provider: OpenAI, Name: "m", Density: d}}}.Validate()
		require.ErrorContains(t, err, "models[0].density")
	}
	require.NoError(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", Density: 1.3}}}.Validate())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
