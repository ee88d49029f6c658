package interceptor

import (
	"context"
	"strconv"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate/internal/fallback"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
)

// ticketHeader carries the ticket a call reserved its place under in the
// workflow (Options.WaitInWorkflow) to the activity interceptor, which
// reserves under it again and so finds the place instead of taking another.
const ticketHeader = "tollgate-ticket"

// waitVersion gates Options.WaitInWorkflow with workflow.GetVersion, so
// histories recorded without it replay without it.
const waitVersion = "tollgate.wait-in-workflow"

// paceVersion gates scheduling a waiting call's activity ahead of its
// place's maturity, so histories that slept past it replay as they ran.
const paceVersion = "tollgate.pace-ahead"

// defaultPlaceTTL is how long a place waits for its activity to start once
// it matures, when the activity has no ScheduleToStart timeout: long enough
// for a task queue's usual backlog, short enough that the place of a
// workflow terminated or timed out meanwhile is soon given back. A place
// that lapses is refunded; its activity, starting later, is charged afresh.
const defaultPlaceTTL = time.Minute

// placeInput is what the workflow asks the store, through a local activity.
type placeInput struct {
	Key      quota.Key
	Ticket   string
	Cost     quota.Cost
	Priority quota.Priority
	Prompt   int64 `json:",omitempty"`
	// TTL is how long the place waits for its activity once mature.
	TTL time.Duration `json:",omitempty"`
}

// placeResult is the store's answer.
type placeResult struct {
	Outcome quota.Outcome
	Wait    time.Duration
	Reason  quota.Reason
	// Member is, for a call on a pool, the member the place was taken
	// on (pool.Admit); zero otherwise.
	Member quota.Key `json:",omitempty"`
}

// reservePlace is the local activity behind Options.WaitInWorkflow: it
// takes a place (quota.Reservation.Place), which holds no concurrency
// lease; the activity takes the lease when it starts.
func (w *WorkerInterceptor) reservePlace(ctx context.Context, in placeInput) (placeResult, error) {
	start := time.Now()
	r := quota.Reservation{Key: in.Key, Ticket: in.Ticket, Cost: in.Cost, Priority: in.Priority, Prompt: in.Prompt,
		Place: true, LeaseTTL: in.TTL}
	var (
		d      quota.Decision
		member quota.Key
		err    error
	)
	if members, ok := w.opts.Pools.Members(in.Key); ok {
		var adm pool.Admission
		adm, err = pool.Admit(ctx, w.opts.Store, members, r, int(w.poolTurn.Add(1)%uint64(len(members))))
		d, member, in.Key = adm.Decision, adm.Member, adm.Member
	} else {
		d, err = w.opts.Store.Reserve(ctx, r)
	}
	w.ins.store(ctx, "reserve", start)
	if err != nil {
		return placeResult{}, err
	}
	if d.Outcome == quota.Queued && d.Reason == quota.Capacity {
		w.counters.waitedInWorkflow.Add(1)
		w.ins.admission(ctx, in.Key, d)
	}
	return placeResult{Outcome: d.Outcome, Wait: d.Wait, Reason: d.Reason, Member: member}, nil
}

// cancelPlace gives back a place the workflow no longer waits for.
func (w *WorkerInterceptor) cancelPlace(ctx context.Context, in placeInput) error {
	return w.opts.Store.Cancel(ctx, in.Key, in.Ticket)
}

// isGoverned reports whether an activity's first argument carries its own
// charge.
func isGoverned(first any) bool {
	_, ok := first.(quota.Governed)
	return ok
}

// governsType reports whether Options.Activities charges activityType.
func (w *WorkerInterceptor) governsType(activityType string) bool {
	return w.opts.Activities[activityType] != nil
}

// charge returns what a governed call costs: its input's QuotaCharge, else
// the ChargeFunc of its type. The workflow and the activity interceptors
// both work it out from the same arguments.
func (w *WorkerInterceptor) charge(activityType string, args []any) (quota.Charge, error) {
	var ch quota.Charge
	var err error
	if g, ok := first(args).(quota.Governed); ok {
		ch, err = g.QuotaCharge()
	} else {
		ch, err = w.opts.Activities[activityType](args)
	}
	if err != nil {
		return quota.Charge{}, err
	}
	return w.priced(ch), nil
}

