package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testnet"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/worker"
)

// writeFile writes data to name in a fresh temporary directory and returns
// its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

// chat sends one OpenAI chat completion for model with key to h and returns
// the status.
func chat(t *testing.T, h http.Handler, key, model string) int {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// SIM_CONFIG replaces the in-process simulator's default profile.
func TestStartServesSIMConfigInProcess(t *testing.T) {
	profile := writeFile(t, "sim.yaml", "models:\n  - provider: openai\n    name: sim-test-model\n    requests_per_minute: 10\n")
	policies := writeFile(t, "policies.yaml", "policies:\n  - provider: openai\n    model: sim-test-model\n    limits: {requests_per_minute: 10}\n")
	a, err := startApp(context.Background(), config{
		Config:          worker.Config{MetricsAddr: "off", TaskQueue: "sim-config-test", Policies: policies},
		EmbeddedAddress: "127.0.0.1:0", UIAddress: "off", SimConfig: profile,
	}, quietLogger())
	require.NoError(t, err)
	defer a.stop()
	require.NotNil(t, a.sim)
	require.Equal(t, http.StatusOK, chat(t, a.sim.Handler(), simOpenAIKey, "sim-test-model"))
	require.Equal(t, http.StatusNotFound, chat(t, a.sim.Handler(), simOpenAIKey, simPrimary), "the default profile is not served")
}

// A profile whose accounts would refuse the keys the worker sends its
// in-process simulator is a configuration error before anything starts, not
// a 401 on every call.
func TestStartRejectsASIMConfigThatRefusesTheWorkersKeys(t *testing.T) {
	profile := writeFile(t, "sim.yaml", "models:\n  - provider: openai\n    name: gpt-4o\naccounts:\n  - name: team\n    api_key: sk-team\n")
	begin := time.Now()
	_, err := startApp(context.Background(), config{Config: worker.Config{MetricsAddr: "off"}, EmbeddedAddress: "127.0.0.1:0", SimConfig: profile}, quietLogger())
	var ce *worker.ConfigError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	require.Equal(t, "SIM_CONFIG", ce.Env)
	require.ErrorContains(t, err, simOpenAIKey)
	require.ErrorContains(t, err, "list no accounts")
	require.Less(t, time.Since(begin), 5*time.Second, "no Temporal server was started first")
}

// `worker sim` serves SIM_CONFIG's profile, accounts included.
func TestServeSimServesSIMConfig(t *testing.T) {
	profile := writeFile(t, "sim.json", `{"models":[{"provider":"openai","name":"sim-test-model"}],"accounts":[{"name":"team","api_key":"sk-team"}]}`)
	addr := testnet.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveSim(ctx, config{SimAddress: addr, SimConfig: profile}, quietLogger()) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	post := func(key, model string) int {
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return post("sk-team", "sim-test-model") != 0 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusOK, post("sk-team", "sim-test-model"))
	require.Equal(t, http.StatusUnauthorized, post(simOpenAIKey, "sim-test-model"), "only the profile's accounts are accepted")
}

func TestServeSimRejectsABadSIMConfig(t *testing.T) {
	profile := writeFile(t, "sim.yaml", "models: []\n")
	err := serveSim(context.Background(), config{SimAddress: "127.0.0.1:0", SimConfig: profile}, quietLogger())
	var ce *worker.ConfigError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	require.Equal(t, "SIM_CONFIG", ce.Env)
	require.ErrorContains(t, err, "list at least one model")
}

func TestDefaultBudgetsMatchTheSimulator(t *testing.T) {
	b := defaultBudgets()
	sim := defaultSimConfig()
	require.Len(t, b.Policies.Keys(), len(sim.Models))
	for _, m := range sim.Models {
		_, p, ok := b.Policies.Lookup(quota.Key{Provider: m.Provider, Model: m.Name})
		require.True(t, ok, m.Name)
		l, ok := p.Limit(quota.Requests)
		require.True(t, ok, m.Name)
		require.Equal(t, m.RequestsPerMinute, l.Capacity, "%s: Tollgate budgets what the provider allows", m.Name)
		require.LessOrEqual(t, p.Effective(l.Capacity), m.RequestsPerMinute)
	}
}

// deploy/policies.yaml, which docker-compose.yml mounts, is the simulator's
// defaults: the compose fleet budgets what its shared llmsim allows.
func TestDeployPoliciesAreTheDefaults(t *testing.T) {
	b, err := worker.LoadPolicies("../../deploy/policies.yaml")
	require.NoError(t, err)
	def := defaultBudgets()
	require.Equal(t, def.Policies.Keys(), b.Policies.Keys())
	require.Equal(t, def.Fallbacks, b.Fallbacks)
	for _, k := range def.Policies.Keys() {
		_, want, _ := def.Policies.Lookup(k)
		_, got, _ := b.Policies.Lookup(k)
		require.Equal(t, want, got, k.String())
	}
}
