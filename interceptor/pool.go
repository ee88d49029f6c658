package interceptor

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
)

// memberHeader carries, beside ticketHeader, the pool member a call's
// workflow took its place on (Options.WaitInWorkflow), so that the activity
// asks that member first and finds the place.
const memberHeader = "tollgate-member"

// pooled is what a call on a pool's key carries: the pool and its members.
type pooled struct {
	// key is the pool's key as the call named it (with its tenant).
	key     quota.Key
	members []quota.Key
	// index is the member the call holds a place or grant on, or the one
	// to ask first.
	index int
}

// joinPool makes c a pool call when its key names a pool (Options.Pools):
// the member to ask first is the one an earlier attempt (or its workflow)
// held a place on, else the next in turn, so that calls spread over members
// with room. A pool call's input must be tollgate.Retargetable, since it
// runs on the member admitted.
func (a *activityInbound) joinPool(ctx context.Context, c *call) error {
	members, ok := a.root.opts.Pools.Members(c.r.Key)
	if !ok {
		return nil
	}
	if _, ok := c.input.(tollgate.Retargetable); !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tollgate: %s is a pool, whose calls run on the member admitted: the input must implement tollgate.Retargetable; %T does not", c.r.Key, c.input),
			tollgate.InvalidRequest, nil)
	}
	p := &pooled{key: c.r.Key, members: members, index: -1}
	held := c.att.budget.Member
	if held == "" {
		if h := interceptor.Header(ctx)[memberHeader]; h != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(h, &held)
		}
	}
	if held != "" {
		for i, m := range members {
			if m.String() == held {
				p.index = i
				break
			}
		}
	}
	if p.index < 0 {
		p.index = int(a.root.poolTurn.Add(1) % uint64(len(members)))
	}
	c.pool = p
	return nil
}

// reserve asks the store for the call: its key's Reserve, or for a pool
// call the member that can run it soonest (pool.Admit), whose key it
// is charged under from then on.
func (a *activityInbound) reserve(ctx context.Context, c *call) (quota.Decision, error) {
	start := time.Now()
	defer a.root.ins.store(ctx, "reserve", start)
	if c.pool == nil {
		return a.root.opts.Store.Reserve(ctx, c.r)
	}
	adm, err := pool.Admit(ctx, a.root.opts.Store, c.pool.members, c.r, c.pool.index)
	if err != nil {
		return quota.Decision{}, err
	}
	c.pool.index = adm.Index
	c.r.Key = adm.Member
	c.att.setMember(adm.Member.String())
	return adm.Decision, nil
}

// onMember sends a granted pool call's input to the member admitted: its
// account and model, and so its key and endpoint.
func (a *activityInbound) onMember(ctx context.Context, in *interceptor.ExecuteActivityInput, c *call) error {
	if c.pool == nil {
		return nil
	}
	m := c.r.Key
	moved, err := c.input.(tollgate.Retargetable).Retarget(tollgate.Target{Provider: m.Provider, Account: m.Account, Model: m.Model})
	if err != nil {
		return temporal.NewNonRetryableApplicationError("tollgate: pool "+c.pool.key.String()+" member "+m.String()+": "+err.Error(), tollgate.InvalidRequest, err)
	}
	in.Args[0] = moved
	c.input = moved
	a.root.ins.served(ctx, c.pool.key, m)
	return nil
}

// named returns the key a call's escalations and fallbacks speak of: its
// pool's, for a pool call, else its own.
func (c *call) named() quota.Key {
	if c.pool != nil {
		return c.pool.key
	}
	return c.r.Key
}

// moveOn ends the attempt of a pool call whose member turned it away (a
// rate limit, a spend cap) with a retry due at once: the member is paused
// or closed, so the next attempt is admitted on another, or waits for the
// member whose pause ends soonest when every one is.
func (a *activityInbound) moveOn(ctx context.Context, c *call, why string) error {
	c.att.save(ctx, a.out)
	a.root.ins.retry(ctx, c.r.Key, "provider", minNextRetryDelay)
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("tollgate: pool %s member %s %s; moving to another member", c.pool.key, c.r.Key, why),
		tollgate.QuotaRefused, temporal.ApplicationErrorOptions{NextRetryDelay: minNextRetryDelay, Category: temporal.ApplicationErrorCategoryBenign})
}
