// Command fleet measures how well a fleet of Temporal workers uses an LLM
// provider's rate limit, under five setups run one after another in one
// invocation:
//
//  1. no-governor: plain workers; provider 429s are retried by Temporal's
//     retry policy;
//  2. local-buckets: Tollgate with a memory store per replica, each sized to
//     the full limit (the common mistake: N× the intended rate);
//  3. tq-activities-per-sec: plain workers with Temporal's
//     TaskQueueActivitiesPerSecond set to the request limit;
//  4. tollgate-redis: Tollgate with a Redis store per replica on one shared
//     redis-server;
//  5. tollgate-redis-wait: the same with interceptor.Options.WaitInWorkflow,
//     calls waiting for their place on a timer in their workflow.
//
// Each setup runs -replicas workers (each with its own Temporal client,
// HTTP client, store and interceptor) on one embedded Temporal server,
// against one llmsim whose limit refills every second instead of every
// minute, while agent workflows with prompts of varied size arrive at a
// steady rate above the limit. It prints a table (see the definitions it
// prints) and, with -out DIR, writes DIR/fleet.json and DIR/fleet.png.
//
//	go run ./bench/fleet -out /tmp/fleet
//
// With -faults it runs the two Tollgate-on-Redis setups as fault runs: a
// policy with a concurrency limit (-concurrency), longer provider latency,
// and mid-run one replica killed without warning while it has calls in
// flight and Redis restarted without persistence (see faults.go). The table
// then also counts the workflows lost and how far the provider's peak of
// calls in flight went over the limit.
//
//	go run ./bench/fleet -faults
//
// With -window F the provider enforces each limit also over F of its
// period (llmsim.Model.Window), as OpenAI and Anthropic say they may and
// Azure OpenAI does: -window 0.0167 is a per-minute limit enforced per
// second. Tollgate's policy still holds the whole per-period limit: the
// governor is not told the provider's shape. -shape says how the provider
// counts the window (llmsim.Model.WindowShape): bucket (the default),
// fixed (reset on the window's clock boundaries) or sliding (a log).
//
//	go run ./bench/fleet -window 0.0167
//	go run ./bench/fleet -window 0.0167 -shape sliding
//
// With -pool N each Tollgate setup's model is a pool of N members, N
// accounts each with the whole limit (see pool.go); halfway through the
// load the first member's account runs out of credit.
//
//	go run ./bench/fleet -pool 3 -setups tollgate-redis,tollgate-redis-wait
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

