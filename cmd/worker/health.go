package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/worker"
)

// healthTimeout bounds how long health waits for the metrics endpoint.
const healthTimeout = 3 * time.Second

// health checks that a worker configured like cfg is up: its Prometheus
// endpoint on cfg.MetricsAddr (a wildcard host such as 0.0.0.0 is asked on
// loopback) answers GET /metrics with 200 within healthTimeout. It is meant
// to run next to the worker, with the same configuration, e.g. as a
// container's health check, where the image has no shell or curl. It returns
// a *worker.ConfigError when METRICS_ADDR is off or names port 0 (there is
// nothing to ask), and an error naming METRICS_ADDR when the endpoint does
// not answer or answers another status.
func health(ctx context.Context, cfg worker.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	if cfg.MetricsAddr == "off" {
		return &worker.ConfigError{Env: "METRICS_ADDR", Value: cfg.MetricsAddr, Problem: "turns off the endpoint health asks",
			Fix: "run the worker with METRICS_ADDR set (e.g. 0.0.0.0:9464) and health with the same value"}
	}
	host, port, _ := net.SplitHostPort(cfg.MetricsAddr) // Validate checked it
	if port == "0" {
		return &worker.ConfigError{Env: "METRICS_ADDR", Value: cfg.MetricsAddr, Problem: "is a port the worker picks at start, unknown to health",
			Fix: "give the worker a fixed port, e.g. 0.0.0.0:9464, and health the same value"}
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/metrics"
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("worker: health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("worker: health: no worker answers on METRICS_ADDR (-metrics-addr) %s: %w (is it running, with the same METRICS_ADDR?)", cfg.MetricsAddr, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("worker: health: %s answered %s, want 200 OK", url, resp.Status)
	}
	return nil
}
