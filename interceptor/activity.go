package interceptor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/internal/fallback"
	"github.com/tollgate/tollgate/quota"
)

// fallbackHeader carries a fallback.Step from the workflow
// interceptor to the activity interceptor.
const fallbackHeader = "tollgate-fallback"

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root *WorkerInterceptor
	// out is the SDK's outbound interceptor, below our heartbeat filter.
	out interceptor.ActivityOutboundInterceptor
}

func (a *activityInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	a.out = outbound
	o := &activityOutbound{}
	o.Next = outbound
	return a.Next.Init(o)
}

// call is one governed attempt.
type call struct {
	r quota.Reservation
	// charged is what the store holds charged for the call: the estimate
	// after calibration, settled as is when the call reports no usage.
	charged quota.Cost
	info    activity.Info
	att     attempt
	rec     classify.Recorder
	step    *fallback.Step
	input   any
	// stopRenewing ends the renewals of the call's grant (see keep).
	stopRenewing func()
	// pool is set for a call on a pool's key (see joinPool); r.Key is
	// then the member it is admitted on, once it is.
	pool *pooled
}

// target names the call's provider, account and model, as escalations do.
func (c *call) target() string {
	k := c.named()
	return tollgate.Target{Provider: k.Provider, Account: k.Account, Model: k.Model}.String()
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	arg := first(in.Args)
	if !isGoverned(arg) && (len(a.root.opts.Activities) == 0 || !a.root.governsType(activity.GetInfo(ctx).ActivityType.Name)) {
		return a.Next.ExecuteActivity(ctx, in)
	}
	c := &call{input: arg}
	if err := a.applyFallbackStep(ctx, in, c); err != nil {
		return nil, err
	}
	c.info = activity.GetInfo(ctx)
	charge, err := a.root.charge(c.info.ActivityType.Name, in.Args)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("tollgate: cannot charge this call: "+err.Error(), tollgate.InvalidRequest, err)
	}
	c.r = quota.Reservation{
		Key:      charge.Key,
		Ticket:   a.ticket(ctx, c.info),
		Cost:     charge.Cost,
		Priority: charge.Priority,
		Prompt:   charge.Prompt,
		LeaseTTL: leaseTTL(c.info),
	}
	c.att.load(ctx, a.out)
	c.att.number = c.info.Attempt
	ctx = context.WithValue(ctx, attemptKey{}, &c.att)
	if err := a.joinPool(ctx, c); err != nil {
		return nil, err
	}
	return a.governed(ctx, in, c)
}

// ticket is the call's ticket: the place its workflow reserved for it
// (Options.WaitInWorkflow), else a digest of the activity's identity, the
// same for every attempt and of fixed length however long its ids.
func (a *activityInbound) ticket(ctx context.Context, info activity.Info) string {
	if p := interceptor.Header(ctx)[ticketHeader]; p != nil {
		var t string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &t); err == nil && t != "" {
			return t
		}
	}
	return quota.TicketFor(info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)
}

// applyFallbackStep sends the input to the step's target when the call is a
// step of a fallback chain.
func (a *activityInbound) applyFallbackStep(ctx context.Context, in *interceptor.ExecuteActivityInput, c *call) error {
	p := interceptor.Header(ctx)[fallbackHeader]
	if p == nil {
		return nil
	}
	var step fallback.Step
	if err := converter.GetDefaultDataConverter().FromPayload(p, &step); err != nil {
		return temporal.NewNonRetryableApplicationError("tollgate: unreadable fallback step header: "+err.Error(), tollgate.InvalidRequest, err)
	}
	r, ok := c.input.(tollgate.Retargetable)
	if !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tollgate: fallback to %s needs an input that implements tollgate.Retargetable; %T does not", step.Target, c.input),
			tollgate.InvalidRequest, nil)
	}
	t, err := tollgate.ParseTarget(step.Target)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), tollgate.InvalidRequest, err)
	}
	moved, err := r.Retarget(t)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("tollgate: fallback to "+step.Target+": "+err.Error(), tollgate.InvalidRequest, err)
	}
	in.Args[0] = moved
	c.input = moved
	c.step = &step
	return nil
}

