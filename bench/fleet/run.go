package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

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
	// faults, when set, makes every setup a fault run: replica 0 runs in a
	// process of its own (redisAddr tells it where Redis is) and is killed
	// mid-run, and Redis is restarted, as the plan says.
	faults    *faultPlan
	redisAddr string
	// heartbeat, when positive, is the HeartbeatTimeout of every activity
	// (see heartbeatTimeout).
	heartbeat time.Duration
}

// setupRun is one setup's measurements, with the provider's per-second series
// and the time the load started (the series' origin).
type setupRun struct {
	result counts
	series []llmsim.Second
	start  time.Time
	// faults is what a fault run did; nil otherwise.
	faults *faultLog
	// failures counts the workflows that did not complete, by cause.
	failures map[string]int
	// pool is what a pool run saw of its members; nil otherwise.
	pool *poolLog
}

// runSetup starts the setup's replicas on a task queue of its own, drives
// the load against a model of its own (with the faults, in a fault run),
// drains, and measures.
func (b *bench) runSetup(ctx context.Context, s setup) (setupRun, error) {
	model, taskQueue := "fleet-"+s.name, "fleet-"+s.name
	counter := &slots{}
	stop, victim, err := b.startReplicas(ctx, s, model, taskQueue, counter)
	defer stop()
	if err != nil {
		return setupRun{}, err
	}
	var faults []fault
	var log *faultLog
	if b.faults != nil {
		log = &faultLog{}
		inFlight := func() int64 { return b.sim.InFlight(model).Now }
		if faults, err = b.faults.schedule(victim, log, inFlight, b.limits.Concurrency); err != nil {
			return setupRun{}, err
		}
	}
	var plog *poolLog
	if b.limits.Pool > 0 {
		plog = &poolLog{model: model}
		faults = append(faults, b.capFault(plog), fault{at: b.window, do: func(context.Context, time.Time) error {
			plog.atEnd = b.memberSpend(model)
			return nil
		}})
	}

	starter, err := b.server.Dial(client.Options{Logger: quietLogger(), Identity: "fleet-starter"})
	if err != nil {
		return setupRun{}, fmt.Errorf("dial Temporal: %w", err)
	}
	defer starter.Close()

	load, err := b.drive(ctx, starter, s.name, model, taskQueue, faults)
	stop() // no attempt is in flight while the counts are read
	if err != nil {
		return setupRun{}, err
	}
	st := b.sim.Stats(model)
	c := counts{
		Window:               b.window,
		Period:               b.limits.Period,
		Enforcement:          b.limits.enforcement(),
		RequestLimit:         b.limits.Requests,
		InputTokenLimit:      b.limits.InputTokens,
		ConcurrencyLimit:     b.limits.Concurrency,
		WindowAccepted:       load.windowStats.Accepted,
		WindowInputTokens:    load.windowStats.InputTokens,
		ProviderCalls:        st.Received,
		Provider429:          st.TooManyRequests,
		ProviderPeakInFlight: b.sim.InFlight(model).Peak,
		CompletedCalls:       counter.completed.Load(),
		ActivityAttempts:     counter.attempts.Load(),
		Latencies:            load.latencies,
		Completed:            len(load.latencies),
		Total:                load.started,
		PeakSlots:            counter.peak.Load(),
		Allowances:           1,
	}
	if plog == nil {
		c.Exact = exactGoodput(b.limits.simModel(model), b.sim.Charges(model), load.windowStats.Accepted, b.window)
	}
	if plog != nil {
		// The members' spend caps are not rate limits: counted apart.
		c.Allowances, c.SpendCapped = plog.allowances(b.limits), st.SpendCapped
		c.Provider429 -= st.SpendCapped
	}
	return setupRun{result: c, series: b.sim.Series(model), start: load.start, faults: log, failures: load.failures, pool: plog}, nil
}

