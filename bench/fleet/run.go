package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// apiKey is what the replicas send llmsim (any non-empty key works).
const apiKey = "sk-fleet-bench"

// bench is what every setup shares: one Temporal server, one llmsim, the
// provider's limits and the run's shape.
type bench struct {
	server   *devserver.Server
	sim      *llmsim.Sim
	simURL   string
	limits   limits
	replicas int
	rate     float64 // workflows started per second
	window   time.Duration
	drain    time.Duration
	seed     uint64
}

// setupRun is one setup's measurements, with the provider's per-second series
// and the time the load started (the series' origin).
type setupRun struct {
	result counts
	series []llmsim.Second
	start  time.Time
}

// runSetup starts the setup's replicas on a task queue of its own, drives
// the load against a model of its own, drains, and measures.
func (b *bench) runSetup(ctx context.Context, s setup) (setupRun, error) {
	model, taskQueue := "fleet-"+s.name, "fleet-"+s.name
	counter := &slots{}
	stop, err := b.startReplicas(s, model, taskQueue, counter)
	defer stop()
	if err != nil {
		return setupRun{}, err
	}

	starter, err := b.server.Dial(client.Options{Logger: quietLogger(), Identity: "fleet-starter"})
	if err != nil {
		return setupRun{}, fmt.Errorf("dial Temporal: %w", err)
	}
	defer starter.Close()

	load := b.drive(ctx, starter, s.name, model, taskQueue)
	stop() // no attempt is in flight while the counts are read
	st := b.sim.Stats(model)
	c := counts{
		Window:            b.window,
		Period:            b.limits.Period,
		RequestLimit:      b.limits.Requests,
		InputTokenLimit:   b.limits.InputTokens,
		WindowAccepted:    load.windowStats.Accepted,
		WindowInputTokens: load.windowStats.InputTokens,
		ProviderCalls:     st.Received,
		Provider429:       st.TooManyRequests,
		CompletedCalls:    counter.completed.Load(),
		ActivityAttempts:  counter.attempts.Load(),
		Latencies:         load.latencies,
		Completed:         len(load.latencies),
		Total:             load.started,
		PeakSlots:         counter.peak.Load(),
	}
	return setupRun{result: c, series: b.sim.Series(model), start: load.start}, nil
}

// startReplicas starts b.replicas workers, each with its own client,
// activities (HTTP client) and, per the setup, its own store and
// interceptor. stop stops them all; it is safe to call twice.
func (b *bench) startReplicas(s setup, model, taskQueue string, counter *slots) (stop func(), err error) {
	var closers []func()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		})
	}
	for i := range b.replicas {
		c, err := b.server.Dial(client.Options{Logger: quietLogger(), Identity: fmt.Sprintf("%s-replica-%d", s.name, i)})
		if err != nil {
			return stop, fmt.Errorf("replica %d: dial Temporal: %w", i, err)
		}
		closers = append(closers, c.Close)
		opts, closeFn, err := s.replica(i, model, counter)
		if err != nil {
			return stop, fmt.Errorf("replica %d: %w", i, err)
		}
		closers = append(closers, closeFn)
		acts, err := activities.New(activities.Config{Anthropic: activities.ProviderConfig{
			APIKey: apiKey, BaseURL: b.simURL, HTTPClient: &http.Client{Transport: pooledTransport()},
		}})
		if err != nil {
			return stop, fmt.Errorf("replica %d: activities: %w", i, err)
		}
		w := worker.New(c, taskQueue, opts)
		activities.Register(w, acts)
		workflows.Register(w)
		if err := w.Start(); err != nil {
			return stop, fmt.Errorf("replica %d: start worker: %w", i, err)
		}
		closers = append(closers, w.Stop)
	}
	return stop, nil
}

// pooledTransport keeps enough idle connections to llmsim for a replica's
// concurrent calls (the default keeps two per host).
func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return t
}

// load is what drive saw.
type load struct {
	start       time.Time
	started     int
	latencies   []time.Duration // of completed workflows
	windowStats llmsim.Stats    // the provider's counts when the window closed
}

// drive starts agents at b.rate for b.window, snapshots the provider's
// counts when the window closes, then waits up to b.drain for the rest.
// Workflows still running at the deadline are terminated.
func (b *bench) drive(ctx context.Context, c client.Client, name, model, taskQueue string) load {
	wl := newWorkload(b.seed)
	interval := time.Duration(float64(time.Second) / b.rate)
	l := load{start: time.Now()}
	windowEnd := l.start.Add(b.window)
	deadline := windowEnd.Add(b.drain)

	var mu sync.Mutex
	var wg sync.WaitGroup
	var unfinished []string
	for at := l.start; at.Before(windowEnd) && ctx.Err() == nil; at = at.Add(interval) {
		sleepUntil(ctx, at)
		id := fmt.Sprintf("%s-%05d", name, l.started)
		in := wl.next(model)
		l.started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			begin := time.Now()
			wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.AgentWorkflow, in)
			if err == nil {
				gctx, cancel := context.WithDeadline(ctx, deadline)
				err = wr.Get(gctx, nil)
				cancel()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unfinished = append(unfinished, id)
				return
			}
			l.latencies = append(l.latencies, time.Since(begin))
		}()
	}
	sleepUntil(ctx, windowEnd)
	l.windowStats = b.sim.Stats(model)
	wg.Wait()

	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range unfinished {
		_ = c.TerminateWorkflow(tctx, id, "", "fleet benchmark: still running at the drain deadline")
	}
	return l
}

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}
