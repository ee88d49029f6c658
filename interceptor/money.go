package interceptor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
)

// priced returns ch with its estimate priced by Options.Prices, for the
// money budgets (quota.SpendPerDay, SpendPerMonth) it is charged against: a
// call on a pool's key at its dearest member's price, as any member may
// run it. A charge that names its own Spend keeps it; a call the table does
// not price is charged none.
func (w *WorkerInterceptor) priced(ch quota.Charge) quota.Charge {
	if ch.Cost.Spend > 0 || w.opts.Prices.Len() == 0 {
		return ch
	}
	keys := []quota.Key{ch.Key}
	if members, ok := w.opts.Pools.Members(ch.Key); ok {
		keys = members
	}
	var most quota.Money
	for _, k := range keys {
		if p, ok := w.opts.Prices.Lookup(k.Provider, k.Model); ok {
			most = max(most, p.Estimate(ch.Cost))
		}
	}
	ch.Cost.Spend = int64(most)
	return ch
}

// spend is what a call on k that used actual cost: the price of what the
// provider billed when the result says (price.Billed), else of actual's
// tokens as uncached input and output. A usage that names its own Spend
// keeps it.
func (w *WorkerInterceptor) spend(k quota.Key, actual quota.Cost, billed any) int64 {
	if actual.Spend > 0 {
		return actual.Spend
	}
	p, ok := w.opts.Prices.Lookup(k.Provider, k.Model)
	if !ok {
		return 0
	}
	if b, ok := billed.(price.Billed); ok {
		return int64(p.Spend(b.QuotaBilled()))
	}
	in := actual.InputTokens
	if in == 0 {
		in = max(actual.Tokens-actual.OutputTokens, 0)
	}
	return int64(p.Spend(price.Usage{InputTokens: in, OutputTokens: actual.OutputTokens}))
}

// spent ends a call a money budget refused: an escalation to the call's
// fallback chain when Options.FallbackWhenSpent names the budget (and the
// call has a backup), else a non-retryable tollgate.BudgetExhausted naming
// the budget, its axis and its reset.
func (a *activityInbound) spent(ctx context.Context, c *call, d quota.Decision, now time.Time) error {
	budget := d.Budget
	if budget == (quota.Key{}) {
		budget = c.r.Key
	}
	resetAt := now.Add(d.Wait).UTC()
	a.root.counters.budgetSpent.Add(1)
	a.root.ins.count(ctx, a.root.ins.budgetsSpent, c.r.Key, d.Axis.String())
	if slices.Contains(a.root.opts.FallbackWhenSpent, budget) {
		if err := a.escalate(ctx, c, "budget_spent", 0); err != nil {
			return err
		}
	}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("tollgate: %s: budget %s (%s) is spent until %s: raise it, wait for its reset, or let its calls fall back (spend_fallback in the policies file, interceptor.Options.FallbackWhenSpent)",
			c.r.Key, budget, d.Axis, resetAt.Format(time.RFC3339)),
		tollgate.BudgetExhausted, temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Details:      []any{tollgate.BudgetDetails{Budget: budget.String(), Axis: d.Axis.String(), ResetAt: resetAt}},
		})
}
