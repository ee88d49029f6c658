package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// The -tenants run: two tenants of one account share its limit. Tenant
// burst starts -tenant-burst calls at once; tenant trickle starts
// -tenant-trickle calls a second while burst's calls wait in line. The same
// traffic runs twice on Tollgate over a shared Redis, as the other setups
// do:
//
//   - tenants-fair: each call names its tenant (AgentInput.Tenant), so the
//     saturated account's line serves the two tenants in turn by cost;
//   - tenants-first-come: the same calls name no tenant, so they wait in
//     one line in order of arrival, which is what a store without tenants'
//     fair share does (and what Tollgate does with a single tenant).
//
// The store offers no switch turning fair share off for tenanted calls, so
// first-come is the untenanted run: same arrivals, same limit, same
// replicas and store, only the tenant names differ. The burst's calls are
// held at a gate until all of them have reached the workers, so both runs
// meet the same burst whatever the machine's speed, and the trickle starts
// when the gate opens. A call's wait is the time from its first attempt
// reaching a worker (past the gate) to the start of the attempt that
// completed it: its time in line, every refusal and the retry it scheduled
// included, measured by an outermost interceptor on one clock.

// Tenants' names in the -tenants run.
const (
	burstTenant   = "burst"
	trickleTenant = "trickle"
)

// tenantFlags are the -tenants run's flags.
type tenantFlags struct {
	on      *bool
	burst   *int
	trickle *float64
}

// newTenantFlags defines the -tenants run's flags on fs.
func newTenantFlags(fs *flag.FlagSet) tenantFlags {
	return tenantFlags{
		on:      fs.Bool("tenants", false, "run the two-tenant comparison instead of the setups: one tenant bursts, the other trickles, under fair share and first-come"),
		burst:   fs.Int("tenant-burst", 150, "with -tenants: calls the burst tenant starts at once"),
		trickle: fs.Float64("tenant-trickle", 1, "with -tenants: calls a second the trickle tenant starts while the burst is served"),
	}
}

// tenantConfig is the -tenants run's shape.
type tenantConfig struct {
	config
	burst   int
	trickle float64
}

func (c tenantConfig) validate() error {
	switch {
	case c.faults:
		return errors.New("-tenants and -faults are separate runs: choose one")
	case c.replicas < 1:
		return errors.New("-replicas must be at least 1")
	case c.burst < 1:
		return fmt.Errorf("-tenant-burst %d: the burst tenant needs at least one call", c.burst)
	case !(c.trickle > 0):
		return fmt.Errorf("-tenant-trickle %g: use a positive rate, e.g. 1 call a second", c.trickle)
	case c.drain < 0:
		return errors.New("-drain must not be negative")
	case c.limits.Period <= 0 || c.limits.Requests <= 0 || c.limits.InputTokens <= 0 || c.limits.OutputTokens <= 0:
		return errors.New("-period and the limits must be positive")
	case !(c.limits.Density > 0 && c.limits.Density <= llmsim.MaxDensity):
		return fmt.Errorf("-density %g is out of range: use a ratio in (0, %d]", c.limits.Density, llmsim.MaxDensity)
	}
	return c.limits.validateWindow()
}

// trickleFor is how long the trickle tenant sends: as long as the account
// takes to serve the burst at its request limit, so every trickle call
// arrives while burst's calls wait.
func (c tenantConfig) trickleFor() time.Duration {
	return time.Duration(float64(c.burst) / c.limits.perSecond() * float64(time.Second))
}

// tenantSetup is one run of the two tenants' traffic.
type tenantSetup struct {
	name, about string
	// tenanted: calls name their tenant.
	tenanted bool
}

var tenantSetups = []tenantSetup{
	{"tenants-fair", "calls name their tenant: the saturated account's line serves the tenants in turn", true},
	{"tenants-first-come", "the same calls with no tenant: one line, in order of arrival", false},
}

// TenantResult is one tenant's row of the -tenants table, and one object of
// tenants.json.
type TenantResult struct {
	Setup     string  `json:"setup"`
	Tenant    string  `json:"tenant"`
	Calls     int     `json:"calls"`
	P50WaitMs float64 `json:"p50_wait_ms"`
	P99WaitMs float64 `json:"p99_wait_ms"`
	MaxWaitMs float64 `json:"max_wait_ms"`
	Completed int     `json:"completed"`
	// Provider429 is the setup's 429s, both tenants together.
	Provider429 int64 `json:"provider_429"`
}

