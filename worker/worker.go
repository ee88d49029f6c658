package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// Worker is a running Tollgate worker and whatever it started for it (an
// embedded Temporal server, the simulator, the metrics endpoint). Build it
// with Start and end it with Stop. Its methods are safe for concurrent use.
type Worker struct {
	cfg     Config
	logger  *slog.Logger
	budgets Budgets
	tel     *telemetry
	dev     *devserver.Server // nil with TEMPORAL_ADDRESS
	address string            // the Temporal frontend dialled
	profile llmsim.Config     // what the in-process simulator serves
	sim     *llmsim.Sim       // nil with API keys
	simURL  string
	stopSim context.CancelFunc
	client  client.Client
	worker  sdkworker.Worker
	ic      *interceptor.WorkerInterceptor
	store   quota.Store
	closers []func() error
}

// Start validates cfg (see Config.Validate), fills in its defaults and
// starts the worker: telemetry, the Temporal connection (or an embedded
// server), the quota store, the simulator (SIM_CONFIG's profile, or
// DefaultSimConfig) when no API key is set, and a
// Temporal worker on cfg.TaskQueue with Tollgate's interceptor, the LLM
// activities and the agent workflows registered. It logs, through logger,
// which parts are real and which are embedded or simulated; no secret is
// logged. On error, whatever had started is stopped again.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (w *Worker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	w = &Worker{cfg: cfg, logger: logger}
	defer func() {
		if err != nil {
			w.Stop()
			w = nil
		}
	}()

	if w.budgets, err = w.loadBudgets(); err != nil {
		return w, err
	}
	if cfg.Simulated() {
		// Checked before anything starts: a profile that refuses the
		// worker's keys would fail every call, not the start.
		if w.profile, err = cfg.simProfile(); err != nil {
			return w, err
		}
		if err := cfg.checkInProcessSim(w.profile); err != nil {
			return w, err
		}
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
	if err := registerGauges(meter, store, w.budgets.Policies.Keys()); err != nil {
		return w, fmt.Errorf("worker: bucket gauges: %w", err)
	}
	acts, err := w.providers()
	if err != nil {
		return w, err
	}
	if w.ic, err = interceptor.New(interceptor.Options{
		Store:          store,
		Fallbacks:      w.budgets.Fallbacks,
		WaitInWorkflow: cfg.WaitInWorkflow,
		Meter:          meter,
		Logger:         logger,
	}); err != nil {
		return w, fmt.Errorf("worker: interceptor: %w", err)
	}
	w.worker = sdkworker.New(w.client, cfg.TaskQueue, sdkworker.Options{
		Interceptors: []sdkinterceptor.WorkerInterceptor{w.ic},
	})
	activities.Register(w.worker, acts)
	workflows.Register(w.worker)
	if err := w.worker.Start(); err != nil {
		w.worker = nil
		return w, fmt.Errorf("worker: start polling %q: %w", cfg.TaskQueue, err)
	}
	logger.Info("worker started", "task_queue", cfg.TaskQueue, "namespace", cfg.Namespace,
		"policies", len(w.budgets.Policies.Keys()), "fallbacks", len(w.budgets.Fallbacks))
	return w, nil
}

// Run starts the worker and serves until ctx is done (an interrupt, in
// cmd/worker), then stops it.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	w, err := Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopping")
	w.Stop()
	return nil
}

func (w *Worker) loadBudgets() (Budgets, error) {
	switch {
	case w.cfg.Policies != "":
		b, err := LoadPolicies(w.cfg.Policies)
		if err != nil {
			return Budgets{}, &ConfigError{Env: "POLICIES", Value: w.cfg.Policies, Problem: "cannot be used", Fix: err.Error(), Err: err}
		}
		w.logger.Info("policies: loaded", "file", w.cfg.Policies, "keys", len(b.Policies.Keys()))
		return b, nil
	case w.cfg.Simulated():
		w.logger.Info("policies: the simulator's defaults (POLICIES is empty)", "keys", len(DefaultBudgets().Policies.Keys()))
		if w.cfg.SimConfig != "" {
			w.logger.Warn("policies: the defaults describe worker.DefaultSimConfig's models, not SIM_CONFIG's; set POLICIES to the limits of the models SIM_CONFIG serves",
				"sim_config", w.cfg.SimConfig)
		}
		return DefaultBudgets(), nil
	}
	w.logger.Warn("policies: none (POLICIES is empty): calls run ungoverned; set POLICIES to a policies file with your providers' limits")
	return Budgets{}, nil
}