func (a *activityInbound) governed(ctx context.Context, in *interceptor.ExecuteActivityInput, c *call) (any, error) {
	o := &a.root.opts
	var d quota.Decision
	for visit := 0; ; visit++ {
		var err error
		d, err = a.reserve(ctx, c)
		if err != nil {
			return a.reserveFailed(ctx, in, c, err)
		}
		a.root.ins.admission(ctx, c.r.Key, d)
		// A place in line that matures within PaceWithin is waited for
		// here, to the moment, rather than by a retry whose dispatch
		// would start the call late (see pace). No margin is added: the
		// grant's start gate spaces the call from the one before it, and
		// a margin would only leave the provider's window idle.
		if d.Outcome != quota.Queued || d.Reason != quota.Capacity || d.Wait > o.PaceWithin || visit >= maxPacedVisits {
			break
		}
		if err := sleep(ctx, d.Wait); err != nil { // to the moment (see sleep)
			return nil, err
		}
	}
	if d.Outcome != quota.Granted {
		return nil, a.wait(ctx, c, d)
	}
	if d.Start > 0 {
		if err := a.pace(ctx, c, d); err != nil {
			return nil, err
		}
	}
	a.root.counters.admitted.Add(1)
	c.charged = d.Charged
	if c.charged == (quota.Cost{}) { // a store that does not report it
		c.charged = c.r.Cost
	}
	if err := a.countLost(ctx, c); err != nil {
		return nil, err
	}
	if err := a.onMember(ctx, in, c); err != nil {
		a.giveBack(ctx, c, d)
		return nil, err
	}

	c.stopRenewing = a.keep(ctx, c, d.GrantLeft)
	res, callErr := a.run(ctx, in, c)
	c.stopRenewing()
	c.att.ran()
	now := o.Clock.Now()
	v := a.verdict(callErr, now)
	a.settle(ctx, c, res, callErr, v, now)
	if callErr == nil {
		return res, nil
	}
	return nil, a.conclude(ctx, c, callErr, v, now)
}

// run runs the granted call. Should the activity panic, the call is
// settled at its estimate (releasing its lease) before the panic goes on to
// the SDK, which fails the attempt as it would without Tollgate.
func (a *activityInbound) run(ctx context.Context, in *interceptor.ExecuteActivityInput, c *call) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.stopRenewing()
			a.settle(ctx, c, nil, errPanicked, classify.Verdict{Class: classify.Unknown}, a.root.opts.Clock.Now())
			c.att.ran()
			c.att.saveIfHeartbeated(ctx, a.out)
			panic(p)
		}
	}()
	return a.Next.ExecuteActivity(classify.NewContext(ctx, &c.rec), in)
}

// errPanicked stands for the outcome of an activity that panicked.
var errPanicked = errors.New("tollgate: the activity panicked")

func (a *activityInbound) reserveFailed(ctx context.Context, in *interceptor.ExecuteActivityInput, c *call, err error) (any, error) {
	switch {
	case errors.Is(err, quota.ErrNoPolicy):
		a.root.counters.ungoverned.Add(1)
		a.root.ins.ungoverned(ctx, c.r.Key)
		if _, seen := a.root.ungoverned.LoadOrStore(c.r.Key, true); !seen {
			a.root.opts.Logger.Warn("tollgate: no policy for this key; its calls run ungoverned (logged once per key)",
				"key", c.r.Key.String(), "activity_type", c.info.ActivityType.Name)
		}
		res, err := a.Next.ExecuteActivity(ctx, in)
		c.att.ran()
		if err != nil {
			c.att.saveIfHeartbeated(ctx, a.out)
		}
		return res, err
	case errors.Is(err, quota.ErrOversize):
		return nil, temporal.NewNonRetryableApplicationError("tollgate: "+err.Error(), tollgate.CostExceedsCapacity, err)
	case errors.Is(err, quota.ErrInvalid):
		return nil, temporal.NewNonRetryableApplicationError("tollgate: "+err.Error(), tollgate.InvalidRequest, err)
	}
	return nil, a.unavailable(ctx, c, a.root.opts.StoreRetry, err)
}

// unavailable ends an attempt the store could not decide (it could not be
// reached, or its failure policy refused while it cannot be): a retryable
// tollgate.StoreUnavailable after wait. cause is nil for a policy's refusal.
func (a *activityInbound) unavailable(ctx context.Context, c *call, wait time.Duration, cause error) error {
	msg := "tollgate: quota store unavailable"
	if cause != nil {
		msg += ": " + cause.Error()
		a.root.opts.Logger.Warn("tollgate: quota store unreachable; retrying the call later", "key", c.r.Key.String(), "error", cause)
	} else {
		msg += " (refused by the store's failure policy while it cannot be reached)"
		a.root.opts.Logger.Warn("tollgate: quota store unreachable and its failure policy refuses; retrying the call later", "key", c.r.Key.String())
	}
	c.att.saveIfSpent(ctx, a.out)
	return temporal.NewApplicationErrorWithOptions(msg, tollgate.StoreUnavailable,
		temporal.ApplicationErrorOptions{NextRetryDelay: max(wait, minNextRetryDelay), Cause: cause})
}

