package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/tollgate/tollgate/cmd/worker/internal/webui"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/worker"
)

// app is a running worker and the local stand-ins the command started for
// it: an embedded Temporal server and its Web UI (no TEMPORAL_ADDRESS), and
// the simulator (no API key). Build it with startApp and end it with stop.
type app struct {
	cfg     config
	logger  *slog.Logger
	dev     *devserver.Server // nil with TEMPORAL_ADDRESS
	ui      *webui.Server     // nil with TEMPORAL_ADDRESS or TEMPORAL_UI_ADDRESS=off
	sim     *llmsim.Sim       // nil with API keys
	stopSim context.CancelFunc
	w       *worker.Worker
}

// startApp starts what cfg asks for, logging which parts are real and which
// are embedded or simulated, then the worker on them. A bad simulator
// profile is reported before anything starts; on any error, whatever had
// started is stopped again.
func startApp(ctx context.Context, cfg config, logger *slog.Logger) (a *app, err error) {
	cfg = cfg.withDefaults()
	a = &app{cfg: cfg, logger: logger}
	defer func() {
		if err != nil {
			a.stop()
			a = nil
		}
	}()
	budgets, err := cfg.budgets(logger)
	if err != nil {
		return a, err
	}
	var profile llmsim.Config
	if cfg.simulated() {
		// Checked before anything starts: a profile that refuses the
		// worker's keys would fail every call, not the start.
		if profile, err = cfg.simProfile(); err != nil {
			return a, err
		}
		if err := cfg.checkInProcessSim(profile); err != nil {
			return a, err
		}
	}
	wc := cfg.Config
	if cfg.TemporalAddress == "" {
		if err := a.startTemporal(); err != nil {
			return a, err
		}
		wc.TemporalAddress = a.dev.Address()
	}
	if cfg.simulated() {
		url, err := a.startSim(profile)
		if err != nil {
			return a, err
		}
		wc.OpenAIAPIKey, wc.OpenAIBaseURL = simOpenAIKey, url+"/v1/"
		wc.AnthropicAPIKey, wc.AnthropicBaseURL = simAnthropicKey, url
		wc.GeminiAPIKey, wc.GeminiBaseURL = simGeminiKey, url
	}
	wc.Register = registerTools
	if a.w, err = worker.Start(ctx, wc, budgets, logger); err != nil {
		return a, err
	}
	return a, nil
}

// budgets returns the budgets the command governs by: the POLICIES file, or
// the simulator's defaults when the simulator runs, or none.
func (c config) budgets(logger *slog.Logger) (worker.Budgets, error) {
	switch {
	case c.Policies != "":
		b, err := worker.LoadPolicies(c.Policies)
		if err != nil {
			return worker.Budgets{}, &worker.ConfigError{Env: "POLICIES", Value: c.Policies, Problem: "cannot be used", Fix: err.Error(), Err: err}
		}
		logger.Info("policies: loaded", "file", c.Policies, "keys", len(b.Policies.Keys()))
		return b, nil
	case c.simulated():
		b := defaultBudgets()
		logger.Info("policies: the simulator's defaults (POLICIES is empty)", "keys", len(b.Policies.Keys()))
		if c.SimConfig != "" {
			logger.Warn("policies: the defaults describe the default simulator profile's models, not SIM_CONFIG's; set POLICIES to the limits of the models SIM_CONFIG serves",
				"sim_config", c.SimConfig)
		}
		return b, nil
	}
	return worker.Budgets{}, nil // worker.Start warns that calls run ungoverned
}

// startTemporal starts the embedded Temporal server and, unless
// TEMPORAL_UI_ADDRESS is off, the Web UI on it.
func (a *app) startTemporal() error {
	cfg := a.cfg
	dev, err := devserver.Start(devserver.Options{Address: cfg.EmbeddedAddress, Namespace: cfg.Namespace})
	if err != nil {
		return fmt.Errorf("worker: embedded Temporal server: %w", err)
	}
	a.dev = dev
	a.logger.Info("temporal: embedded server (TEMPORAL_ADDRESS is empty; SQLite in memory, history is lost on exit)", "address", dev.Address(), "namespace", cfg.Namespace)
	if cfg.UIAddress == "off" {
		a.logger.Info("temporal ui: off (TEMPORAL_UI_ADDRESS=off)")
		return nil
	}
	ui, err := webui.Start(webui.Options{Address: cfg.UIAddress, TemporalAddress: dev.Address(), Namespace: cfg.Namespace})
	if err != nil {
		return fmt.Errorf("worker: Temporal UI on TEMPORAL_UI_ADDRESS (-temporal-ui-address) %s: %w (set it to a free address, or off)", cfg.UIAddress, err)
	}
	a.ui = ui
	a.logger.Info("temporal ui: serving the embedded server's workflows", "url", a.uiURL())
	return nil
}

// uiURL returns the Web UI's page of the namespace's workflows, or "" when
// no UI is served.
func (a *app) uiURL() string {
	if a.ui == nil {
		return ""
	}
	return a.ui.URL() + "/namespaces/" + a.cfg.Namespace + "/workflows"
}

// startSim serves the simulator profile in-process on SIM_ADDRESS and
// returns its base URL.
func (a *app) startSim(profile llmsim.Config) (string, error) {
	cfg := a.cfg
	sim, err := llmsim.New(profile)
	if err != nil {
		return "", fmt.Errorf("worker: simulator: %w", err)
	}
	l, err := net.Listen("tcp", cfg.SimAddress)
	if err != nil {
		return "", fmt.Errorf("worker: simulator: listen on %s: %w (set SIM_ADDRESS to a free address)", cfg.SimAddress, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.sim, a.stopSim = sim, cancel
	url := "http://" + l.Addr().String()
	go func() {
		if err := sim.Serve(ctx, l); err != nil {
			a.logger.Error("simulator stopped", "error", err)
		}
	}()
	a.logger.Info("providers: simulated by llmsim in-process (no OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY), serving "+cfg.simProfileName(),
		"url", url, "models", simModels(profile))
	return url, nil
}

// stop stops the worker, then what startApp started for it, in reverse
// order. It is safe to call once, on a fully or partly started app.
func (a *app) stop() {
	if a.w != nil {
		a.w.Stop()
	}
	if a.stopSim != nil {
		a.stopSim()
	}
	if a.ui != nil {
		a.ui.Stop()
	}
	if a.dev != nil {
		a.dev.Stop()
	}
}

// serve runs the worker until ctx is done (an interrupt), then stops it.
func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	a, err := startApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopping")
	a.stop()
	return nil
}
