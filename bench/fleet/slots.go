package main

import (
	"context"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// slots is the outermost worker interceptor of every replica of a setup. It
// counts activity executions fleet-wide: attempts started, attempts that
// returned a result, and how many run at once (the activity slots held),
// refused and failed attempts included. Local activities (WaitInWorkflow's
// reservations) run in slots of their own and are not counted. A replica
// running in a process of its own counts with a slots whose report sends
// each event to the benchmark, which applies it to the setup's slots.
type slots struct {
	interceptor.WorkerInterceptorBase
	inFlight, peak      atomic.Int64
	attempts, completed atomic.Int64
	// report, when set, is told of every begin and end (see slotEvent).
	report func(slotEvent)
}

var _ interceptor.WorkerInterceptor = (*slots)(nil)

// slotEvent is one change to a slots' counts, as a replica process reports
// it.
type slotEvent byte

const (
	execBegan     slotEvent = 'b' // an LLM activity execution started
	execSucceeded slotEvent = 's' // one returned a result
	execFailed    slotEvent = 'f' // one returned an error
	toolBegan     slotEvent = 't' // a tool activity execution started
	toolEnded     slotEvent = 'e' // one ended
)

// begin counts an activity execution starting: an LLM call's (llm), or an
// agent's tool call, which holds a slot but is not an LLM call, so
// attempts count the LLM activities alone.
func (s *slots) begin(llm bool) {
	if llm {
		s.attempts.Add(1)
	}
	n := s.inFlight.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if s.report != nil {
		e := toolBegan
		if llm {
			e = execBegan
		}
		s.report(e)
	}
}

// end counts an activity execution ending; ok when it returned a result.
func (s *slots) end(ok, llm bool) {
	if ok && llm {
		s.completed.Add(1)
	}
	s.inFlight.Add(-1)
	if s.report != nil {
		switch {
		case !llm:
			s.report(toolEnded)
		case ok:
			s.report(execSucceeded)
		default:
			s.report(execFailed)
		}
	}
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (s *slots) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return hook(next, s.execute)
}

func (s *slots) execute(ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error) {
	if activity.GetInfo(ctx).IsLocalActivity {
		return next.ExecuteActivity(ctx, in)
	}
	// An agent's tool call holds a slot but is no LLM call: attempts and
	// completed calls count the LLM activities alone.
	llm := activity.GetInfo(ctx).ActivityType.Name != stepsTool.Name
	s.begin(llm)
	ok := false
	defer func() { s.end(ok, llm) }()
	res, err := next.ExecuteActivity(ctx, in)
	ok = err == nil
	return res, err
}

// hooked is an activity inbound interceptor that runs fn, given the next
// interceptor, for every execution: the one body the bench's interceptors
// need.
type hooked struct {
	interceptor.ActivityInboundInterceptorBase
	fn func(ctx context.Context, in *interceptor.ExecuteActivityInput, next interceptor.ActivityInboundInterceptor) (any, error)
}

func hook(next interceptor.ActivityInboundInterceptor, fn func(context.Context, *interceptor.ExecuteActivityInput, interceptor.ActivityInboundInterceptor) (any, error)) interceptor.ActivityInboundInterceptor {
	h := &hooked{fn: fn}
	h.Next = next
	return h
}

func (h *hooked) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	return h.fn(ctx, in, h.Next)
}
