package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
	"github.com/tollgate/tollgate/workflows"
)

// Worker is a running Tollgate worker and what it started for it (the
// Temporal client, the quota store, the metrics endpoint). Build it with
// Start and end it with Stop. Its methods are safe for concurrent use.
type Worker struct {
	cfg     Config
	logger  *slog.Logger
	budgets Budgets
	tel     *telemetry
	client  client.Client
	worker  sdkworker.Worker
	ic      *interceptor.WorkerInterceptor
	store   quota.Store
	closers []func() error
}

// Start validates cfg (see Config.Validate), fills in its defaults and
// starts the worker: telemetry, the Temporal connection, the quota store
// governed by b (LoadPolicies(cfg.Policies), usually; the zero Budgets
// governs nothing, and Start warns so; a zero b.Prices is
// price.Shipped), and a Temporal worker on
// cfg.TaskQueue with Tollgate's interceptor, the LLM activities (for the
// providers whose keys cfg sets), the agent workflows and what
// cfg.Register registers. It
// logs, through logger, which parts it uses; no secret is logged. It
// returns Validate's error, a *ConfigError when no provider key is set, and
// the error of the first part that fails to start; whatever had started is
// stopped again.
func Start(ctx context.Context, cfg Config, b Budgets, logger *slog.Logger) (w *Worker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.HasProviderKey() {
		return nil, &ConfigError{Env: "OPENAI_API_KEY", Problem: "is empty, and so are ANTHROPIC_API_KEY and GEMINI_API_KEY",
			Fix: "set the API key of at least one provider (cmd/worker runs its simulator when none is set)"}
	}
	cfg = cfg.WithDefaults()
	w = &Worker{cfg: cfg, logger: logger, budgets: b.withDefaults()}
	defer func() {
		if err != nil {
			w.Stop()
			w = nil
		}
	}()

	if len(b.Policies.Keys()) == 0 {
		logger.Warn("policies: none: calls run ungoverned; set POLICIES to a policies file with your providers' limits")
	}
	if w.tel, err = newTelemetry(ctx, cfg, logger); err != nil {
		return w, err
	}
	if err := w.dial(); err != nil {
		return w, err
	}
	meter := w.tel.meter("tollgate")
	store, closeStore, err := openStore(cfg, w.budgets.Policies, meter, logger)
	if err != nil {
		return w, err
	}
	w.store = store
	w.closers = append(w.closers, closeStore)
	if err := registerGauges(meter, store, w.budgets); err != nil {
		return w, fmt.Errorf("worker: bucket gauges: %w", err)
	}
	acts, err := w.providers()
	if err != nil {
		return w, err
	}
	if w.ic, err = interceptor.New(interceptorOptions(cfg, w.budgets, store, meter, logger)); err != nil {
		return w, fmt.Errorf("worker: interceptor: %w", err)
	}
	w.worker = sdkworker.New(w.client, cfg.TaskQueue, sdkworker.Options{
		Interceptors: []sdkinterceptor.WorkerInterceptor{w.ic},
	})
	activities.Register(w.worker, acts)
	workflows.Register(w.worker)
	if cfg.Register != nil {
		cfg.Register(w.worker)
	}
	if err := w.worker.Start(); err != nil {
		w.worker = nil
		return w, fmt.Errorf("worker: start polling %q: %w", cfg.TaskQueue, err)
	}
	logger.Info("worker started", "task_queue", cfg.TaskQueue, "namespace", cfg.Namespace,
		"policies", len(w.budgets.Policies.Keys()), "fallbacks", len(w.budgets.Fallbacks), "pools", w.budgets.Pools.Len())
	return w, nil
}

// withDefaults returns b with its zero fields' defaults: a zero Prices is
// price.Shipped.
func (b Budgets) withDefaults() Budgets {
	if b.Prices.Len() == 0 {
		b.Prices = price.Shipped()
	}
	return b
}

// interceptorOptions returns the interceptor's options: store, and b's
// fallback chains, pools, price table, budgets that fall back when spent
// and named tenants.
func interceptorOptions(cfg Config, b Budgets, store quota.Store, meter metric.Meter, logger *slog.Logger) interceptor.Options {
	return interceptor.Options{
		Store:             store,
		Fallbacks:         b.Fallbacks,
		Pools:             b.Pools,
		Prices:            b.Prices,
		FallbackWhenSpent: b.FallbackWhenSpent,
		WaitInWorkflow:    cfg.WaitInWorkflow,
		Meter:             meter,
		Tenants:           b.Tenants(),
		Logger:            logger,
	}
}

