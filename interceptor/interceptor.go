package interceptor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// WorkerInterceptor is Tollgate's Temporal worker interceptor. Add it to
// worker.Options.Interceptors. It is safe for concurrent use by any number of
// workers.
type WorkerInterceptor struct {
	interceptor.WorkerInterceptorBase
	opts     Options
	ins      *instruments
	counters counters
	// ungoverned holds the keys without a policy already logged.
	ungoverned sync.Map
	// poolTurn rotates the member a pool call asks first.
	poolTurn atomic.Uint64
}

var _ interceptor.WorkerInterceptor = (*WorkerInterceptor)(nil)

// New validates opts, fills in the defaults and returns the interceptor.
func New(opts Options) (*WorkerInterceptor, error) {
	metered := opts.Meter != nil
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ins, err := newInstruments(opts.Meter, metered, opts.Tenants)
	if err != nil {
		return nil, fmt.Errorf("interceptor: metrics: %w", err)
	}
	return &WorkerInterceptor{opts: opts, ins: ins}, nil
}

// Stats returns what this interceptor has counted so far.
func (w *WorkerInterceptor) Stats() Stats { return w.counters.snapshot() }

// InterceptActivity implements interceptor.WorkerInterceptor.
func (w *WorkerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityInbound{root: w}
	a.Next = next
	return a
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (w *WorkerInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowInbound{root: w}
	i.Next = next
	return i
}
