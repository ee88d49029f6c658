package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/worker"
)

// The models of the default simulated profile, and the API keys the worker
// uses against the in-process simulator (not secrets: llmsim accepts only
// these).
const (
	// simPrimary is the tight model: 60 requests per minute, the limit
	// most agent calls compete for.
	simPrimary = "gpt-4o-mini"
	// simBackup is the roomy model the others fall back to.
	simBackup = "gpt-4o"
	// simFlaky is a roomy model the demo makes llmsim rate limit with
	// injected 429s, so calls to it escalate to simBackup.
	simFlaky = "gpt-4.1"
	// simCapped is an Anthropic model whose account ("research") has a
	// spend cap of simSpendCapTokens tokens; calls past it fall back to
	// simBackup.
	simCapped = "claude-3-5-haiku-latest"
	// simSpendCapTokens is the research account's spend cap, in tokens.
	simSpendCapTokens = 600
	// simGemini is a Gemini model whose project has only
	// simGeminiRequestsPerDay requests left today: its key closes until
	// midnight America/Los_Angeles, and calls fall back to simBackup.
	simGemini = "gemini-2.5-flash"
	// simGeminiRequestsPerDay is what the simulator allows simGemini a day:
	// what is left of the project's 250 after its other apps' calls, which
	// Tollgate cannot count (Gemini limits per project, not per key).
	simGeminiRequestsPerDay = 10

	// simOpenAIKey, simAnthropicKey and simGeminiKey are the keys of the
	// simulated accounts "main" (OpenAI), "research" (Anthropic) and
	// "studio" (Gemini).
	simOpenAIKey    = "sim-openai-main"
	simAnthropicKey = "sim-anthropic-research"
	simGeminiKey    = "sim-gemini-studio"
)

// defaultSimConfig is the simulated provider the command runs when no API
// key is set (and the demo always runs):
//
//	model                    provider   limits (per account)                     notes
//	gpt-4o-mini              openai     60 RPM, 200k TPM                         the tight primary
//	gpt-4o                   openai     600 RPM, 2M TPM                          the backup
//	gpt-4.1                  openai     600 RPM, 2M TPM                          the demo injects 429s
//	claude-3-5-haiku-latest  anthropic  600 RPM, 1M ITPM, 400k OTPM              account "research": spend cap 600 tokens
//	gemini-2.5-flash         gemini     10 RPM, 250k TPM (input), 10 a day       the project's last requests of its day
//
// Answers take 150–400 ms. Buckets start full and refill continuously over a
// minute, as the providers' do; Gemini's day ends at midnight
// America/Los_Angeles.
func defaultSimConfig() llmsim.Config {
	return llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.OpenAI, Name: simPrimary, RequestsPerMinute: 60, TokensPerMinute: 200_000},
			{Provider: llmsim.OpenAI, Name: simBackup, RequestsPerMinute: 600, TokensPerMinute: 2_000_000},
			{Provider: llmsim.OpenAI, Name: simFlaky, RequestsPerMinute: 600, TokensPerMinute: 2_000_000},
			{Provider: llmsim.Anthropic, Name: simCapped, RequestsPerMinute: 600, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 400_000},
			{Provider: llmsim.Gemini, Name: simGemini, RequestsPerMinute: 10, TokensPerMinute: 250_000, RequestsPerDay: simGeminiRequestsPerDay},
		},
		Accounts: []llmsim.Account{
			{Name: "main", APIKey: simOpenAIKey},
			{Name: "research", APIKey: simAnthropicKey, SpendCapTokens: simSpendCapTokens},
			{Name: "studio", APIKey: simGeminiKey},
		},
		Latency: llmsim.Latency{Fixed: 150 * time.Millisecond, Jitter: 250 * time.Millisecond},
		Seed:    1,
	}
}

// defaultPoliciesYAML is the policies file the command uses with the
// simulator when POLICIES is empty: each model's limits as llmsim enforces
// them, less 5% headroom on the primary, and the fallback chains. The Gemini
// entry has its tier's published 250 requests a day; the simulated project
// has far fewer left, so Gemini's own per-day 429 closes the key.
const defaultPoliciesYAML = `policies:
  - provider: openai
    model: gpt-4o-mini
    limits: {requests_per_minute: 60, tokens_per_minute: 200000}
    headroom: 0.05
    fallbacks: [openai/gpt-4o]
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 600, tokens_per_minute: 2000000}
  - provider: openai
    model: gpt-4.1
    limits: {requests_per_minute: 600, tokens_per_minute: 2000000}
    fallbacks: [openai/gpt-4o]
  - provider: anthropic
    model: claude-3-5-haiku-latest
    limits: {requests_per_minute: 600, input_tokens_per_minute: 1000000, output_tokens_per_minute: 400000}
    fallbacks: [openai/gpt-4o]
  - provider: gemini
    model: gemini-2.5-flash
    limits: {requests_per_minute: 10, tokens_per_minute: 250000, requests_per_day: 250, zone: America/Los_Angeles}
    headroom: 0.2
    fallbacks: [openai/gpt-4o]
`