// wait ends an attempt the store did not grant: a scheduled retry when the
// wait fits the activity's deadline, an escalation or a clear failure when
// it does not.
func (a *activityInbound) wait(ctx context.Context, c *call, d quota.Decision) error {
	o := &a.root.opts
	now := o.Clock.Now()
	if d.Reason == quota.Unavailable {
		return a.unavailable(ctx, c, d.Wait, nil)
	}
	if d.Reason == quota.BudgetSpent {
		a.giveBack(ctx, c, d)
		return a.spent(ctx, c, d, now)
	}
	if d.Reason == quota.Paused && d.PauseReason.Closes() {
		// The key is closed until a spend cap or daily quota resets:
		// waiting is pointless, and so is asking the provider.
		a.giveBack(ctx, c, d)
		return a.closed(ctx, c, d.PauseReason, now.Add(d.Wait), nil)
	}
	if deadline, ok := scheduleToCloseDeadline(c.info); ok && now.Add(d.Wait).After(deadline) {
		a.giveBack(ctx, c, d)
		what := fmt.Sprintf("%s waits %s for %s (%s)", c.r.Key, d.Wait.Round(time.Millisecond), axisName(d.Axis), d.Reason)
		if err := a.escalate(ctx, c, "deadline", d.Wait); err != nil {
			return err
		}
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tollgate: %s, past the activity's ScheduleToClose deadline in %s: raise ScheduleToCloseTimeout, the limit, or configure a fallback",
				what, deadline.Sub(now).Round(time.Millisecond)),
			tollgate.QuotaWaitExceedsDeadline, nil)
	}
	if d.Outcome == quota.Queued {
		a.root.counters.queued.Add(1)
	} else {
		a.root.counters.refused.Add(1)
	}
	a.root.ins.retry(ctx, c.r.Key, "quota", d.Wait)
	c.att.saveIfSpent(ctx, a.out)
	msg := fmt.Sprintf("tollgate: %s %s for %s on %s", c.r.Key, d.Outcome, d.Wait.Round(time.Millisecond), d.Reason)
	if d.Axis != 0 {
		msg += " (" + d.Axis.String() + ")"
	}
	// A place in line is due back early (Options.comeBack) and waited
	// out to the moment in process (see governed).
	retry := d.Wait + o.RetryMargin
	if d.Outcome == quota.Queued && d.Reason == quota.Capacity {
		retry = d.Wait - o.comeBack()
	}
	return temporal.NewApplicationErrorWithOptions(msg, tollgate.QuotaRefused, temporal.ApplicationErrorOptions{
		NextRetryDelay: max(retry, minNextRetryDelay),
		Category:       temporal.ApplicationErrorCategoryBenign,
	})
}

// pace waits for a granted call's start: in the activity when it is due
// within PaceWithin, else by ending the attempt with a retry due early
// (Options.comeBack), the grant kept for the next attempt.
func (a *activityInbound) pace(ctx context.Context, c *call, d quota.Decision) error {
	o := &a.root.opts
	if d.Start > o.PaceWithin {
		a.root.counters.queued.Add(1)
		a.root.ins.retry(ctx, c.r.Key, "quota", d.Start)
		c.att.saveIfSpent(ctx, a.out)
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("tollgate: %s granted, starting in %s (paced by its limits' burst)", c.r.Key, d.Start.Round(time.Millisecond)),
			tollgate.QuotaRefused, temporal.ApplicationErrorOptions{
				NextRetryDelay: max(d.Start-o.comeBack(), minNextRetryDelay),
				Category:       temporal.ApplicationErrorCategoryBenign,
			})
	}
	return sleep(ctx, d.Start)
}

// maxPacedVisits bounds how often one attempt asks the store again after
// waiting in process for its place: a place's maturity moves later when
// other tenants' calls are placed ahead of it, and when a start gate
// starts a call ahead of it later than the buckets would (the line waits
// behind the starts, see quota's burst.go).
const maxPacedVisits = 4

