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
// reservations) run in slots of their own and are not counted.
type slots struct {
	interceptor.WorkerInterceptorBase
	inFlight, peak      atomic.Int64
	attempts, completed atomic.Int64
}

var _ interceptor.WorkerInterceptor = (*slots)(nil)

// InterceptActivity implements interceptor.WorkerInterceptor.
func (s *slots) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &slotsInbound{s: s}
	i.Next = next
	return i
}

type slotsInbound struct {
	interceptor.ActivityInboundInterceptorBase
	s *slots
}

func (i *slotsInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if activity.GetInfo(ctx).IsLocalActivity {
		return i.Next.ExecuteActivity(ctx, in)
	}
	i.s.attempts.Add(1)
	n := i.s.inFlight.Add(1)
	for p := i.s.peak.Load(); n > p && !i.s.peak.CompareAndSwap(p, n); p = i.s.peak.Load() {
	}
	defer i.s.inFlight.Add(-1)
	res, err := i.Next.ExecuteActivity(ctx, in)
	if err == nil {
		i.s.completed.Add(1)
	}
	return res, err
}
