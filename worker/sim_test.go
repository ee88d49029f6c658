package worker

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
	w, err := Start(context.Background(), Config{
		EmbeddedAddress: "127.0.0.1:0", MetricsAddr: "off", TaskQueue: "sim-config-test",
		SimConfig: profile, Policies: policies,
	}, quietLogger())
	require.NoError(t, err)
	defer w.Stop()
	require.NotNil(t, w.Sim())
	require.Equal(t, http.StatusOK, chat(t, w.Sim().Handler(), SimOpenAIKey, "sim-test-model"))
	require.Equal(t, http.StatusNotFound, chat(t, w.Sim().Handler(), SimOpenAIKey, SimPrimary), "the default profile is not served")
}

// A profile whose accounts would refuse the keys the worker sends its
// in-process simulator is a configuration error before anything starts, not
// a 401 on every call.
func TestStartRejectsASIMConfigThatRefusesTheWorkersKeys(t *testing.T) {
	profile := writeFile(t, "sim.yaml", "models:\n  - provider: openai\n    name: gpt-4o\naccounts:\n  - name: team\n    api_key: sk-team\n")
	begin := time.Now()
	_, err := Start(context.Background(), Config{EmbeddedAddress: "127.0.0.1:0", MetricsAddr: "off", SimConfig: profile}, quietLogger())
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	require.Equal(t, "SIM_CONFIG", ce.Env)
	require.ErrorContains(t, err, SimOpenAIKey)
	require.ErrorContains(t, err, "list no accounts")
	require.Less(t, time.Since(begin), 5*time.Second, "no Temporal server was started first")
}

// `worker sim` serves SIM_CONFIG's profile, accounts included.
func TestServeSimServesSIMConfig(t *testing.T) {
	profile := writeFile(t, "sim.json", `{"models":[{"provider":"openai","name":"sim-test-model"}],"accounts":[{"name":"team","api_key":"sk-team"}]}`)
	addr := testnet.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeSim(ctx, Config{SimAddress: addr, SimConfig: profile}, quietLogger()) }()
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
	require.Equal(t, http.StatusUnauthorized, post(SimOpenAIKey, "sim-test-model"), "only the profile's accounts are accepted")
}

func TestServeSimRejectsABadSIMConfig(t *testing.T) {
	profile := writeFile(t, "sim.yaml", "models: []\n")
	err := ServeSim(context.Background(), Config{SimAddress: "127.0.0.1:0", SimConfig: profile}, quietLogger())
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	require.Equal(t, "SIM_CONFIG", ce.Env)
	require.ErrorContains(t, err, "list at least one model")
}