func scheduleToCloseDeadline(info activity.Info) (time.Time, bool) {
	if info.ScheduleToCloseTimeout <= 0 || info.ScheduledTime.IsZero() {
		return time.Time{}, false
	}
	return info.ScheduledTime.Add(info.ScheduleToCloseTimeout), true
}

// settle charges the call's actual usage and feeds the provider's reported
// limits back to the store in the same step, on success and failure alike.
func (a *activityInbound) settle(ctx context.Context, c *call, res any, callErr error, v classify.Verdict, now time.Time) {
	o := &a.root.opts
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultStoreCallDeadline)
	defer cancel()

	actual, counted, prompt := c.charged, false, c.r.Prompt
	var partial quota.Metered
	switch {
	case callErr == nil:
		if m, ok := res.(quota.Metered); ok {
			actual, counted = m.QuotaUsage(), true
		}
		if pe, ok := res.(quota.CountedPrompt); ok && prompt > 0 {
			if p := pe.QuotaPrompt(); p > 0 {
				prompt = p
			}
		}
	case errors.As(callErr, &partial):
		// The call failed part-way (a stream that broke off) and says
		// what it had used by then: partly estimates, so nothing to
		// calibrate from.
		actual = partial.QuotaUsage()
		if promptEstimated(callErr) {
			// The provider counted the prompt when it accepted the
			// call; the charge, calibrated, is the better count of it
			// than an estimate made without the ratio.
			actual.Tokens = max(actual.Tokens, c.charged.Tokens)
			actual.InputTokens = max(actual.InputTokens, c.charged.InputTokens)
		}
	case turnedAway(v):
		// The provider turned the call away before doing the work: it
		// used a request, no tokens.
		actual = quota.Cost{Requests: c.r.Cost.Requests}
	}
	switch {
	case counted:
		actual.Spend = a.root.spend(c.r.Key, actual, res)
	case partial != nil:
		actual.Spend = a.root.spend(c.r.Key, actual, partial)
	}
	a.root.counters.spend.Add(actual.Spend)
	a.root.ins.settled(ctx, c.r.Key, actual.Spend)
	obs := v.Limits
	if _, h, ok := c.rec.Last(); ok {
		obs = classify.Limits(h, now)
	}
	start := time.Now()
	err := o.Store.Settle(sctx, quota.Settlement{Key: c.r.Key, Ticket: c.r.Ticket, Actual: actual, Observed: obs,
		Counted: counted, Prompt: prompt, Charged: c.charged})
	switch {
	case errors.Is(err, quota.ErrUnknownTicket):
		// The store charged what the call used beyond its estimate all
		// the same; the lapse itself is worth a line.
		o.Logger.Warn("tollgate: the call's grant had lapsed when it settled; charged what it used beyond its estimate",
			"key", c.r.Key.String(), "activity_type", c.info.ActivityType.Name)
	case err != nil:
		o.Logger.Warn("tollgate: settle failed", "key", c.r.Key.String(), "error", err)
	}
	a.root.ins.store(ctx, "settle", start)
}

