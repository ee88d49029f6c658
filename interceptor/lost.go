package interceptor

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
)

// countLost counts an earlier attempt of the call that was lost against
// the transient budget: its activity was heartbeating (the budget names it
// as running) and then nothing more came, because its worker died or
// stopped, or its stream hung with the worker, and the server timed it out
// after the activity's HeartbeatTimeout. Nobody else could count it: the
// attempt never returned to its interceptor. It is called once an attempt
// is granted (a refused attempt keeps the mark for the next), and returns
// the non-retryable TransientBudgetExhausted error once the budget is
// spent, after giving back the grant.
func (a *activityInbound) countLost(ctx context.Context, c *call) error {
	lost := c.att.budget.Running
	if lost == 0 || lost >= c.info.Attempt {
		return nil
	}
	c.att.budget.Running = 0
	o := &a.root.opts
	a.root.counters.lost.Add(1)
	a.root.counters.transient.Add(1)
	a.root.ins.count(ctx, a.root.ins.provider, c.r.Key, "lost")
	n := c.att.spend(&c.att.budget.Transient)
	o.Logger.Warn("tollgate: an earlier attempt was lost (no heartbeat within the activity's HeartbeatTimeout); counted as a transient failure",
		"key", c.r.Key.String(), "lost_attempt", lost, "attempt", c.info.Attempt, "transient", n, "budget", o.TransientBudget)
	if n <= o.TransientBudget {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultStoreCallDeadline)
	defer cancel()
	if err := o.Store.Cancel(sctx, c.r.Key, c.r.Ticket); err != nil {
		o.Logger.Warn("tollgate: cancel failed", "key", c.r.Key.String(), "error", err)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("tollgate: %s: %d transient failures, past the budget of %d: attempt %d was lost (no heartbeat within the activity's HeartbeatTimeout)",
			c.r.Key, n, o.TransientBudget, lost),
		tollgate.TransientBudgetExhausted, nil)
}