// dial connects to Temporal, starting the embedded server first when no
// address is configured. The client carries the SDK's metrics handler and
// tracing interceptor, which workers built on it inherit.
func (w *Worker) dial() error {
	cfg := w.cfg
	addr := cfg.TemporalAddress
	if addr == "" {
		dev, err := devserver.Start(devserver.Options{Address: cfg.EmbeddedAddress, Namespace: cfg.Namespace})
		if err != nil {
			return fmt.Errorf("worker: embedded Temporal server: %w", err)
		}
		w.dev = dev
		addr = dev.Address()
		w.logger.Info("temporal: embedded server (TEMPORAL_ADDRESS is empty; SQLite in memory, history is lost on exit)", "address", addr, "namespace", cfg.Namespace)
	} else {
		w.logger.Info("temporal: real server", "address", addr, "namespace", cfg.Namespace)
	}
	w.address = addr
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
		return fmt.Errorf("worker: connect to Temporal at %s: %w (is the server up? set TEMPORAL_ADDRESS, or leave it empty for the embedded server)", addr, err)
	}
	w.client = c
	return nil
}

// providers builds the activities: on the real providers whose keys are
// set, or on an in-process llmsim when none is.
func (w *Worker) providers() (*activities.Activities, error) {
	cfg := w.cfg
	var ac activities.Config
	if cfg.Simulated() {
		sim, err := llmsim.New(w.profile)
		if err != nil {
			return nil, fmt.Errorf("worker: simulator: %w", err)
		}
		l, err := net.Listen("tcp", cfg.SimAddress)
		if err != nil {
			return nil, fmt.Errorf("worker: simulator: listen on %s: %w (set SIM_ADDRESS to a free address)", cfg.SimAddress, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.sim, w.stopSim = sim, cancel
		w.simURL = "http://" + l.Addr().String()
		go func() {
			if err := sim.Serve(ctx, l); err != nil {
				w.logger.Error("simulator stopped", "error", err)
			}
		}()
		ac.OpenAI = activities.ProviderConfig{APIKey: SimOpenAIKey, BaseURL: w.simURL + "/v1/"}
		ac.Anthropic = activities.ProviderConfig{APIKey: SimAnthropicKey, BaseURL: w.simURL}
		ac.Gemini = activities.ProviderConfig{APIKey: SimGeminiKey, BaseURL: w.simURL}
		w.logger.Info("providers: simulated by llmsim in-process (no OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY), serving "+cfg.simProfileName(),
			"url", w.simURL, "models", simModels(w.profile))
	} else {
		if cfg.OpenAIAPIKey != "" {
			ac.OpenAI = activities.ProviderConfig{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL,
				Organization: cfg.OpenAIOrganization, Project: cfg.OpenAIProject}
			w.logger.Info("providers: OpenAI (real; key set)", "base_url", orDefault(cfg.OpenAIBaseURL, activities.DefaultOpenAIBaseURL))
		}
		if cfg.AnthropicAPIKey != "" {
			ac.Anthropic = activities.ProviderConfig{APIKey: cfg.AnthropicAPIKey, BaseURL: cfg.AnthropicBaseURL}
			w.logger.Info("providers: Anthropic (real; key set)", "base_url", orDefault(cfg.AnthropicBaseURL, activities.DefaultAnthropicBaseURL))
		}
		if cfg.GeminiAPIKey != "" {
			ac.Gemini = activities.ProviderConfig{APIKey: cfg.GeminiAPIKey, BaseURL: cfg.GeminiBaseURL}
			w.logger.Info("providers: Gemini (real; key set)", "base_url", orDefault(cfg.GeminiBaseURL, activities.DefaultGeminiBaseURL))
		}
	}
	a, err := activities.New(ac)
	if err != nil {
		return nil, fmt.Errorf("worker: activities: %w", err)
	}
	return a, nil
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
	if w.dev != nil {
		w.dev.Stop()
	}
	if w.stopSim != nil {
		w.stopSim()
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

// TemporalAddress returns the host:port of the Temporal frontend the worker
// uses: TEMPORAL_ADDRESS, or the embedded server's.
func (w *Worker) TemporalAddress() string { return w.address }

// Config returns the configuration the worker runs with, defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// Stats returns what the interceptor has counted so far in this process.
func (w *Worker) Stats() interceptor.Stats { return w.ic.Stats() }

// Store returns the quota store the worker admits calls through.
func (w *Worker) Store() quota.Store { return w.store }

// Budgets returns the policies and fallback chains in force.
func (w *Worker) Budgets() Budgets { return w.budgets }

// Sim returns the in-process simulator, or nil when real providers are
// configured.
func (w *Worker) Sim() *llmsim.Sim { return w.sim }

// MetricsAddr returns the address /metrics is served on, or "" when off.
func (w *Worker) MetricsAddr() string { return w.tel.addr }