// conclude turns a failed call's verdict into the error Temporal acts on.
func (a *activityInbound) conclude(ctx context.Context, c *call, callErr error, v classify.Verdict, now time.Time) error {
	o := &a.root.opts
	a.root.ins.count(ctx, a.root.ins.provider, c.r.Key, v.Class.String())
	switch v.Class {
	case classify.RateLimited, classify.Overloaded:
		a.root.counters.rateLimited.Add(1)
		wait := o.RateLimitWait
		if v.HasRetryAfter {
			wait = v.RetryAfter // capped by the Classifier's MaxRetryAfter
		}
		a.pause(ctx, c.r.Key, wait, pauseReason(v.Class))
		if c.att.spend(&c.att.budget.RateLimited) > o.EscalateAfter {
			if err := a.escalate(ctx, c, "rate_limited", wait); err != nil {
				return err
			}
		}
		if c.pool != nil {
			return a.moveOn(ctx, c, v.Class.String()+" for "+wait.Round(time.Millisecond).String())
		}
		a.root.ins.retry(ctx, c.r.Key, "provider", wait)
		c.att.save(ctx, a.out)
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("tollgate: %s %s (%d of %d before escalating); retrying in %s", c.r.Key, v.Class, c.att.budget.RateLimited, o.EscalateAfter+1, wait.Round(time.Millisecond)),
			tollgate.RateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: max(wait, minNextRetryDelay), Cause: callErr})

	case classify.SpendCap, classify.DailyQuota:
		a.root.counters.spendCapped.Add(1)
		a.root.ins.count(ctx, a.root.ins.spendCaps, c.r.Key, v.Class.String())
		// The provider names its reset as a time; the store is told how
		// long until then, which only this worker's clock can say.
		until := v.ResetAt
		if until.IsZero() || !until.After(now) {
			until = now.Add(o.SpendCapPause)
		}
		reason := pauseReason(v.Class)
		closed := a.pause(ctx, c.r.Key, until.Sub(now), reason)
		o.Logger.Warn("tollgate: key closed until its reset", "key", closed.String(), "class", v.Class.String(), "code", v.Code, "until", until.UTC().Format(time.RFC3339))
		if c.pool != nil {
			return a.moveOn(ctx, c, "closed ("+v.Class.String()+") until "+until.UTC().Format(time.RFC3339))
		}
		return a.closed(ctx, c, reason, until, callErr)

	case classify.Transient, classify.BadRequest, classify.NotFound, classify.Auth, classify.ContextTooLong:
		if !v.Retryable { // a 4xx, or a 5xx the provider said not to retry
			break
		}
		a.root.counters.transient.Add(1)
		if c.att.spend(&c.att.budget.Transient) > o.TransientBudget {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("tollgate: %s: %d transient failures, past the budget of %d: %s", c.r.Key, c.att.budget.Transient, o.TransientBudget, v.Reason),
				tollgate.TransientBudgetExhausted, callErr)
		}
		wait := a.backoff(c.att.budget.Transient)
		if v.HasRetryAfter {
			wait = v.RetryAfter
		}
		c.att.save(ctx, a.out)
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("tollgate: %s: transient failure %d of %d: %s", c.r.Key, c.att.budget.Transient, o.TransientBudget, v.Reason),
			tollgate.Transient, temporal.ApplicationErrorOptions{NextRetryDelay: max(wait, minNextRetryDelay), Cause: callErr})

	case classify.Canceled, classify.Unknown:
		c.att.saveIfHeartbeated(ctx, a.out)
		return callErr
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("tollgate: %s rejected the call: %s (%s): %s", c.r.Key, v.Class, v.Code, v.Reason),
		tollgate.ProviderRejected, callErr)
}

// escalate returns a RateLimitEscalation when the call can move to a backup
// (it is a fallback step, or its target has a chain), nil otherwise.
func (a *activityInbound) escalate(ctx context.Context, c *call, reason string, wait time.Duration) error {
	if _, ok := c.input.(tollgate.Retargetable); !ok {
		return nil
	}
	d := tollgate.EscalationDetails{From: c.target(), Reason: reason, RateLimited: c.att.budget.RateLimited}
	if reason == "deadline" {
		d.Wait = wait
	}
	next := "the next model of its fallback chain"
	if c.step == nil {
		d.Backups = a.root.opts.backups(c.named())
		if len(d.Backups) == 0 {
			return nil
		}
		next = d.Backups[0]
	}
	a.root.counters.escalations.Add(1)
	a.root.ins.count(ctx, a.root.ins.escalations, c.r.Key, reason)
	var msg string
	switch reason {
	case "rate_limited":
		msg = fmt.Sprintf("tollgate: %s rate limited %d times; escalating to %s", d.From, d.RateLimited, next)
	case "deadline":
		msg = fmt.Sprintf("tollgate: %s would wait %s, past the activity's deadline; escalating to %s", d.From, wait.Round(time.Millisecond), next)
	case "budget_spent":
		msg = fmt.Sprintf("tollgate: %s: its money budget is spent; escalating to %s", d.From, next)
	default:
		msg = fmt.Sprintf("tollgate: %s is closed (%s); escalating to %s", d.From, reason, next)
	}
	return temporal.NewApplicationErrorWithOptions(msg, tollgate.RateLimitEscalation,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{d}})
}

