package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/internal/testnet"
	"github.com/tollgate/tollgate/workflows"
)

// serve on the embedded defaults: a client runs an agent workflow through
// it, and /metrics shows the admissions it counted.
func TestServeOnTheEmbeddedDefaults(t *testing.T) {
	temporalAddr, uiAddr := testnet.FreeAddr(t), testnet.FreeAddr(t)
	// Metrics listen on a port of the kernel's choosing, read back from the
	// log: the embedded server binds ports of its own meanwhile, and one
	// picked free beforehand may be one of them by the time it is used.
	env := map[string]string{"TEMPORAL_EMBEDDED_ADDRESS": temporalAddr, "METRICS_ADDR": "127.0.0.1:0", "TEMPORAL_UI_ADDRESS": uiAddr, "TASK_QUEUE": "serve-test"}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncbuf.Buffer
	exit := make(chan int, 1)
	go func() { exit <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, &logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exit:
			require.Equal(t, 0, code, "serve exits cleanly when interrupted; logs:\n%s", logs.String())
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30 s of the interrupt")
		}
	})

	var c client.Client
	require.Eventually(t, func() bool {
		if !strings.Contains(logs.String(), "worker started") {
			return false
		}
		var err error
		c, err = client.Dial(client.Options{HostPort: temporalAddr, Logger: quietSDKLogger()})
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "serve did not start; logs:\n%s", logs.String())
	defer c.Close()

	out := logs.String()
	for _, says := range []string{"temporal: embedded server", "temporal ui: serving", "quota store: process memory", "providers: simulated by llmsim", "metrics: Prometheus endpoint"} {
		require.Contains(t, out, says, "the logs say which parts are embedded or simulated")
	}
	require.Contains(t, out, "url=http://"+uiAddr+"/namespaces/default/workflows", "the UI's URL is logged")
	ui, err := http.Get("http://" + uiAddr + "/")
	require.NoError(t, err)
	ui.Body.Close()
	require.Equal(t, http.StatusOK, ui.StatusCode, "the Temporal UI answers beside the embedded server")

	runCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	r, err := c.ExecuteWorkflow(runCtx, client.StartWorkflowOptions{ID: "serve-test-agent", TaskQueue: "serve-test"}, workflows.AgentWorkflow,
		workflows.AgentInput{Provider: activities.OpenAI, Model: simPrimary, Task: "Plan a picnic.", Tools: demoTools[:1], MaxOutputTokens: 64})
	require.NoError(t, err)
	var res workflows.AgentResult
	require.NoError(t, r.Get(runCtx, &res))
	require.Len(t, res.Turns, 2)
	require.Equal(t, simPrimary, res.Turns[1].Model)
	require.Equal(t, 1, res.ToolCalls, "the tool registered beside Tollgate's activities ran")

	m := regexp.MustCompile(`metrics: Prometheus endpoint" url=(http://127\.0\.0\.1:[0-9]+/metrics)`).FindStringSubmatch(out)
	require.NotNil(t, m, "the metrics URL is logged; logs:\n%s", out)
	resp, err := http.Get(m[1])
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	metrics := string(body)
	require.Contains(t, metrics, `tollgate_admissions_total{`)
	require.Regexp(t, `tollgate_admissions_total\{[^}]*decision="granted"[^}]*key="openai/default/gpt-4o-mini"[^}]*\} 2`, metrics)
	require.Regexp(t, `tollgate_bucket_available\{axis="requests",key="openai/default/gpt-4o-mini"`, metrics)
	require.Regexp(t, `tollgate_estimate_ratio\{axis="tokens",key="openai/default/gpt-4o-mini"[^}]*\} 1\b`, metrics,
		"the learned estimate ratio: 1 against llmsim's default density")
	require.Contains(t, metrics, "temporal_", "the SDK's metrics share the endpoint")

	// health with the worker's own configuration, its metrics port fixed
	// as an operator's would be.
	healthEnv := maps.Clone(env)
	healthEnv["METRICS_ADDR"] = strings.TrimSuffix(strings.TrimPrefix(m[1], "http://"), "/metrics")
	var healthOut, healthErr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"health"}, func(k string) string { return healthEnv[k] }, &healthOut, &healthErr),
		"health with the worker's own configuration; stderr: %s", healthErr.String())
	require.Contains(t, healthOut.String(), "healthy")
}

