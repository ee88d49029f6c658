package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// plan is the demo's workload: how many agent workflows run against each
// model of defaultSimConfig.
type plan struct {
	// Primary workflows talk to the tight model (60 RPM); Tollgate queues
	// them so the provider never has to say 429.
	Primary int
	// Flaky workflows talk to a model llmsim answers with 429s after its
	// first FlakyAfter calls: each such call escalates to the backup.
	Flaky      int
	FlakyAfter int
	// Capped workflows talk to the model whose account hits its spend cap:
	// the key closes and the rest of their calls fall back.
	Capped int
	// Gemini workflows talk to the Gemini model whose project has only
	// simGeminiRequestsPerDay requests left today: Gemini's per-day
	// 429 closes the key until midnight America/Los_Angeles, and the rest of
	// their calls fall back to the OpenAI backup.
	Gemini int
	// Tools are the tools each agent is given (of demoTools): the
	// simulated model calls each once, then answers, so an agent makes
	// Tools+1 LLM calls. MaxOutputTokens bounds each answer.
	Tools           int
	MaxOutputTokens int64
	// Timeout bounds the whole run.
	Timeout time.Duration
}

// defaultPlan is `go run ./cmd/worker demo`: 54 agents with two tools
// each, so three turns (two tool calls, then the answer) and 162 calls, of which 108 compete for 57 requests a minute on the primary. The
// primary's bucket starts full, so the run lasts about a minute; the Gemini
// agents' 18 calls meet their project's last 10 requests of the day a third
// of the way in.
func defaultPlan() plan {
	return plan{Primary: 36, Flaky: 6, FlakyAfter: 6, Capped: 6, Gemini: 6, Tools: 2, MaxOutputTokens: 128, Timeout: 5 * time.Minute}
}

func (p plan) workflows() int { return p.Primary + p.Flaky + p.Capped + p.Gemini }

// job is one agent workflow of the demo.
type job struct {
	id    string
	role  string
	input workflows.AgentInput
}

var tasks = []string{
	"Plan a three-day trip to Lisbon on a budget.",
	"Draft a migration plan from cron jobs to Temporal schedules.",
	"Summarise the trade-offs of token buckets versus fixed windows.",
	"Write a checklist for rotating an API key without downtime.",
	"Outline a blog post about backpressure in agent systems.",
	"Propose tests for a rate limiter shared by a fleet of workers.",
}

func (p plan) jobs(run string) []job {
	var js []job
	add := func(n int, role, provider, model string) {
		for i := range n {
			js = append(js, job{
				id:   fmt.Sprintf("demo-%s-%s-%02d", run, role, i+1),
				role: role,
				input: workflows.AgentInput{
					Provider: provider, Model: model,
					System:          "You are a careful planning assistant. Answer in short numbered steps.",
					Task:            tasks[(len(js))%len(tasks)],
					Tools:           demoTools[:p.Tools],
					MaxOutputTokens: p.MaxOutputTokens,
				},
			})
		}
	}
	add(p.Primary, "primary", activities.OpenAI, simPrimary)
	add(p.Flaky, "flaky", activities.OpenAI, simFlaky)
	add(p.Capped, "capped", activities.Anthropic, simCapped)
	add(p.Gemini, "gemini", activities.Gemini, simGemini)
	return js
}

// tally counts workflow outcomes as they arrive.
type tally struct {
	completed, failed, backupTurns atomic.Int64
	// toolCalls counts the tool calls the completed agents ran.
	toolCalls atomic.Int64
	// geminiBackupTurns is the part of backupTurns from Gemini agents.
	geminiBackupTurns atomic.Int64
	mu                sync.Mutex
	errors            []string
}

func (t *tally) done() int64 { return t.completed.Load() + t.failed.Load() }