// pause pauses, for d on the store's clock, the budget a provider's signal
// about a call on k stops: a provider limits and caps accounts, not the
// tenants a product splits them into, so a tenant's call pauses its
// account's budget, and with it every tenant nested there. When the account
// has no policy (the store answers quota.ErrNoPolicy), k's own budget is
// paused instead: a tenant's budget standing alone, or nothing. It returns
// the key paused.
func (a *activityInbound) pause(ctx context.Context, k quota.Key, d time.Duration, reason quota.PauseReason) quota.Key {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultStoreCallDeadline)
	defer cancel()
	paused := k.WithoutTenant()
	err := a.root.opts.Store.Pause(sctx, paused, d, reason)
	if errors.Is(err, quota.ErrNoPolicy) && k.Tenant != "" {
		paused = k
		err = a.root.opts.Store.Pause(sctx, paused, d, reason)
	}
	if err != nil && !errors.Is(err, quota.ErrNoPolicy) {
		a.root.opts.Logger.Warn("tollgate: pause failed", "key", paused.String(), "error", err)
	}
	return paused
}

// giveBack cancels the place a queued call holds in line; a refusal
// reserved nothing, so it costs no round trip.
func (a *activityInbound) giveBack(ctx context.Context, c *call, d quota.Decision) {
	if d.Outcome != quota.Queued {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultStoreCallDeadline)
	defer cancel()
	if err := a.root.opts.Store.Cancel(sctx, c.r.Key, c.r.Ticket); err != nil {
		a.root.opts.Logger.Warn("tollgate: cancel failed", "key", c.r.Key.String(), "error", err)
	}
}

// backoff is full jitter: a random wait in [0, min(cap, base·2ⁿ⁻¹)).
func (a *activityInbound) backoff(n int) time.Duration {
	o := &a.root.opts
	ceiling := o.BackoffCap
	if n-1 < 32 {
		ceiling = min(o.BackoffCap, o.BackoffBase<<(n-1))
	}
	if ceiling <= 0 {
		return minNextRetryDelay
	}
	return rand.N(ceiling)
}

// saveIfSpent records the budget when the call has spent any of it, so the
// next attempt still sees it.
func (a *attempt) saveIfSpent(ctx context.Context, out interceptor.ActivityOutboundInterceptor) {
	if a.budget.RateLimited > 0 || a.budget.Transient > 0 || a.budget.Member != "" {
		a.save(ctx, out)
	}
}

// turnedAway reports whether the provider refused the call before doing the
// work: it used a request but no tokens.
func turnedAway(v classify.Verdict) bool {
	return v.Class.Throttled() || v.Class.Terminal() || (v.Status >= 400 && v.Status < 500)
}

// pauseReason is the reason a provider's answer of class c pauses its key
// for: a rate limit teaches the key's margin, an overload does not, and a
// spend cap or daily quota closes it until its reset.
func pauseReason(c classify.Class) quota.PauseReason {
	switch c {
	case classify.RateLimited:
		return quota.PauseRateLimited
	case classify.SpendCap:
		return quota.PauseSpendCap
	case classify.DailyQuota:
		return quota.PauseDailyQuota
	}
	return quota.PauseOverloaded
}

// closed ends a call on a key closed until a spend cap or daily quota
// resets: an escalation when the call has a backup, else a non-retryable
// SpendCapReached or DailyQuotaExhausted.
func (a *activityInbound) closed(ctx context.Context, c *call, reason quota.PauseReason, until time.Time, cause error) error {
	if err := a.escalate(ctx, c, string(reason), 0); err != nil {
		return err
	}
	errType := tollgate.SpendCapReached
	if reason == quota.PauseDailyQuota {
		errType = tollgate.DailyQuotaExhausted
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("tollgate: %s is closed (%s) until %s", c.r.Key, reason, until.UTC().Format(time.RFC3339)),
		errType, cause)
}

// verdict classifies what the activity returned. An application error the
// activity made itself stands as it is (Unknown) unless it wraps a provider
// answer or transport failure Tollgate can read: its text alone ("rate
// limited …") is not a provider's answer.
func (a *activityInbound) verdict(callErr error, now time.Time) classify.Verdict {
	c := a.root.opts.Classifier
	var appErr *temporal.ApplicationError
	if errors.As(callErr, &appErr) {
		cause := appErr.Unwrap()
		if cause == nil {
			return classify.Verdict{Class: classify.Unknown}
		}
		return c.Error(cause, now)
	}
	return c.Error(callErr, now)
}

// promptEstimated reports whether err says, by a QuotaPromptEstimated
// method (activities.StreamError's), that the usage it meters estimates
// the prompt instead of counting it.
func promptEstimated(err error) bool {
	var e interface{ QuotaPromptEstimated() bool }
	return errors.As(err, &e) && e.QuotaPromptEstimated()
}