// runTenants runs the two-tenant comparison and prints its table and
// closing note.
func runTenants(ctx context.Context, cfg tenantConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	began := time.Now()
	server, err := devserver.Start(devserver.Options{})
	if err != nil {
		return err
	}
	defer server.Stop()
	rds, err := startRedis(ctx, cfg.redisPath)
	if err != nil {
		return err
	}
	defer rds.stop()

	simCfg := llmsim.Config{Latency: llmsim.Latency{Fixed: 30 * time.Millisecond, Jitter: 40 * time.Millisecond}, Seed: cfg.seed}
	for _, s := range tenantSetups {
		simCfg.Models = append(simCfg.Models, cfg.limits.simModel("fleet-"+s.name))
	}
	sim, simURL, stopSim, err := serveSim(ctx, simCfg)
	if err != nil {
		return err
	}
	defer stopSim()

	b := &bench{server: server, sim: sim, simURL: simURL, limits: cfg.limits,
		replicas: cfg.replicas, drain: cfg.drain, seed: cfg.seed}
	fmt.Printf("Provider (llmsim, Anthropic Messages, one model per setup): %s.\n", cfg.limits)
	fmt.Printf("Fleet: %d replicas per setup, Tollgate on one shared Redis, the account's policy only (both tenants weigh 1).\n", cfg.replicas)
	fmt.Printf("Tenant %s starts %d one-call agents at once; tenant %s starts %g a second for %s (the time the burst takes at the limit).\n\n",
		burstTenant, cfg.burst, trickleTenant, cfg.trickle, cfg.trickleFor().Round(time.Millisecond))

	var results []TenantResult
	for _, s := range tenantSetups {
		fmt.Printf("running %-22s %s\n", s.name, s.about)
		start := time.Now()
		rs, err := b.runTenantSetup(ctx, cfg, s, rds.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Printf("  done in %s\n", time.Since(start).Round(time.Second))
		results = append(results, rs...)
	}
	fmt.Println()
	if note := cfg.limits.windowNote(); note != "" {
		fmt.Printf("The %s.\n", note)
	}
	if err := printTenantTable(os.Stdout, results); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(tenantDefinitions)
	fmt.Println()
	fmt.Println(tenantNote(results))
	if cfg.out != "" {
		if err := writeTenantJSON(cfg.out, results); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", filepath.Join(cfg.out, "tenants.json"))
	}
	fmt.Printf("wall time %s\n", time.Since(began).Round(time.Second))
	return nil
}

// tenantDefinitions is printed with the -tenants table.
const tenantDefinitions = `Definitions:
  wait        per call, from its first attempt reaching a worker (for the burst's calls, the moment
              all of them had: a gate gathers the burst) to the start of the attempt that completed
              it: its time in line, Tollgate's refusals and the retries they schedule included.
              p50/p99 are nearest rank over the tenant's completed calls.
  429         provider 429 answers in the setup, both tenants together.
  done/calls  calls completed before the drain deadline ÷ calls started.`

// runTenantSetup starts the replicas of a Tollgate-on-Redis setup, sends
// the two tenants' traffic and measures every call's wait.
func (b *bench) runTenantSetup(ctx context.Context, cfg tenantConfig, s tenantSetup, redisAddr string) ([]TenantResult, error) {
	model, taskQueue := "fleet-"+s.name, "fleet-"+s.name
	burstPrefix := s.name + "-" + burstTenant + "-"
	clock := newCallClock(burstPrefix, cfg.burst)
	base := sharedRedis(cfg.limits, redisAddr, false)
	fleet := setup{name: s.name, about: s.about, replica: func(i int, model string, counter *slots) (worker.Options, func(), error) {
		opts, closeFn, err := base(i, model, counter)
		if err == nil {
			opts.Interceptors = append([]sdkinterceptor.WorkerInterceptor{clock}, opts.Interceptors...)
		}
		return opts, closeFn, err
	}}
	stop, _, err := b.startReplicas(ctx, fleet, model, taskQueue, &slots{})
	defer stop()
	if err != nil {
		return nil, err
	}
	c, err := b.server.Dial(client.Options{Logger: quietLogger(), Identity: "fleet-starter"})
	if err != nil {
		return nil, fmt.Errorf("dial Temporal: %w", err)
	}
	defer c.Close()

	deadline := time.Now().Add(time.Minute + cfg.trickleFor() + cfg.drain)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		started  = map[string][]string{} // workflow ids by tenant
	)
	launch := func(tenant string, n int) {
		id := fmt.Sprintf("%s-%s-%04d", s.name, tenant, n)
		in := workflows.AgentInput{
			Provider: activities.Anthropic, Model: model, System: systemPrompt(200),
			Task: fmt.Sprintf("Plan job %d for %s.", n, tenant), MaxOutputTokens: agentMaxOutputs,
		}
		if s.tenanted {
			in.Tenant = tenant
		}
		started[tenant] = append(started[tenant], id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.AgentWorkflow, in)
			if err == nil {
				gctx, cancel := context.WithDeadline(ctx, deadline)
				err = wr.Get(gctx, nil)
				cancel()
			}
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Errorf("%s: %w", id, err))
				mu.Unlock()
				_ = c.TerminateWorkflow(context.WithoutCancel(ctx), id, "", "fleet benchmark: still running at the drain deadline")
			}
		}()
	}
	for i := range cfg.burst {
		launch(burstTenant, i)
	}
	select {
	case <-clock.open:
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("the burst's %d calls did not all reach the workers within a minute (%d did)", cfg.burst, clock.arrived.Load())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	opened := time.Now()
	interval := time.Duration(float64(time.Second) / cfg.trickle)
	for i, at := 0, opened.Add(interval); at.Before(opened.Add(cfg.trickleFor())) && ctx.Err() == nil; i, at = i+1, at.Add(interval) {
		sleepUntil(ctx, at)
		launch(trickleTenant, i)
	}
	wg.Wait()
	stop()
	if len(failures) > 0 {
		fmt.Printf("  %d calls did not complete, e.g. %v\n", len(failures), failures[0])
	}

	tooMany := b.sim.Stats(model).TooManyRequests
	var out []TenantResult
	for _, tenant := range []string{burstTenant, trickleTenant} {
		ws := clock.waits(started[tenant])
		out = append(out, TenantResult{
			Setup: s.name, Tenant: tenant, Calls: len(started[tenant]), Completed: len(ws),
			P50WaitMs: millis(percentile(ws, 0.50)), P99WaitMs: millis(percentile(ws, 0.99)), MaxWaitMs: millis(percentile(ws, 1)),
			Provider429: tooMany,
		})
	}
	return out, nil
}