// runDemo runs the workload on the embedded defaults (whatever Temporal and
// store cfg names; always the simulated providers), shows progress on out
// and returns 0 when everything behaved as designed. clock times the run,
// and says whether a day ended during it.
func runDemo(ctx context.Context, cfg config, p plan, clock quota.Clock, out, errOut io.Writer, tty bool) int {
	var level slog.LevelVar
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: &level}))
	if !cfg.simulated() {
		logger.Info("demo: runs on the simulated providers only; ignoring the API keys and base URLs")
		cfg.OpenAIAPIKey, cfg.AnthropicAPIKey, cfg.OpenAIBaseURL, cfg.AnthropicBaseURL = "", "", "", ""
		cfg.GeminiAPIKey, cfg.GeminiBaseURL = "", ""
	}
	if cfg.Policies != "" {
		logger.Info("demo: uses the simulator's default policies; ignoring POLICIES", "file", cfg.Policies)
		cfg.Policies = ""
	}
	if cfg.SimConfig != "" {
		logger.Info("demo: runs on the default simulator profile (its workload needs those models); ignoring SIM_CONFIG", "file", cfg.SimConfig)
		cfg.SimConfig = ""
	}
	start := clock.Now()
	a, err := startApp(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(errOut, "demo:", err)
		return 1
	}
	defer a.stop()
	if u := a.uiURL(); u != "" {
		fmt.Fprintf(out, "Temporal UI: %s (the agents' workflows, each refusal's scheduled retry, the fallback children)\n", u)
	}
	w, sim := a.w, a.sim
	// From here on the status block is the output: nothing is logged (the
	// SDK logs every retried attempt at error level, and each retry here is
	// by design). Failures show in the summary.
	level.Set(slog.LevelError + 4)

	if err := sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Provider: llmsim.OpenAI, Model: simFlaky,
		After: p.FlakyAfter, RetryAfter: time.Second}); err != nil {
		fmt.Fprintln(errOut, "demo:", err)
		return 1
	}

	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	// Closings are recorded as they happen: a key closed until midnight
	// may have reopened by the end of the run.
	watch := newClosures(w.Store(), w.Budgets().Policies.Keys())
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan struct{})
	go func() { defer close(watched); watch.watch(watchCtx) }()
	run := clock.Now().Format("150405")
	jobs := p.jobs(run)
	var t tally
	var wg sync.WaitGroup
	for _, j := range jobs {
		r, err := w.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: j.id, TaskQueue: w.Config().TaskQueue, WorkflowExecutionTimeout: p.Timeout,
		}, workflows.AgentWorkflow, j.input)
		if err != nil {
			fmt.Fprintln(errOut, "demo: start workflow:", err)
			return 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res workflows.AgentResult
			if err := r.Get(ctx, &res); err != nil {
				t.failed.Add(1)
				t.mu.Lock()
				t.errors = append(t.errors, j.id+": "+err.Error())
				t.mu.Unlock()
				return
			}
			for _, turn := range res.Turns {
				if turn.Model != j.input.Model {
					t.backupTurns.Add(1)
					if j.role == "gemini" {
						t.geminiBackupTurns.Add(1)
					}
				}
			}
			t.toolCalls.Add(int64(res.ToolCalls))
			t.completed.Add(1)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	view := &progress{out: out, tty: tty, w: w, plan: p, tally: &t, clock: clock, start: start}
	every := 5 * time.Second
	if tty {
		every = 250 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	view.draw(ctx)
loop:
	for {
		select {
		case <-finished:
			break loop
		case <-ctx.Done():
			<-finished // every Get returns once ctx is done
			break loop
		case <-tick.C:
			view.draw(ctx)
		}
	}
	view.draw(context.Background())
	stopWatch()
	<-watched
	watch.observe(context.Background())
	return summarize(out, w, sim, p, &t, watch, start, clock.Now())
}

// verdict checks the run against the design: every workflow completed, the
// primary (governed by a policy matching its limit) never answered 429, each
// reactive layer showed itself at least once, and the Gemini key was closed
// until midnight in Los Angeles by its daily quota, unless the day ended
// there during the run (see dailyClose).
func verdict(n int, st interceptor.Stats, t *tally, primary429 int64, gemini dailyClose) []string {
	var bad []string
	if c := t.completed.Load(); c != int64(n) {
		bad = append(bad, fmt.Sprintf("completed=%d, want every one of the %d workflows", c, n))
	}
	if primary429 > 0 {
		bad = append(bad, fmt.Sprintf("%s answered %d 429s: Tollgate let through more than its limit", simPrimary, primary429))
	}
	if st.Escalations < 1 {
		bad = append(bad, "no call escalated to a backup model")
	}
	if st.Fallbacks < 1 {
		bad = append(bad, "no FallbackWorkflow ran")
	}
	if st.SpendCapped < 1 {
		bad = append(bad, "no spend cap was reached")
	}
	if !gemini.asDesigned() {
		bad = append(bad, "the Gemini key was not closed until midnight America/Los_Angeles by its daily quota, and no midnight passed there during the run")
	}
	return bad
}
