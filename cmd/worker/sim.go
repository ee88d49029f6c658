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

	// simOpenAIKey and simAnthropicKey are the keys of the simulated
	// accounts "main" (OpenAI) and "research" (Anthropic).
	simOpenAIKey    = "sim-openai-main"
	simAnthropicKey = "sim-anthropic-research"
)

// defaultSimConfig is the simulated provider the command runs when no API
// key is set (and the demo always runs):
//
//	model                    provider   limits (per account)                     notes
//	gpt-4o-mini              openai     60 RPM, 200k TPM                         the tight primary
//	gpt-4o                   openai     600 RPM, 2M TPM                          the backup
//	gpt-4.1                  openai     600 RPM, 2M TPM                          the demo injects 429s
//	claude-3-5-haiku-latest  anthropic  600 RPM, 1M ITPM, 400k OTPM              account "research": spend cap 600 tokens
//
// Answers take 150–400 ms. Buckets start full and refill continuously over a
// minute, as the providers' do.
func defaultSimConfig() llmsim.Config {
	return llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.OpenAI, Name: simPrimary, RequestsPerMinute: 60, TokensPerMinute: 200_000},
			{Provider: llmsim.OpenAI, Name: simBackup, RequestsPerMinute: 600, TokensPerMinute: 2_000_000},
			{Provider: llmsim.OpenAI, Name: simFlaky, RequestsPerMinute: 600, TokensPerMinute: 2_000_000},
			{Provider: llmsim.Anthropic, Name: simCapped, RequestsPerMinute: 600, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 400_000},
		},
		Accounts: []llmsim.Account{
			{Name: "main", APIKey: simOpenAIKey},
			{Name: "research", APIKey: simAnthropicKey, SpendCapTokens: simSpendCapTokens},
		},
		Latency: llmsim.Latency{Fixed: 150 * time.Millisecond, Jitter: 250 * time.Millisecond},
		Seed:    1,
	}
}

// defaultPoliciesYAML is the policies file the command uses with the
// simulator when POLICIES is empty: each model's limits as llmsim enforces
// them, less 5% headroom on the primary, and the fallback chains.
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
// OPENAI_BASE_URL=http://ADDR/v1/, ANTHROPIC_BASE_URL=http://ADDR and keys
// the profile accepts: simOpenAIKey and simAnthropicKey for the default), so
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
		"openai_base_url", "http://"+l.Addr().String()+"/v1/", "anthropic_base_url", "http://"+l.Addr().String())
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

// checkInProcessSim reports a *worker.ConfigError when profile, served in-process,
// would refuse the keys the worker sends it (simOpenAIKey, simAnthropicKey):
// a profile that lists accounts must list those keys for the providers it
// serves.
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
		if m.Provider == llmsim.Anthropic {
			key = simAnthropicKey
		}
		if !keys[key] {
			return &worker.ConfigError{Env: "SIM_CONFIG", Value: c.SimConfig,
				Problem: "lists no account with the key the worker sends its in-process simulator for " + m.Provider + " (" + key + ")",
				Fix:     fmt.Sprintf("add an account with api_key %q for OpenAI models and one with %q for Anthropic models, or list no accounts to accept any key", simOpenAIKey, simAnthropicKey)}
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
