package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// limits is the provider's limit on the benchmark's model, per Period: the
// minute compressed so a run takes seconds, not hours; and what Tollgate's
// policy adds to it in a fault run.
type limits struct {
	Period       time.Duration
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	// Density is how many tokens the provider counts per characters/4
	// (llmsim.Model.Density): what Tollgate must learn, not assume.
	Density float64
	// Window is -window: the fraction of Period over which the provider
	// also enforces each limit (llmsim.Model.Window), e.g. 1/60 for a
	// per-minute limit enforced per second. 0 and 1 mean the whole period.
	// Tollgate's policy is not told: the governor does not know the
	// provider's shape.
	Window float64
	// Shape is -shape: how the provider counts a limit over Window
	// (llmsim.Model.WindowShape: bucket, fixed or sliding); empty is
	// llmsim's default, the bucket.
	Shape string
	// Concurrency, when positive, is the policy's limit on calls in flight
	// at once (quota.Concurrent). The provider does not enforce it; llmsim
	// counts the calls it holds (llmsim.Sim.InFlight), so a run shows
	// whether the fleet kept to it.
	Concurrency int64
	// LeaseTTL is the policy's LeaseTTL; 0 is quota's default.
	LeaseTTL time.Duration
	// Pool, when positive, is -pool: the model is served by this many
	// members, each an account with the whole limit (see pool.go).
	Pool int
}

// simModel is the llmsim model one setup calls, with the limits.
func (l limits) simModel(name string) llmsim.Model {
	return llmsim.Model{
		Provider:              llmsim.Anthropic,
		Name:                  name,
		RequestsPerMinute:     l.Requests,
		InputTokensPerMinute:  l.InputTokens,
		OutputTokensPerMinute: l.OutputTokens,
		Period:                l.Period,
		Window:                l.enforcement(),
		WindowShape:           l.Shape,
		Density:               l.Density,
	}
}

// enforcement is the provider's enforcement window as a duration, for
// llmsim.Model.Window: Window × Period, or 0 (the whole period) when Window
// is 0 or 1.
func (l limits) enforcement() time.Duration {
	if l.Window <= 0 || l.Window >= 1 {
		return 0
	}
	return time.Duration(float64(l.Period) * l.Window)
}

// validateWindow reports a bad -window: a fraction outside (0, 1], or one
// whose share of Period is less than a nanosecond. Period must be positive.
func (l limits) validateWindow() error {
	switch {
	case !(l.Window > 0 && l.Window <= 1):
		return fmt.Errorf("-window %g is out of range: use a fraction of -period in (0, 1], e.g. 0.0167 (1/60) for a per-minute limit enforced per second, 0.1667 (1/6) per 10 s, or 1 for the whole period", l.Window)
	case l.Window < 1 && l.enforcement() <= 0:
		return fmt.Errorf("-window %g of -period %s is less than a nanosecond: use a larger fraction, e.g. 0.0167 (1/60)", l.Window, l.Period)
	}
	switch l.Shape {
	case "", llmsim.ShapeBucket, llmsim.ShapeFixed, llmsim.ShapeSliding:
	default:
		return fmt.Errorf("-shape %q is not a window shape: use bucket, fixed or sliding", l.Shape)
	}
	return nil
}

// windowNote states the provider's enforcement window for the chart's title
// and the table's header, e.g. "provider enforces each limit over 1/60 of
// its period (16.7ms, bucket window)"; "" when it is the whole period.
func (l limits) windowNote() string {
	w := l.enforcement()
	if w <= 0 {
		return ""
	}
	shape := l.Shape
	if shape == "" {
		shape = llmsim.ShapeBucket
	}
	return fmt.Sprintf("provider enforces each limit over %s of its period (%s, %s window)", fraction(l.Window), w.Round(100*time.Microsecond), shape)
}

// fraction writes f as 1/n when it is within 1% of one, else as a decimal.
func fraction(f float64) string {
	if n := math.Round(1 / f); n >= 2 && math.Abs(1/f-n) < 0.01*n {
		return fmt.Sprintf("1/%.0f", n)
	}
	return fmt.Sprintf("%.4g", f)
}

// policy is Tollgate's budget for the model: the provider's limits exactly,
// no headroom, so goodput can reach the limit.
func (l limits) policy() quota.Policy {
	p := quota.Policy{LeaseTTL: l.LeaseTTL, Limits: []quota.Limit{
		quota.Per(quota.Requests, l.Requests, l.Period),
		quota.Per(quota.InputTokens, l.InputTokens, l.Period),
		quota.Per(quota.OutputTokens, l.OutputTokens, l.Period),
	}}
	if l.Concurrency > 0 {
		p.Limits = append(p.Limits, quota.Concurrent(l.Concurrency))
	}
	return p
}

// String states the limit and the compression, for the run's header.
func (l limits) String() string {
	s := fmt.Sprintf("%d requests, %d input tokens, %d output tokens per %s (a per-minute limit refilled every %s: time compressed %.0f×); it counts %g× characters/4 tokens",
		l.Requests, l.InputTokens, l.OutputTokens, l.Period, l.Period, time.Minute.Seconds()/l.Period.Seconds(), l.Density)
	if note := l.windowNote(); note != "" {
		s += "; the " + note + ", which Tollgate's policy does not know"
	}
	if l.Concurrency > 0 {
		s += fmt.Sprintf(". Tollgate's policy adds a limit of %d calls in flight at once", l.Concurrency)
	}
	return s
}

// promptTokens are the system prompt sizes drawn, uniformly, for each
// workflow: a token-heavy mix in which the input-token axis binds before the
// request axis does.
var promptTokens = []int{100, 250, 500, 1000, 1600}

// Shape of every agent: turns per workflow (a call of its one tool, then
// the answer) and the answer bound.
const (
	agentTurns      = 2
	agentMaxOutputs = 64
)

// stepsTool is every agent's tool: an activity (registered by each
// replica) that is not an LLM call, so Tollgate does not govern it.
var stepsTool = activities.Tool{
	Name:        "list_steps",
	Description: "List the steps of a job.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`),
}

// listSteps is stepsTool's activity.
func listSteps(ctx context.Context, call activities.ToolCall) (string, error) {
	return `["gather","plan","check"]`, nil
}

// workload draws the agents a setup starts. Every setup gets the same
// sequence for the same seed.
type workload struct {
	rng *rand.Rand
	n   int
}

func newWorkload(seed uint64) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// next returns the next agent, aimed at model.
func (w *workload) next(model string) workflows.AgentInput {
	w.n++
	tokens := promptTokens[w.rng.IntN(len(promptTokens))]
	return workflows.AgentInput{
		Provider:        activities.Anthropic,
		Model:           model,
		System:          systemPrompt(tokens),
		Task:            fmt.Sprintf("Plan job %d: split it into steps and name the first.", w.n),
		Tools:           []activities.Tool{stepsTool},
		MaxOutputTokens: agentMaxOutputs,
	}
}

// systemPrompt is about tokens tokens of instructions (four characters a
// token, as providers estimate).
func systemPrompt(tokens int) string {
	const line = "You are a careful planner; answer briefly. "
	s := strings.Repeat(line, tokens*4/len(line)+1)
	return s[:tokens*4]
}