func main() {
	if spec := os.Getenv(replicaEnv); spec != "" {
		os.Exit(runReplicaProcess(spec))
	}
	replicas := flag.Int("replicas", 3, "worker replicas per setup")
	duration := flag.Duration("duration", 30*time.Second, "load window per setup")
	drain := flag.Duration("drain", 90*time.Second, "how long a setup may take to finish its workflows after the window (it ends as soon as they are done)")
	rate := flag.Float64("rate", 0, "agent workflows started per second, each making 2 LLM calls (default 5 ÷ -density: the same overload, about 1.4× the input-token limit, whatever the provider's density)")
	requests := flag.Int64("requests", 10, "provider limit: requests per period")
	inputTokens := flag.Int64("input-tokens", 5000, "provider limit: input tokens per period")
	outputTokens := flag.Int64("output-tokens", 2000, "provider limit: output tokens per period")
	period := flag.Duration("period", time.Second, "the provider's refill period (a minute compressed)")
	seed := flag.Uint64("seed", 1, "seed of the workload")
	out := flag.String("out", "", "directory to write fleet.json and fleet.png to")
	redisPath := flag.String("redis-server", "redis-server", "redis-server binary: a path, or a name looked up on PATH")
	shape := flag.String("shape", llmsim.ShapeBucket, "how the provider counts a limit over -window: bucket (refilled continuously, a call may overdraw it), fixed (counters reset on the window's clock boundaries) or sliding (a log of the last window's calls)")
	window := flag.Float64("window", 1, "the provider's enforcement window as a fraction of -period, in (0, 1]: it enforces each limit also over that share of the period, e.g. 0.0167 (1/60: a per-minute limit enforced per second) or 0.1667 (1/6: per 10 s); 1 is the whole period. Tollgate's policy is not told")
	density := flag.Float64("density", 1, "tokens the provider counts per characters/4 (its tokenizer's density; Tollgate estimates characters/4)")
	only := flag.String("setups", "", "comma-separated setups to run, by name (default: all of "+strings.Join(setupNames(), ",")+"; with -faults, "+strings.Join(faultSetups, ",")+")")
	faults := flag.Bool("faults", false, "fault runs: the Tollgate-on-Redis setups with a concurrency limit, one replica killed mid-call and Redis restarted empty mid-run")
	concurrency := flag.Int64("concurrency", defaultFaultConcurrency, "with -faults: the policy's limit on calls in flight at once")
	pool := flag.Int("pool", 0, "serve each Tollgate setup's model by a pool of this many members (accounts), each with the whole limit; the first is spend-capped halfway through the load. 0: no pool")
	tf := newTenantFlags(flag.CommandLine)
	flag.Parse()
	if *rate == 0 && *density > 0 {
		*rate = defaultRate / *density * float64(max(*pool, 1))
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	cfg := config{
		replicas: *replicas, window: *duration, drain: *drain, rate: *rate, seed: *seed, out: *out, redisPath: *redisPath,
		limits: limits{Period: *period, Requests: *requests, InputTokens: *inputTokens, OutputTokens: *outputTokens, Density: *density, Window: *window, Shape: *shape, Pool: *pool},
		only:   *only, faults: *faults, concurrency: *concurrency,
	}
	if *tf.on {
		if *pool != 0 {
			log.Fatalf("fleet: -pool and -tenants are separate runs: use one of them")
		}
		if err := runTenants(ctx, tenantConfig{config: cfg, burst: *tf.burst, trickle: *tf.trickle}); err != nil {
			log.Fatalf("fleet: %v", err)
		}
		return
	}
	if err := run(ctx, cfg); err != nil {
		log.Fatalf("fleet: %v", err)
	}
}

// defaultRate is the agent workflows started per second at a density of 1:
// demand about 1.4 times the input-token limit.
const defaultRate = 5.0

// config is the command line.
type config struct {
	replicas      int
	window, drain time.Duration
	rate          float64
	seed          uint64
	out           string
	redisPath     string
	limits        limits
	// only is -setups: the names to run, comma-separated; empty runs all
	// (with faults, faultSetups).
	only string
	// faults is -faults; concurrency is -concurrency, the policy's
	// concurrency limit in fault runs.
	faults      bool
	concurrency int64
}

// faultSetups are the setups -faults runs: those with a Redis to restart.
var faultSetups = []string{"tollgate-redis", "tollgate-redis-wait"}

func (c config) validate() error {
	switch {
	case c.replicas < 1:
		return errors.New("-replicas must be at least 1")
	case c.window <= 0 || c.drain < 0:
		return errors.New("-duration must be positive and -drain not negative")
	case !(c.limits.Density > 0 && c.limits.Density <= llmsim.MaxDensity):
		return fmt.Errorf("-density %g is out of range: use a ratio in (0, %d], e.g. 1.5 for a tokenizer counting 50%% more than characters/4", c.limits.Density, llmsim.MaxDensity)
	case c.rate <= 0:
		return errors.New("-rate must be positive")
	case c.limits.Period <= 0 || c.limits.Requests <= 0 || c.limits.InputTokens <= 0 || c.limits.OutputTokens <= 0:
		return errors.New("-period and the limits must be positive")
	case c.faults && c.replicas < 2:
		return fmt.Errorf("-replicas %d with -faults: use at least 2, one to kill and one to finish the work", c.replicas)
	case c.faults && c.concurrency < 1:
		return fmt.Errorf("-concurrency %d: use at least 1 call in flight", c.concurrency)
	case c.limits.Pool < 0 || c.limits.Pool == 1:
		return fmt.Errorf("-pool %d: use at least 2 members (one is spend-capped mid-run), or 0 for no pool", c.limits.Pool)
	case c.limits.Pool > 0 && c.faults:
		return errors.New("-pool and -faults are separate runs: use one of them")
	}
	if err := c.limits.validateWindow(); err != nil {
		return err
	}
	_, err := c.pick(setups(c.limits, ""))
	return err
}

// pick returns the setups the run runs, in order: -setups, else all of
// them, or with -faults or -pool all of faultSetups (and -setups may name
// no other).
func (c config) pick(all []setup) ([]setup, error) {
	if !c.faults && c.limits.Pool == 0 {
		return pick(all, c.only)
	}
	only := c.only
	if strings.TrimSpace(only) == "" {
		only = strings.Join(faultSetups, ",")
	}
	list, err := pick(all, only)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if !slices.Contains(faultSetups, s.name) {
			if c.limits.Pool > 0 {
				return nil, fmt.Errorf("-setups: %q is not a fleet-wide Tollgate setup, so -pool cannot run it: use a subset of %s", s.name, strings.Join(faultSetups, ","))
			}
			return nil, fmt.Errorf("-setups: %q has no Redis to restart, so -faults cannot run it: use a subset of %s", s.name, strings.Join(faultSetups, ","))
		}
	}
	return list, nil
}

