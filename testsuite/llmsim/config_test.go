package llmsim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const yamlConfig = `
models:
  - provider: openai
    name: gpt-4o
    requests_per_minute: 500
    tokens_per_minute: 30000
    requests_per_day: 10000
    context_window: 128000
  - provider: anthropic
    name: claude-sonnet-4-5
    requests_per_minute: 50
    input_tokens_per_minute: 30000
    output_tokens_per_minute: 8000
accounts:
  - name: team-a
    api_key: sk-sim-a
    spend_cap_tokens: 1000000
overload:
  probability: 0.02
  retry_after: 2s
latency:
  fixed: 20ms
  jitter: 30ms
  distribution: normal
faults:
  - kind: rate_limit
    model: gpt-4o
    times: 4
    retry_after: 1s
seed: 42
`

const jsonConfig = `{
  "models": [{"provider": "openai", "name": "gpt-4o", "requests_per_minute": 500}],
  "latency": {"fixed": "5ms", "jitter": "2ms", "distribution": "exponential"},
  "faults": [{"kind": "overload", "provider": "anthropic", "status": 503}]
}`

func TestParseConfig(t *testing.T) {
	t.Run("yaml", func(t *testing.T) {
		c, err := ParseConfig([]byte(yamlConfig))
		require.NoError(t, err)
		require.Len(t, c.Models, 2)
		require.Equal(t, Model{Provider: Anthropic, Name: "claude-sonnet-4-5", RequestsPerMinute: 50, InputTokensPerMinute: 30000, OutputTokensPerMinute: 8000}, c.Models[1])
		require.Equal(t, []Account{{Name: "team-a", APIKey: "sk-sim-a", SpendCapTokens: 1000000}}, c.Accounts)
		require.Equal(t, Overload{Probability: 0.02, RetryAfter: 2 * time.Second}, c.Overload)
		require.Equal(t, Latency{Fixed: 20 * time.Millisecond, Jitter: 30 * time.Millisecond, Distribution: LatencyNormal}, c.Latency)
		require.Equal(t, []Fault{{Kind: FaultRateLimit, Model: "gpt-4o", Times: 4, RetryAfter: time.Second}}, c.Faults)
		require.EqualValues(t, 42, c.Seed)
	})
	t.Run("json", func(t *testing.T) {
		c, err := ParseConfig([]byte(jsonConfig))
		require.NoError(t, err)
		require.Equal(t, Latency{Fixed: 5 * time.Millisecond, Jitter: 2 * time.Millisecond, Distribution: LatencyExponential}, c.Latency)
		require.Equal(t, []Fault{{Kind: FaultOverload, Provider: Anthropic, Status: 503}}, c.Faults)
	})
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "sim.yaml")
		require.NoError(t, os.WriteFile(path, []byte(yamlConfig), 0o600))
		c, err := LoadConfig(path)
		require.NoError(t, err)
		require.Len(t, c.Models, 2)
		_, err = LoadConfig(filepath.Join(dir, "missing.yaml"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   string
		field string // a *ConfigError's Field, or text the decoder's error must contain
	}{
		{"no models", `seed: 1`, "models"},
		{"unknown provider", `models: [{provider: mistral, name: x}]`, "models[0].provider"},
		{"gemini input tokens", `models: [{provider: gemini, name: x, input_tokens_per_minute: 5}]`, "models[0].input_tokens_per_minute"},
		{"missing name", `models: [{provider: openai}]`, "models[0].name"},
		{"duplicate model", `models: [{provider: openai, name: x}, {provider: openai, name: x}]`, "models[1].name"},
		{"negative limit", `models: [{provider: openai, name: x, requests_per_minute: -1}]`, "models[0].requests_per_minute"},
		{"negative period", `models: [{provider: openai, name: x, requests_per_minute: 5, period: -1s}]`, "models[0].period"},
		{"input tokens on openai", `models: [{provider: openai, name: x, input_tokens_per_minute: 5}]`, "models[0].input_tokens_per_minute"},
		{"tokens on anthropic", `models: [{provider: anthropic, name: x, tokens_per_minute: 5}]`, "models[0].tokens_per_minute"},
		{"account without key", `{models: [{provider: openai, name: x}], accounts: [{name: a}]}`, "accounts[0].api_key"},
		{"duplicate account", `{models: [{provider: openai, name: x}], accounts: [{name: a, api_key: k}, {name: a, api_key: j}]}`, "accounts[1].name"},
		{"probability", `{models: [{provider: openai, name: x}], overload: {probability: 1.5}}`, "overload.probability"},
		{"overload status", `{models: [{provider: openai, name: x}], overload: {status: 429}}`, "overload.status"},
		{"negative latency", `{models: [{provider: openai, name: x}], latency: {jitter: -1s}}`, "latency.jitter"},
		{"unknown distribution", `{models: [{provider: openai, name: x}], latency: {jitter: 1s, distribution: gaussian}}`, "latency.distribution"},
		{"distribution without jitter", `{models: [{provider: openai, name: x}], latency: {fixed: 1s, distribution: exponential}}`, "latency.jitter"},
		{"fault kind", `{models: [{provider: openai, name: x}], faults: [{kind: melt}]}`, "faults[0].kind"},
		{"fault times", `{models: [{provider: openai, name: x}], faults: [{kind: rate_limit, times: -1}]}`, "faults[0].times"},
		{"unknown field", `models: [{provider: openai, name: x, requests_per_minit: 5}]`, "field requests_per_minit not found"},
		{"bad duration", `{models: [{provider: openai, name: x}], latency: {fixed: soon}}`, "soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			require.Error(t, err)
			var ce *ConfigError
			if errors.As(err, &ce) {
				require.Equal(t, tc.field, ce.Field)
				require.NotEmpty(t, ce.Fix)
			} else {
				require.Contains(t, err.Error(), tc.field)
			}
			require.Contains(t, err.Error(), "llmsim: config")
		})
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "models", ce.Field)
	require.NotContains(t, (&ConfigError{Field: "accounts[1].api_key", Value: "(redacted)"}).Error(), "sk-")
}

func TestExampleConfigFile(t *testing.T) {
	c, err := LoadConfig("testdata/example.yaml")
	require.NoError(t, err)
	_, err = New(c)
	require.NoError(t, err)
}