// Run loads the budgets of cfg.Policies, starts the worker and serves until
// ctx is done (an interrupt, in a main), then stops it. It returns Start's
// error, or a *ConfigError naming POLICIES.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	var b Budgets
	if cfg.Policies != "" {
		var err error
		if b, err = LoadPolicies(cfg.Policies); err != nil {
			return &ConfigError{Env: "POLICIES", Value: cfg.Policies, Problem: "cannot be used", Fix: oneLine(err.Error()), Err: err}
		}
	}
	w, err := Start(ctx, cfg, b, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopping")
	w.Stop()
	return nil
}

// dial connects to Temporal. The client carries the SDK's metrics handler
// and tracing interceptor, which workers built on it inherit.
func (w *Worker) dial() error {
	cfg := w.cfg
	addr := cfg.TemporalAddress
	if addr == "" {
		addr = DefaultTemporalAddress
	}
	w.logger.Info("temporal: server", "address", addr, "namespace", cfg.Namespace)
	tracing, err := w.tel.tracing()
	if err != nil {
		return fmt.Errorf("worker: tracing interceptor: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:       addr,
		Namespace:      cfg.Namespace,
		Logger:         sdklog.NewStructuredLogger(w.logger.With("component", "temporal-sdk")),
		MetricsHandler: w.tel.sdkMetrics(w.logger),
		Interceptors:   []sdkinterceptor.ClientInterceptor{tracing},
	})
	if err != nil {
		return fmt.Errorf("worker: connect to Temporal at %s: %w (is the server up? set TEMPORAL_ADDRESS to its frontend's host:port)", addr, err)
	}
	w.client = c
	return nil
}

// providers builds the activities on the providers whose keys are set.
func (w *Worker) providers() (*activities.Activities, error) {
	cfg := w.cfg
	var ac activities.Config
	if cfg.OpenAIAPIKey != "" {
		ac.OpenAI = activities.ProviderConfig{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL,
			Organization: cfg.OpenAIOrganization, Project: cfg.OpenAIProject}
		w.logger.Info("providers: OpenAI (key set)", "base_url", orDefault(cfg.OpenAIBaseURL, activities.DefaultOpenAIBaseURL))
	}
	if cfg.AnthropicAPIKey != "" {
		ac.Anthropic = activities.ProviderConfig{APIKey: cfg.AnthropicAPIKey, BaseURL: cfg.AnthropicBaseURL}
		w.logger.Info("providers: Anthropic (key set)", "base_url", orDefault(cfg.AnthropicBaseURL, activities.DefaultAnthropicBaseURL))
	}
	if cfg.GeminiAPIKey != "" {
		ac.Gemini = activities.ProviderConfig{APIKey: cfg.GeminiAPIKey, BaseURL: cfg.GeminiBaseURL}
		w.logger.Info("providers: Gemini (key set)", "base_url", orDefault(cfg.GeminiBaseURL, activities.DefaultGeminiBaseURL))
	}
	accounts, err := w.budgets.accountConfigs(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	for _, a := range accounts {
		w.logger.Info("providers: pool member account (key set)", "provider", a.Provider, "account", a.Account,
			"base_url", orDefault(a.Config.BaseURL, defaultBaseURL(a.Provider)))
	}
	ac.Accounts = accounts
	a, err := activities.New(ac)
	if err != nil {
		return nil, fmt.Errorf("worker: activities: %w", err)
	}
	return a, nil
}

// defaultBaseURL is the public API of provider.
func defaultBaseURL(provider string) string {
	switch provider {
	case activities.OpenAI:
		return activities.DefaultOpenAIBaseURL
	case activities.Anthropic:
		return activities.DefaultAnthropicBaseURL
	}
	return activities.DefaultGeminiBaseURL
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Stop stops the Temporal worker and then everything Start started, in
// reverse order. It is safe to call once, on a fully or partly started
// Worker.
func (w *Worker) Stop() {
	if w.worker != nil {
		w.worker.Stop()
	}
	if w.client != nil {
		w.client.Close()
	}
	for i := len(w.closers) - 1; i >= 0; i-- {
		_ = w.closers[i]()
	}
	if w.tel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.tel.shutdown(ctx)
	}
}

// Client returns the worker's Temporal client, for starting workflows on
// its task queue. Do not close it; Stop does.
func (w *Worker) Client() client.Client { return w.client }

// Config returns the configuration the worker runs with, defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// Stats returns what the interceptor has counted so far in this process.
func (w *Worker) Stats() interceptor.Stats { return w.ic.Stats() }

// Store returns the quota store the worker admits calls through.
func (w *Worker) Store() quota.Store { return w.store }

// Budgets returns the policies and fallback chains in force.
func (w *Worker) Budgets() Budgets { return w.budgets }

// MetricsAddr returns the address /metrics is served on, or "" when off.
func (w *Worker) MetricsAddr() string { return w.tel.addr }