func TestHealthWithNoWorkerRunning(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"health", "-metrics-addr", testnet.FreeAddr(t)}, func(string) string { return "" }, io.Discard, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "no worker answers on METRICS_ADDR")

	stderr.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"health"}, func(k string) string { return map[string]string{"METRICS_ADDR": "off"}[k] }, io.Discard, &stderr))
	require.Contains(t, stderr.String(), "METRICS_ADDR (-metrics-addr)")
}

func TestBadConfigExitsBeforeStarting(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "-store-failure", "open"}, func(string) string { return "" }, io.Discard, &stderr)
	require.Equal(t, 2, code)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one line: %q", stderr.String())
	require.Contains(t, stderr.String(), "STORE_FAILURE (-store-failure)")
}

// A flag that does not parse is one line, like any bad setting, with exit
// code 2, and no usage text.
func TestBadFlagIsOneConfigError(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "-temporal-adress", "x:1"}, func(string) string { return "" }, io.Discard, &stderr)
	require.Equal(t, 2, code)
	require.Equal(t, "worker: -temporal-adress is not a flag: did you mean -temporal-address? run with -h for the flags\n", stderr.String())
}

// A flag overrides a bad environment value instead of being refused by it.
func TestFlagWinsOverABadEnvironmentValue(t *testing.T) {
	env := map[string]string{"STORE_LOCAL_SHARE": "half"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"status", "-store-local-share", "1"}, func(k string) string { return env[k] }, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
}

func TestUsageNamesEveryCommand(t *testing.T) {
	var stdout bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"help"}, func(string) string { return "" }, &stdout, io.Discard))
	require.Contains(t, stdout.String(), "usage: worker [serve|demo|status|sim|health] [flags]")
	for _, cmd := range []string{"serve", "demo", "status", "sim", "health"} {
		require.Regexp(t, `(?m)^  `+cmd+` `, stdout.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"deploy"}, func(string) string { return "" }, io.Discard, &stderr))
	require.Contains(t, stderr.String(), `unknown command "deploy"`)
}

func TestStatusOnTheMemoryStore(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"status"}, func(string) string { return "" }, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	out := stdout.String()
	require.Contains(t, out, "no REDIS_URL")
	require.Regexp(t, `openai/default/gpt-4o-mini\s+requests\s+57\s+0\.95\s+0\.95\s+\[#+\]`, out)
	require.Regexp(t, `anthropic/default/claude-3-5-haiku-latest\s+output_tokens\s+400000`, out)
}

// With Redis down, status exits 1 with one line naming REDIS_URL, instead of
// showing the full stand-in buckets of a worker's fallback.
func TestStatusWithRedisUnreachable(t *testing.T) {
	env := map[string]string{"REDIS_URL": "redis://" + testnet.FreeAddr(t) + "/0", "STORE_FAILURE": "local"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"status"}, func(k string) string { return env[k] }, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Empty(t, stdout.String())
	msg := strings.TrimSpace(stderr.String())
	require.NotContains(t, msg, "\n", "one line: %q", msg)
	require.Contains(t, msg, "REDIS_URL (-redis-url)")
	require.Contains(t, msg, "is unreachable")
}

func TestSimWithABadSIMConfig(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"sim", "-sim-config", "/nonexistent/sim.yaml"}, func(string) string { return "" }, io.Discard, &stderr)
	require.Equal(t, 2, code)
	require.Contains(t, stderr.String(), `SIM_CONFIG (-sim-config) "/nonexistent/sim.yaml" cannot be used`)
	require.Contains(t, stderr.String(), "check the path")
}

// `worker sim` serves the default profile for a fleet to share.
func TestSimServesTheDefaultProfile(t *testing.T) {
	addr := testnet.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"sim", "-sim-address", addr}, func(string) string { return "" }, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-exit)
	}()
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`
	var status int
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+simOpenAIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		status = resp.StatusCode
		return true
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, http.StatusOK, status)
}

// Output to a file, a pipe or /dev/null (a character device, but no
// terminal) gets plain progress lines, not redraws.
func TestIsTerminalOnlyForATerminal(t *testing.T) {
	require.False(t, isTerminal(&bytes.Buffer{}))
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	require.False(t, isTerminal(null))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, isTerminal(w))
}
