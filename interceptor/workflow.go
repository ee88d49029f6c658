package interceptor

import (
	"errors"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/fallback"
	"github.com/tollgate/tollgate/quota"
)

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	root *WorkerInterceptor
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{root: w.root}
	o.Next = outbound
	return w.Next.Init(o)
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	root *WorkerInterceptor
	// calls counts the governed calls that took a place in line from this
	// workflow, to name each place's ticket.
	calls int
}

// ExecuteActivity passes a fallback step on to the activity interceptor in
// the call's header; with Options.WaitInWorkflow it first takes a governed
// call's place in line; and for a governed call it turns a
// RateLimitEscalation into a FallbackWorkflow child whose result resolves
// the caller's future.
func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if step, ok := fallback.StepFrom(ctx); ok {
		if p, err := converter.GetDefaultDataConverter().ToPayload(step); err == nil {
			interceptor.WorkflowHeader(ctx)[fallbackHeader] = p
		}
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	var charge quota.Charge
	waits := false
	if (len(args) > 0 && isGoverned(args[0])) || o.root.governsType(activityType) {
		var err error
		charge, err = o.root.charge(activityType, args)
		// A call that cannot be charged is scheduled as it is: its
		// activity interceptor fails it and says why.
		waits = err == nil && o.waits(ctx)
	}
	escalates := o.escalates(args)
	if !waits && !escalates {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	ao := workflow.GetActivityOptions(ctx)
	var fut workflow.Future
	if !waits {
		fut = o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	result, settable := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if waits {
			ticket, member, err := o.reserve(ctx, charge, ao)
			if err != nil {
				settable.Set(nil, err)
				return
			}
			fut = o.execute(ctx, ticket, member, activityType, args)
		}
		var raw converter.RawValue
		err := fut.Get(ctx, &raw)
		if esc, ok := tollgate.Escalation(err); ok && escalates && len(esc.Backups) > 0 {
			raw, err = o.fallback(ctx, activityType, args[0], ao, esc, err)
		}
		if raw.Payload() == nil {
			settable.Set(nil, err)
			return
		}
		// A *Payloads value is decoded by the caller's Get like the
		// activity's own result.
		settable.Set(&commonpb.Payloads{Payloads: []*commonpb.Payload{raw.Payload()}}, err)
	})
	return result
}

// escalates reports whether a call may escalate: one whose input can be
// sent to another model. Whether it does is read from its failure in
// history, never from configuration, so replays decide the same way.
func (o *workflowOutbound) escalates(args []any) bool {
	if len(args) == 0 {
		return false
	}
	_, ok := args[0].(tollgate.Retargetable)
	return ok
}

// fallback runs the call's input on the backups in a FallbackWorkflow child.
// The child's id is derived from this workflow's id and the activity's, so a
// retried workflow task cannot start two.
func (o *workflowOutbound) fallback(ctx workflow.Context, activityType string, input any, ao workflow.ActivityOptions, esc tollgate.EscalationDetails, cause error) (converter.RawValue, error) {
	info := workflow.GetInfo(ctx)
	var actErr *temporal.ActivityError
	activityID := "0"
	if asActivityError(cause, &actErr) {
		activityID = actErr.ActivityID()
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            info.WorkflowExecution.ID + "/fallback/" + activityID,
		TaskQueue:             info.TaskQueueName,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	if !workflow.IsReplaying(ctx) {
		o.root.counters.fallbacks.Add(1)
		o.root.ins.fallback(esc.From)
	}
	in := tollgate.FallbackInput{
		ActivityType: activityType,
		From:         esc.From,
		Chain:        esc.Backups,
		Options:      fallback.OptionsFrom(ao),
	}
	var raw converter.RawValue
	err := workflow.ExecuteChildWorkflow(cctx, tollgate.FallbackWorkflowName, in, input).Get(ctx, &raw)
	return raw, err
}

func asActivityError(err error, target **temporal.ActivityError) bool {
	return errors.As(err, target)
}