// startReplicas starts b.replicas workers, each with its own client,
// activities (HTTP client) and, per the setup, its own store and
// interceptor. In a fault run replica 0 runs in a process of its own and is
// returned as victim. stop stops them all; it is safe to call twice.
func (b *bench) startReplicas(ctx context.Context, s setup, model, taskQueue string, counter *slots) (stop func(), victim *replicaProcess, err error) {
	var closers []func()
	stop = sync.OnceFunc(func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	})
	t := replicaTarget{dial: b.server.Dial, simURL: b.simURL, model: model, taskQueue: taskQueue, heartbeat: b.heartbeat, pool: b.limits.Pool}
	for i := range b.replicas {
		if i == 0 && b.faults != nil {
			victim, err = startReplicaProcess(ctx, replicaSpec{
				Temporal: b.server.Address(), Namespace: b.server.Namespace(), Setup: s.name, Index: i,
				Model: model, TaskQueue: taskQueue, SimURL: b.simURL, RedisAddr: b.redisAddr,
				Limits: b.limits, Heartbeat: b.heartbeat,
			}, counter)
			if err != nil {
				return stop, nil, err
			}
			closers = append(closers, victim.stop)
			continue
		}
		stopReplica, err := startReplica(s, i, t, counter, pooledTransport())
		closers = append(closers, stopReplica)
		if err != nil {
			return stop, victim, err
		}
	}
	return stop, victim, nil
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
	// failures counts the workflows that did not complete, by the root
	// cause of their error.
	failures map[string]int
}

// drive starts agents at b.rate for b.window, snapshots the provider's
// counts when the window closes, then waits up to b.drain for the rest.
// Workflows still running at the deadline are terminated. The faults, in
// order, run on drive's goroutine when due, between starts; the first that
// fails ends the load with its error.
func (b *bench) drive(ctx context.Context, c client.Client, name, model, taskQueue string, faults []fault) (load, error) {
	wl := newWorkload(b.seed)
	interval := time.Duration(float64(time.Second) / b.rate)
	l := load{start: time.Now(), failures: map[string]int{}}
	windowEnd := l.start.Add(b.window)
	deadline := windowEnd.Add(b.drain)

	var mu sync.Mutex
	var wg sync.WaitGroup
	var unfinished []string
	var faultErr error
	runDue := func(before time.Time) {
		for len(faults) > 0 && faultErr == nil && !l.start.Add(faults[0].at).After(before) && ctx.Err() == nil {
			f := faults[0]
			faults = faults[1:]
			sleepUntil(ctx, l.start.Add(f.at))
			faultErr = f.do(ctx, l.start)
		}
	}
	for at := l.start; at.Before(windowEnd) && ctx.Err() == nil && faultErr == nil; at = at.Add(interval) {
		runDue(at)
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
				l.failures[rootCause(err)]++
				return
			}
			l.latencies = append(l.latencies, time.Since(begin))
		}()
	}
	runDue(windowEnd)
	sleepUntil(ctx, windowEnd)
	l.windowStats = b.sim.Stats(model)
	runDue(deadline)
	wg.Wait()

	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, id := range unfinished {
		_ = c.TerminateWorkflow(tctx, id, "", "fleet benchmark: still running at the drain deadline")
	}
	if faultErr == nil && len(faults) > 0 && ctx.Err() == nil {
		faultErr = fmt.Errorf("the load ended before a fault due %s after its start: lengthen -duration", faults[0].at)
	}
	return l, faultErr
}

// rootCause is the message of the innermost error err wraps: for a failed
// workflow, what failed its activity.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
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

// exactGoodput compares what the provider took of the run's calls during
// the window with what it would have taken of the same calls, in the same
// order, from a client that knew its limiter exactly (llmsim.Ideal): the
// input tokens of the first accepted calls (those admitted in the window)
// over the ideal client's. It is 0 when the run had too few calls for the
// ideal client to fill the window, which leaves the comparison with the
// limit alone.
func exactGoodput(m llmsim.Model, charges []llmsim.Charge, accepted int64, window time.Duration) float64 {
	n, ideal := llmsim.Ideal(m, charges, window)
	if n >= len(charges) || ideal <= 0 {
		return 0
	}
	var got int64
	for _, ch := range charges[:min(int(accepted), len(charges))] {
		got += ch.InputTokens
	}
	return float64(got) / float64(ideal)
}