// callClock is the outermost worker interceptor of the -tenants run's
// replicas. It holds the first attempts of the burst's calls (workflow ids
// starting with gated) until n of them have arrived, then lets them all
// through at once, and records, per workflow, when its call's first attempt
// got past it and when the attempt that completed the call started.
type callClock struct {
	sdkinterceptor.WorkerInterceptorBase
	gated   string
	n       int64
	arrived atomic.Int64
	open    chan struct{}
	// arrivedAt and admittedAt map a workflow id to a time.Time.
	arrivedAt, admittedAt sync.Map
}

func newCallClock(gated string, n int) *callClock {
	return &callClock{gated: gated, n: int64(n), open: make(chan struct{})}
}

// InterceptActivity implements sdkinterceptor.WorkerInterceptor.
func (c *callClock) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	return hook(next, c.execute)
}

func (c *callClock) execute(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput, next sdkinterceptor.ActivityInboundInterceptor) (any, error) {
	info := activity.GetInfo(ctx)
	id := info.WorkflowExecution.ID
	if info.Attempt == 1 {
		if strings.HasPrefix(id, c.gated) {
			c.pass(ctx)
		}
		c.arrivedAt.LoadOrStore(id, time.Now())
	}
	begin := time.Now()
	res, err := next.ExecuteActivity(ctx, in)
	if err == nil {
		c.admittedAt.Store(id, begin)
	}
	return res, err
}

// pass waits for the gate to open, if the caller is among the first n.
func (c *callClock) pass(ctx context.Context) {
	switch k := c.arrived.Add(1); {
	case k > c.n:
		return
	case k == c.n:
		close(c.open)
	}
	select {
	case <-c.open:
	case <-ctx.Done():
	}
}

// waits returns the wait of each of the workflows' calls that completed.
func (c *callClock) waits(ids []string) []time.Duration {
	var out []time.Duration
	for _, id := range ids {
		a, ok1 := c.arrivedAt.Load(id)
		s, ok2 := c.admittedAt.Load(id)
		if ok1 && ok2 {
			out = append(out, s.(time.Time).Sub(a.(time.Time)))
		}
	}
	return out
}

// printTenantTable writes the -tenants results as an aligned table.
func printTenantTable(w io.Writer, results []TenantResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\ttenant\tp50 wait ms\tp99 wait ms\tmax wait ms\t429\tdone/calls\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%d\t%d/%d\t\n",
			r.Setup, r.Tenant, r.P50WaitMs, r.P99WaitMs, r.MaxWaitMs, r.Provider429, r.Completed, r.Calls)
	}
	return tw.Flush()
}

// tenantNote is the run's closing line: each tenant's waits under fair
// share beside first-come's.
func tenantNote(results []TenantResult) string {
	find := func(setup, tenant string) (TenantResult, bool) {
		for _, r := range results {
			if r.Setup == setup && r.Tenant == tenant {
				return r, true
			}
		}
		return TenantResult{}, false
	}
	ft, ok1 := find("tenants-fair", trickleTenant)
	ct, ok2 := find("tenants-first-come", trickleTenant)
	fb, ok3 := find("tenants-fair", burstTenant)
	cb, ok4 := find("tenants-first-come", burstTenant)
	if !(ok1 && ok2 && ok3 && ok4) {
		return "tenants: a setup's results are missing"
	}
	return fmt.Sprintf("tenants: the trickle tenant waited p50 %.0f ms / p99 %.0f ms under fair share, p50 %.0f ms / p99 %.0f ms first-come; "+
		"the burst tenant p50 %.0f / p99 %.0f ms fair, p50 %.0f / p99 %.0f ms first-come; provider 429s %d fair, %d first-come",
		ft.P50WaitMs, ft.P99WaitMs, ct.P50WaitMs, ct.P99WaitMs, fb.P50WaitMs, fb.P99WaitMs, cb.P50WaitMs, cb.P99WaitMs,
		ft.Provider429, ct.Provider429)
}

func writeTenantJSON(dir string, results []TenantResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "tenants.json"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
