package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/price"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// Start wires a worker onto a Temporal server and a provider it is given,
// as a service's own main would: an agent workflow runs through it, governed
// by the budgets passed in.
func TestStartOnAGivenServerAndProvider(t *testing.T) {
	dev, err := devserver.Start(devserver.Options{})
	require.NoError(t, err)
	t.Cleanup(dev.Stop)
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: "gpt-lib", RequestsPerMinute: 600, TokensPerMinute: 1_000_000}}})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	b, err := ParsePolicies([]byte("policies:\n  - provider: openai\n    model: gpt-lib\n    limits: {requests_per_minute: 600}\n"))
	require.NoError(t, err)
	var logs syncbuf.Buffer
	w, err := Start(context.Background(), Config{
		TemporalAddress: dev.Address(), Namespace: dev.Namespace(), TaskQueue: "library-test", MetricsAddr: "off",
		OpenAIAPIKey: "sk-test", OpenAIBaseURL: srv.URL + "/v1/",
	}, b, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer w.Stop()
	require.Contains(t, logs.String(), "providers: OpenAI (key set)")
	require.NotContains(t, logs.String(), "ungoverned")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := w.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "library-test-agent", TaskQueue: "library-test"}, workflows.AgentWorkflow,
		workflows.AgentInput{Provider: activities.OpenAI, Model: "gpt-lib", Task: "Plan a picnic.", MaxOutputTokens: 16})
	require.NoError(t, err)
	var res workflows.AgentResult
	require.NoError(t, run.Get(ctx, &res))
	require.Len(t, res.Turns, 1)
	require.Equal(t, int64(1), w.Stats().Admitted, "the call went through the interceptor")
}

// With no policies Start warns that calls run ungoverned; with no provider
// key it refuses before anything starts, naming the keys.
func TestStartSaysWhatIsMissing(t *testing.T) {
	_, err := Start(context.Background(), Config{TemporalAddress: "127.0.0.1:1", MetricsAddr: "off"}, Budgets{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
	require.Equal(t, "OPENAI_API_KEY", ce.Env)
	require.ErrorContains(t, err, "ANTHROPIC_API_KEY and GEMINI_API_KEY")

	dev, err := devserver.Start(devserver.Options{})
	require.NoError(t, err)
	t.Cleanup(dev.Stop)
	var logs syncbuf.Buffer
	w, err := Start(context.Background(), Config{TemporalAddress: dev.Address(), Namespace: dev.Namespace(), MetricsAddr: "off", AnthropicAPIKey: "sk-ant"},
		Budgets{}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	w.Stop()
	require.Contains(t, logs.String(), "calls run ungoverned; set POLICIES")
}

// The interceptor charges money budgets by the policies file's price table
// and falls back on the budgets it marks spend_fallback; with no policies
// file it prices by the shipped table.
func TestInterceptorOptionsCarryThePricesAndSpendFallbacks(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	meter := noop.NewMeterProvider().Meter("test")
	b, err := ParsePolicies([]byte(moneyFile))
	require.NoError(t, err)
	store, err := memory.New(b.Policies, memory.Options{})
	require.NoError(t, err)
	opts := interceptorOptions(Config{}, b.withDefaults(), store, meter, logger)
	ft, ok := opts.Prices.Lookup("openai", "ft-support-v2")
	require.True(t, ok, "the file's prices")
	require.Equal(t, price.Price{Input: 3_000_001, Output: 12_000_000}, ft)
	require.Equal(t, []quota.Key{{Provider: "openai", Account: "team-a", Model: "gpt-4o", Tenant: "acme"}}, opts.FallbackWhenSpent)
	_, err = interceptor.New(opts)
	require.NoError(t, err)

	none, err := memory.New(quota.Policies{}, memory.Options{})
	require.NoError(t, err)
	opts = interceptorOptions(Config{}, Budgets{}.withDefaults(), none, meter, logger)
	require.Equal(t, price.Shipped().Len(), opts.Prices.Len())
	want, _ := price.Shipped().Lookup("anthropic", "claude-sonnet-4-5")
	got, ok := opts.Prices.Lookup("anthropic", "claude-sonnet-4-5")
	require.True(t, ok, "the shipped prices without a policies file")
	require.Equal(t, want, got)
	require.Empty(t, opts.FallbackWhenSpent)
}