// defaultBudgets returns defaultPoliciesYAML parsed.
func defaultBudgets() worker.Budgets {
	b, err := worker.ParsePolicies([]byte(defaultPoliciesYAML))
	if err != nil {
		panic("worker: defaultPoliciesYAML is invalid: " + err.Error()) // programmer error
	}
	return b
}

// serveSim serves the simulator profile cfg names (SIM_CONFIG, or
// defaultSimConfig) on cfg.SimAddress until ctx is done: one simulated
// provider that a fleet of workers shares (give them
// OPENAI_BASE_URL=http://ADDR/v1/, ANTHROPIC_BASE_URL=http://ADDR,
// GEMINI_BASE_URL=http://ADDR and keys the profile accepts: simOpenAIKey,
// simAnthropicKey and simGeminiKey for the default), so
// that the providers' limits are enforced once for the fleet, as the real
// ones are. It returns a *worker.ConfigError for a bad profile, and the
// listener's error.
func serveSim(ctx context.Context, cfg config, logger *slog.Logger) error {
	cfg = cfg.withDefaults()
	profile, err := cfg.simProfile()
	if err != nil {
		return err
	}
	sim, err := llmsim.New(profile)
	if err != nil {
		return fmt.Errorf("worker: simulator: %w", err)
	}
	l, err := net.Listen("tcp", cfg.SimAddress)
	if err != nil {
		return fmt.Errorf("worker: simulator: listen on %s: %w (set SIM_ADDRESS to a free address)", cfg.SimAddress, err)
	}
	logger.Info("simulator: serving "+cfg.simProfileName(), "address", l.Addr().String(), "models", simModels(profile),
		"openai_base_url", "http://"+l.Addr().String()+"/v1/", "anthropic_base_url", "http://"+l.Addr().String(),
		"gemini_base_url", "http://"+l.Addr().String())
	return sim.Serve(ctx, l)
}

// simProfile returns the simulator profile SIM_CONFIG names, read and
// validated by llmsim, or defaultSimConfig when it is empty. A file that
// cannot be used is a *worker.ConfigError naming SIM_CONFIG.
func (c config) simProfile() (llmsim.Config, error) {
	if c.SimConfig == "" {
		return defaultSimConfig(), nil
	}
	if _, err := os.Stat(c.SimConfig); err != nil {
		return llmsim.Config{}, &worker.ConfigError{Env: "SIM_CONFIG", Value: c.SimConfig, Problem: "cannot be used",
			Fix: fmt.Sprintf("cannot read the file (%v): check the path, or leave SIM_CONFIG empty for the default profile", err), Err: err}
	}
	p, err := llmsim.LoadConfig(c.SimConfig)
	if err != nil {
		return llmsim.Config{}, &worker.ConfigError{Env: "SIM_CONFIG", Value: c.SimConfig, Problem: "cannot be used",
			Fix: strings.Join(strings.Fields(err.Error()), " ") + " (the format is llmsim.Config's; testsuite/llmsim/testdata/example.yaml is an example)", Err: err}
	}
	return p, nil
}

// simProfileName says which profile simProfile returns, for logs.
func (c config) simProfileName() string {
	if c.SimConfig == "" {
		return "the default profile"
	}
	return "SIM_CONFIG " + c.SimConfig
}

// checkInProcessSim reports a *worker.ConfigError when profile, served
// in-process, would refuse the keys the worker sends it (simOpenAIKey,
// simAnthropicKey, simGeminiKey): a profile that lists accounts must list
// those keys for the providers it serves.
func (c config) checkInProcessSim(profile llmsim.Config) error {
	if len(profile.Accounts) == 0 {
		return nil // any key is accepted
	}
	keys := make(map[string]bool, len(profile.Accounts))
	for _, a := range profile.Accounts {
		keys[a.APIKey] = true
	}
	for _, m := range profile.Models {
		key := simOpenAIKey
		switch m.Provider {
		case llmsim.Anthropic:
			key = simAnthropicKey
		case llmsim.Gemini:
			key = simGeminiKey
		}
		if !keys[key] {
			return &worker.ConfigError{Env: "SIM_CONFIG", Value: c.SimConfig,
				Problem: "lists no account with the key the worker sends its in-process simulator for " + m.Provider + " (" + key + ")",
				Fix: fmt.Sprintf("add an account with api_key %q for OpenAI models, %q for Anthropic models and %q for Gemini models, or list no accounts to accept any key",
					simOpenAIKey, simAnthropicKey, simGeminiKey)}
		}
	}
	return nil
}

// simModels lists a profile's models as "provider/name", for logs.
func simModels(p llmsim.Config) []string {
	ms := make([]string, len(p.Models))
	for i, m := range p.Models {
		ms[i] = m.Provider + "/" + m.Name
	}
	return ms
}
