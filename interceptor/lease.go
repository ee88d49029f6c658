package interceptor

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate/tollgate/quota"
)

// minRenewEvery bounds how often a grant is renewed, however short its TTL.
const minRenewEvery = 100 * time.Millisecond

// leaseTTL is how long a call's grant, and its concurrency lease, lives
// between renewals: the activity's heartbeat timeout when it has one (the
// server gives up on a silent attempt after it, and the lease should lapse
// about then too), else its StartToClose timeout, the longest an attempt
// runs; 0 (the policy's LeaseTTL) when it has neither. The store caps it at
// the policy's LeaseTTL.
func leaseTTL(info activity.Info) time.Duration {
	if info.HeartbeatTimeout > 0 {
		return info.HeartbeatTimeout
	}
	return max(info.StartToCloseTimeout, 0)
}

// keep renews the call's grant while the call runs, so that a call longer
// than the grant's TTL keeps its concurrency slot and its Settle finds its
// grant. It renews every third of the time the grant has left (left, then
// what each renewal says), so a renewal that fails is tried twice more
// before the grant lapses. It gives up, letting the grant lapse a TTL
// later, once the attempt is past its deadline or, for an activity with a
// heartbeat timeout, once the activity has not heartbeated within it: the
// server has given up on the attempt then, and its slot should go back.
//
// Renewals follow the wall clock, not Options.Clock: a grant lapses on the
// store's clock in real time. The returned stop ends them and waits until
// none is in flight; it may be called more than once.
func (a *activityInbound) keep(ctx context.Context, c *call, left time.Duration) (stop func()) {
	if left <= 0 {
		return func() {}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		lapse := time.Now().Add(left)
		for {
			timer := time.NewTimer(max(time.Until(lapse)/3, minRenewEvery))
			select {
			case <-rctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			now := time.Now()
			if !c.info.Deadline.IsZero() && now.After(c.info.Deadline) {
				return
			}
			if hb := c.info.HeartbeatTimeout; hb > 0 && now.Sub(c.att.lastBeat()) > hb {
				return
			}
			l, err := a.renew(rctx, c)
			switch {
			case err == nil:
				lapse = now.Add(l)
			case rctx.Err() != nil:
				return
			case errors.Is(err, quota.ErrUnknownTicket):
				a.root.opts.Logger.Warn("tollgate: the call's grant lapsed while it ran; its concurrency slot may be another call's",
					"key", c.r.Key.String(), "activity_type", c.info.ActivityType.Name)
				return
			default:
				a.root.opts.Logger.Warn("tollgate: renewing the call's grant failed; trying again", "key", c.r.Key.String(), "error", err)
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})
}

// renew renews the call's grant for the TTL it was reserved with.
func (a *activityInbound) renew(ctx context.Context, c *call) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, defaultStoreCallDeadline)
	defer cancel()
	start := time.Now()
	left, err := a.root.opts.Store.Renew(sctx, c.r.Key, c.r.Ticket, c.r.LeaseTTL)
	a.root.ins.store(ctx, "renew", start)
	return left, err
}