// setupNames lists every setup's name, in the order they run.
func setupNames() []string {
	var names []string
	for _, s := range setups(limits{}, "") {
		names = append(names, s.name)
	}
	return names
}

// pick returns the setups named in only (comma-separated), in the order
// they run; all of them when only is empty.
func pick(all []setup, only string) ([]setup, error) {
	if strings.TrimSpace(only) == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(setupNames(), n) {
			return nil, fmt.Errorf("-setups: %q is not a setup: use a comma-separated subset of %s", n, strings.Join(setupNames(), ","))
		}
		want[n] = true
	}
	var out []setup
	for _, s := range all {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out, nil
}

func run(ctx context.Context, cfg config) error {
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

	latency := llmsim.Latency{Fixed: 30 * time.Millisecond, Jitter: 40 * time.Millisecond}
	if cfg.faults {
		cfg.limits.Concurrency, cfg.limits.LeaseTTL = cfg.concurrency, faultLeaseTTL
		latency = faultLatency
	}
	list, err := cfg.pick(setups(cfg.limits, rds.addr))
	if err != nil {
		return err
	}
	simCfg := llmsim.Config{Latency: latency, Seed: cfg.seed, RecordCharges: true}
	var models []string
	for _, s := range list {
		models = append(models, "fleet-"+s.name)
		simCfg.Models = append(simCfg.Models, cfg.limits.simModel("fleet-"+s.name))
	}
	simCfg.Accounts = simAccounts(cfg.limits.Pool, models)
	sim, simURL, stopSim, err := serveSim(ctx, simCfg)
	if err != nil {
		return err
	}
	defer stopSim()

	b := &bench{
		server: server, sim: sim, simURL: simURL, limits: cfg.limits,
		replicas: cfg.replicas, rate: cfg.rate, window: cfg.window, drain: cfg.drain, seed: cfg.seed,
	}
	if cfg.faults {
		b.faults = faultsAt(cfg.window, func() error { return rds.restart(ctx) })
		b.redisAddr, b.heartbeat = rds.addr, faultHeartbeat
	}
	fmt.Printf("Provider (llmsim, Anthropic Messages, one model per setup): %s.\n", cfg.limits)
	fmt.Printf("Fleet: %d replicas per setup on one embedded Temporal server; %.1f agent workflows/s for %s (then up to %s to drain),\n",
		cfg.replicas, cfg.rate, cfg.window, cfg.drain)
	fmt.Printf("each %d LLM calls with a system prompt of %v tokens (uniform) and max_tokens %d: demand ≈ %.1f calls/s.\n",
		agentTurns, promptTokens, agentMaxOutputs, cfg.rate*agentTurns)
	fmt.Printf("Temporal's retry intervals are not compressed: a 1 s retry is one whole period of the provider's limit.\n")
	if cfg.limits.Pool > 0 {
		fmt.Printf("Pool: the agents call a pool of %d members, accounts with a key and the limit above each (summed: %d× the limit);\n", cfg.limits.Pool, cfg.limits.Pool)
		fmt.Printf("Member 0 runs out of credit %s into the load, and goodput counts its limit only until then.\n", cfg.window/2)
	}
	if cfg.faults {
		fmt.Printf("Faults: llmsim answers in %s–%s; the activities' HeartbeatTimeout is %s and the policy's LeaseTTL %s.\n",
			latency.Fixed, latency.Fixed+latency.Jitter, faultHeartbeat, faultLeaseTTL)
		fmt.Printf("Replica 0 runs in a process of its own and is killed (SIGKILL) %s into the load, once it has a call in flight;\n", b.faults.killAt)
		fmt.Printf("Redis is killed and started again, empty, on the same port %s into the load.\n", b.faults.restartAt)
	}
	fmt.Println()

	var results []Result
	var panels []panel
	for _, s := range list {
		fmt.Printf("running %-22s %s\n", s.name, s.about)
		start := time.Now()
		r, err := b.runSetup(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		res := summarize(s.name, r.result)
		if r.faults != nil {
			fmt.Printf("  %s\n", r.faults)
		}
		if r.pool != nil {
			fmt.Printf("  %s; %d spend-cap answers\n", r.pool, res.SpendCapped)
		}
		for cause, n := range r.failures {
			fmt.Printf("  %d workflows did not complete: %s\n", n, cause)
		}
		fmt.Printf("  done in %s: %d/%d workflows, goodput %.3f\n", time.Since(start).Round(time.Second), res.Completed, res.Total, res.Goodput)
		results = append(results, res)
		panels = append(panels, newPanel(s.name, r, cfg.limits))
	}

	fmt.Println()
	if note := cfg.limits.windowNote(); note != "" {
		fmt.Printf("The %s.\n", note)
	}
	if err := printTable(os.Stdout, results, cfg.faults); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(definitions)
	if cfg.limits.Pool > 0 {
		fmt.Println(poolDefinitions)
	}
	if cfg.faults {
		fmt.Println(faultDefinitions)
	}
	fmt.Println()
	for _, r := range results {
		switch {
		case cfg.faults:
			fmt.Println(faultVerdict(r))
		case strings.HasPrefix(r.Name, "tollgate-redis"):
			fmt.Println(verdict(r))
		}
	}

	if cfg.out != "" {
		if err := writeOutputs(cfg.out, cfg.limits, results, panels); err != nil {
			return err
		}
		fmt.Printf("wrote %s and %s\n", filepath.Join(cfg.out, "fleet.json"), filepath.Join(cfg.out, "fleet.png"))
	}
	fmt.Printf("wall time %s\n", time.Since(began).Round(time.Second))
	return nil
}

// verdict checks Tollgate's line against its targets.
func verdict(r Result) string {
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	return fmt.Sprintf("%s targets: goodput %.3f ≥ 0.95 %s; 429/100 %.2f ≤ 0.5 %s; attempts/call %.2f ≤ 1.2 %s (calls/call %.2f); completed %d/%d %s",
		r.Name, r.Goodput, check(r.Goodput >= 0.95), r.Provider429Per100, check(r.Provider429Per100 <= 0.5),
		r.AttemptsPerCall, check(r.AttemptsPerCall <= 1.2), r.ProviderCallsPerCall, r.Completed, r.Total, check(r.Completed == r.Total))
}

// faultVerdict checks a fault run against its targets: nothing lost, the
// concurrency limit held at the provider, at most 1 provider 429 per 100
// calls.
func faultVerdict(r Result) string {
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	return fmt.Sprintf("%s under faults: lost %d = 0 %s; provider peak in flight %d ≤ %d (over_limit %d) %s; 429/100 %.2f ≤ 1 %s",
		r.Name, r.Lost, check(r.Lost == 0), r.ProviderPeakInFlight, r.ConcurrencyLimit, r.OverLimit, check(r.OverLimit == 0),
		r.Provider429Per100, check(r.Provider429Per100 <= 1))
}

func writeOutputs(dir string, l limits, results []Result, panels []panel) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "fleet.json"))
	if err != nil {
		return err
	}
	if err := writeJSON(f, results); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	sub := fmt.Sprintf("limit %d requests + %d input tokens per %s (a minute compressed); provider counts %g× characters/4",
		l.Requests, l.InputTokens, l.Period, l.Density)
	if note := l.windowNote(); note != "" {
		sub += "\n" + note
	}
	return writeChart(filepath.Join(dir, "fleet.png"), sub, panels)
}

// serveSim starts llmsim with cfg on a free loopback port and returns it,
// its URL and a func that stops serving it.
func serveSim(ctx context.Context, cfg llmsim.Config) (*llmsim.Sim, string, func(), error) {
	sim, err := llmsim.New(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	simCtx, stop := context.WithCancel(ctx)
	go sim.Serve(simCtx, l)
	return sim, "http://" + l.Addr().String(), stop, nil
}
