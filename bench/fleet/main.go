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
	density := flag.Float64("density", 1, "tokens the provider counts per characters/4 (its tokenizer's density; Tollgate estimates characters/4)")
	only := flag.String("setups", "", "comma-separated setups to run, by name (default: all of "+strings.Join(setupNames(), ",")+")")
	tf := newTenantFlags(flag.CommandLine)
	flag.Parse()
	if *rate == 0 && *density > 0 {
		*rate = defaultRate / *density
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	cfg := config{
		replicas: *replicas, window: *duration, drain: *drain, rate: *rate, seed: *seed, out: *out, redisPath: *redisPath,
		limits: limits{Period: *period, Requests: *requests, InputTokens: *inputTokens, OutputTokens: *outputTokens, Density: *density},
		only:   *only,
	}
	if *tf.on {
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
	// only is -setups: the names to run, comma-separated; empty runs all.
	only string
}

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
	}
	_, err := pick(setups(c.limits, ""), c.only)
	return err
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

	list, err := pick(setups(cfg.limits, rds.addr), cfg.only)
	if err != nil {
		return err
	}
	simCfg := llmsim.Config{Latency: llmsim.Latency{Fixed: 30 * time.Millisecond, Jitter: 40 * time.Millisecond}, Seed: cfg.seed}
	for _, s := range list {
		simCfg.Models = append(simCfg.Models, cfg.limits.simModel("fleet-"+s.name))
	}
	sim, err := llmsim.New(simCfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	simCtx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	go sim.Serve(simCtx, l)

	b := &bench{
		server: server, sim: sim, simURL: "http://" + l.Addr().String(), limits: cfg.limits,
		replicas: cfg.replicas, rate: cfg.rate, window: cfg.window, drain: cfg.drain, seed: cfg.seed,
	}
	fmt.Printf("Provider (llmsim, Anthropic Messages, one model per setup): %s.\n", cfg.limits)
	fmt.Printf("Fleet: %d replicas per setup on one embedded Temporal server; %.1f agent workflows/s for %s (then up to %s to drain),\n",
		cfg.replicas, cfg.rate, cfg.window, cfg.drain)
	fmt.Printf("each %d LLM calls with a system prompt of %v tokens (uniform) and max_tokens %d: demand ≈ %.1f calls/s.\n",
		agentTurns, promptTokens, agentMaxOutputs, cfg.rate*agentTurns)
	fmt.Printf("Temporal's retry intervals are not compressed: a 1 s retry is one whole period of the provider's limit.\n\n")

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
		fmt.Printf("  done in %s: %d/%d workflows, goodput %.3f\n", time.Since(start).Round(time.Second), res.Completed, res.Total, res.Goodput)
		results = append(results, res)
		panels = append(panels, newPanel(s.name, r, cfg.limits))
	}

	fmt.Println()
	if err := printTable(os.Stdout, results); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(definitions)
	fmt.Println()
	for _, r := range results {
		if strings.HasPrefix(r.Name, "tollgate-redis") {
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
	return writeChart(filepath.Join(dir, "fleet.png"), sub, panels)
}