// first is args' first argument, nil when there is none.
func first(args []any) any {
	if len(args) == 0 {
		return nil
	}
	return args[0]
}

// reserve takes the call's place in line and, while it must wait for
// capacity (and the wait fits the activity's deadline), sleeps on a durable
// timer until the place matures. It returns the place's ticket to hand the
// activity, whose interceptor then claims the place, taking the concurrency
// lease, and handles any other outcome (a full concurrency limit, a
// refusal, a wait past the deadline) as without WaitInWorkflow; "" when the
// store could not be asked. The place waits for its activity the
// activity's ScheduleToStart timeout once mature (defaultPlaceTTL without
// one), then lapses and is refunded, so a workflow terminated or timed out
// meanwhile holds nothing for long. For a call on a pool, member is the
// member the place was taken on (quota.Key.String), "" otherwise. An error
// is the workflow's cancellation, after the place was given back.
func (o *workflowOutbound) reserve(ctx workflow.Context, charge quota.Charge, ao workflow.ActivityOptions) (ticket, member string, err error) {
	info := workflow.GetInfo(ctx)
	o.calls++
	in := placeInput{
		Key:      charge.Key,
		Ticket:   quota.TicketFor(info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, "place", strconv.Itoa(o.calls)),
		Cost:     charge.Cost,
		Priority: charge.Priority,
		Prompt:   charge.Prompt,
		TTL:      defaultPlaceTTL,
	}
	if ao.ScheduleToStartTimeout > 0 {
		in.TTL = ao.ScheduleToStartTimeout
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res placeResult
	if err := workflow.ExecuteLocalActivity(lctx, o.root.reservePlace, in).Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return "", "", err
		}
		return "", "", nil // the activity will meet the store's trouble itself
	}
	if res.Member != (quota.Key{}) {
		in.Key = res.Member // the place is the member's, and so its cancel
		member = res.Member.String()
	}
	pastDeadline := ao.ScheduleToCloseTimeout > 0 && res.Wait > ao.ScheduleToCloseTimeout
	if res.Outcome == quota.Queued && res.Reason == quota.Capacity && !pastDeadline {
		// The activity is scheduled ahead of the place's maturity, and
		// waits the rest out to the moment (see governed): a timer and a
		// dispatch start a call later, and unevenly. Version 1 scheduled
		// it PaceWithin/2 ahead, 2 as a retry is (Options.comeBack).
		wait := res.Wait + o.root.opts.RetryMargin
		switch workflow.GetVersion(ctx, paceVersion, workflow.DefaultVersion, 2) {
		case 1:
			wait = max(res.Wait-o.root.opts.PaceWithin/2, 0)
		case 2:
			wait = max(res.Wait-o.root.opts.comeBack(), 0)
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			dctx, _ := workflow.NewDisconnectedContext(lctx)
			_ = workflow.ExecuteLocalActivity(dctx, o.root.cancelPlace, in).Get(dctx, nil)
			return "", "", err
		}
	}
	return in.Ticket, member, nil
}

// execute schedules the activity, handing it the ticket of the place it
// reserved ("" for none) and, for a pool, the member it took it on.
func (o *workflowOutbound) execute(ctx workflow.Context, ticket, member string, activityType string, args []any) workflow.Future {
	header := interceptor.WorkflowHeader(ctx)
	if ticket == "" || header == nil {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	payload, err := converter.GetDefaultDataConverter().ToPayload(ticket)
	if err != nil {
		return o.Next.ExecuteActivity(ctx, activityType, args...)
	}
	// The SDK gives every ExecuteActivity call a header of its own, and
	// sends it as it stands when the command goes out: it stays set.
	header[ticketHeader] = payload
	if member != "" {
		if p, err := converter.GetDefaultDataConverter().ToPayload(member); err == nil {
			header[memberHeader] = p
		}
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// waits reports whether this call takes its place in line in the workflow:
// WaitInWorkflow is on (for a workflow that started with it on) and the
// call is not a step of a fallback chain.
func (o *workflowOutbound) waits(ctx workflow.Context) bool {
	if !o.root.opts.WaitInWorkflow {
		return false
	}
	if _, ok := fallback.StepFrom(ctx); ok {
		return false
	}
	return workflow.GetVersion(ctx, waitVersion, workflow.DefaultVersion, 1) == 1
}
