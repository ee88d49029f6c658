package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// A fault run (-faults) runs the Tollgate-on-Redis setups with a concurrency
// limit and, mid-run, two faults: replica 0 (a process of its own) is killed
// without warning while it has calls to the provider in flight, and Redis is
// killed and started again without persistence, so every budget, place in
// line and concurrency lease is gone. Both are what a fleet meets in
// production; the run shows whether every workflow still completes, whether
// the provider ever held more calls at once than the limit, and how many
// 429s the faults cost.

// Fault runs use these, so that the faults play out in seconds.
const (
	// faultHeartbeat is the HeartbeatTimeout of the LLM activities in a
	// fault run (in place of workflows.LLMActivityOptions' 30 s): the server
	// retries a killed replica's calls elsewhere about this long after its
	// last heartbeat, and Tollgate's leases live this long between renewals.
	faultHeartbeat = 3 * time.Second
	// faultLeaseTTL is the policy's LeaseTTL: the most a grant lives
	// without renewal, and how long a matured place in line waits for its
	// caller.
	faultLeaseTTL = 15 * time.Second
	// defaultFaultConcurrency is -concurrency's default.
	defaultFaultConcurrency = 10
	// faultWait bounds how long a fault waits for the calls in flight it
	// should strike: the kill for the victim to have one, the restart for
	// the provider to hold as many as the concurrency limit.
	faultWait = 10 * time.Second
)

// faultLatency is llmsim's latency in a fault run: long enough that calls
// overlap and the concurrency limit binds, and that calls admitted before
// Redis restarts are still in flight when calls admitted after it arrive.
var faultLatency = llmsim.Latency{Fixed: time.Second, Jitter: time.Second}

// faultPlan is what a fault run does to a setup, at times counted from the
// start of its load.
type faultPlan struct {
	// killAt is when replica 0 (the victim) is killed, once it has a call
	// in flight.
	killAt time.Duration
	// restartAt is when restartRedis runs, once the provider holds as many
	// calls as the concurrency limit (every slot in use).
	restartAt time.Duration
	// restartRedis kills Redis and starts it again, empty, on the same
	// address. It is called on the goroutine that called runSetup.
	restartRedis func() error
}

// faultsAt returns the plan of a run whose load lasts window: the kill a
// third of the way in, the restart two thirds of the way.
func faultsAt(window time.Duration, restartRedis func() error) *faultPlan {
	return &faultPlan{killAt: window / 3, restartAt: 2 * window / 3, restartRedis: restartRedis}
}

// faultLog is what a fault run did, for its report.
type faultLog struct {
	// Killed is when the victim was killed (from the start of the load),
	// with KilledCalls the provider calls it had in flight then.
	Killed      time.Duration `json:"killed_at"`
	KilledCalls int64         `json:"killed_calls_in_flight"`
	// Restarted is when Redis was restarted, with RestartedCalls the calls
	// the provider held then.
	Restarted      time.Duration `json:"redis_restarted_at"`
	RestartedCalls int64         `json:"redis_restarted_calls_in_flight"`
}

func (f faultLog) String() string {
	return fmt.Sprintf("replica 0 killed at %s with %d provider calls in flight; Redis restarted empty at %s with %d calls in flight at the provider",
		f.Killed.Round(100*time.Millisecond), f.KilledCalls, f.Restarted.Round(100*time.Millisecond), f.RestartedCalls)
}

// fault is one fault of a plan, due at an offset from the load's start.
type fault struct {
	at time.Duration
	// do strikes; loadStart is when the load started.
	do func(ctx context.Context, loadStart time.Time) error
}

// schedule returns the plan's faults in the order they are due, recording
// what they did in log. inFlight tells the calls the provider holds, limit
// the concurrency limit.
func (p *faultPlan) schedule(victim *replicaProcess, log *faultLog, inFlight func() int64, limit int64) ([]fault, error) {
	if victim == nil {
		return nil, errNoVictim
	}
	if p.restartRedis == nil {
		return nil, errors.New("a fault run needs a way to restart Redis")
	}
	kill := fault{at: p.killAt, do: func(ctx context.Context, start time.Time) error {
		log.KilledCalls = victim.killWithCallsInFlight(ctx, faultWait)
		log.Killed = time.Since(start)
		return nil
	}}
	restart := fault{at: p.restartAt, do: func(ctx context.Context, start time.Time) error {
		deadline := time.Now().Add(faultWait)
		for inFlight() < limit && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		log.RestartedCalls = inFlight()
		log.Restarted = time.Since(start)
		if err := p.restartRedis(); err != nil {
			return fmt.Errorf("restart Redis: %w", err)
		}
		return nil
	}}
	if restart.at < kill.at {
		return []fault{restart, kill}, nil
	}
	return []fault{kill, restart}, nil
}

// errNoVictim is returned when a fault run has no replica to kill.
var errNoVictim = errors.New("a fault run needs at least two replicas: one to kill, one to finish the work")

// heartbeatTimeout is a worker interceptor that gives every activity its
// workflows schedule the HeartbeatTimeout d, whatever the workflow asked:
// AgentWorkflow's 30 s would make a fault run last minutes. It is
// deterministic (a constant) and leaves local activities alone.
type heartbeatTimeout struct {
	interceptor.WorkerInterceptorBase
	d time.Duration
}

var _ interceptor.WorkerInterceptor = (*heartbeatTimeout)(nil)

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (h *heartbeatTimeout) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &heartbeatInbound{d: h.d}
	i.Next = next
	return i
}

type heartbeatInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	d time.Duration
}

func (i *heartbeatInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &heartbeatOutbound{d: i.d}
	o.Next = outbound
	return i.Next.Init(o)
}

type heartbeatOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	d time.Duration
}

func (o *heartbeatOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	return o.Next.ExecuteActivity(workflow.WithHeartbeatTimeout(ctx, o.d), activityType, args...)
}
