package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/released"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// releasesOn returns a store of the previous release and one of the
// current release on one server, on one clock moved by hand.
func releasesOn(t *testing.T, srv *redistest.Server, ps quota.Policies) (old, cur quota.Store, clock *quotatest.Clock) {
	t.Helper()
	clock = quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	o, err := released.New(srv.Client(), ps, released.Options{Clock: clock})
	require.NoError(t, err)
	c, err := redis.New(srv.Client(), ps, redis.Options{Clock: clock})
	require.NoError(t, err)
	return o, c, clock
}

// TestUpgradeOldPlaceholdersHoldNewGrants: after a loss that a worker of
// the previous release recovers, its placeholders carry no lost epoch, so
// a call the current release granted before the loss cannot prove its
// grant and is unknown to Renew; its slot stays held by the placeholder
// until the lease TTL, so no call joins over the limit. A call the
// previous release granted takes its slot over as before.
func TestUpgradeOldPlaceholdersHoldNewGrants(t *testing.T) {
	const leaseTTL = time.Minute
	srv := redistest.StartServer(t)
	ps := policies(t, quota.Policy{Limits: []quota.Limit{quota.Concurrent(2)}, LeaseTTL: leaseTTL})
	old, cur, clock := releasesOn(t, srv, ps)
	ctx := context.Background()
	reserve := func(s quota.Store, ticket string) quota.Decision {
		t.Helper()
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: oneRequest})
		require.NoError(t, err)
		return d
	}
	require.Equal(t, quota.Granted, reserve(old, "a").Outcome)
	require.Equal(t, quota.Granted, reserve(cur, "n").Outcome)

	losses[0].lose(t, srv)

	d := reserve(old, "c")
	require.Equal(t, quota.ConcurrencyFull, d.Reason, "the previous release recovered: placeholders hold both slots: %+v", d)
	require.NoError(t, old.Cancel(ctx, gpt4o, "c"))
	_, err := cur.Renew(ctx, gpt4o, "n", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "the placeholder names no lost epoch n could prove")
	_, err = old.Renew(ctx, gpt4o, "a", 0)
	require.NoError(t, err, "a takes its slot over")
	for _, s := range []quota.Store{old, cur} {
		require.Equal(t, quota.ConcurrencyFull, reserve(s, "d").Reason, "a and n's placeholder hold both slots")
		require.NoError(t, s.Cancel(ctx, gpt4o, "d"))
	}

	clock.Advance(leaseTTL / 2)
	_, err = old.Renew(ctx, gpt4o, "a", 0)
	require.NoError(t, err)
	clock.Advance(leaseTTL/2 + time.Second)
	require.Equal(t, quota.Granted, reserve(cur, "e").Outcome, "n's placeholder lapsed with its lease TTL")
	require.Equal(t, quota.ConcurrencyFull, reserve(old, "f").Reason, "a and e hold both slots")
	require.NoError(t, old.Cancel(ctx, gpt4o, "f"))
	require.NoError(t, old.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: oneRequest, Charged: oneRequest}))
	require.Equal(t, quota.Granted, reserve(old, "f").Outcome, "a gave its slot back")
}

// TestUpgradeAccountNamedDefault: the previous release kept an account
// named "default" under the keys of the provider's default account
// (Account ""); the current release keeps it under keys of its own. So in
// a mixed fleet a call on account "default" is charged to that account's
// new budget, which starts fresh, by a current worker, and to the default
// account's budget by a previous one.
func TestUpgradeAccountNamedDefault(t *testing.T) {
	named := gpt4o
	named.Account = "default"
	one := quota.Policy{Limits: []quota.Limit{quota.Concurrent(1)}}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{gpt4o: one, named: one})
	require.NoError(t, err)
	srv := redistest.StartServer(t)
	old, cur, _ := releasesOn(t, srv, ps)
	ctx := context.Background()
	reserve := func(s quota.Store, k quota.Key, ticket string) quota.Decision {
		t.Helper()
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: oneRequest})
		require.NoError(t, err)
		return d
	}
	require.Equal(t, quota.Granted, reserve(old, named, "o1").Outcome)
	require.Equal(t, quota.ConcurrencyFull, reserve(cur, gpt4o, "n0").Reason,
		"the previous release's call on account default holds the default account's slot")
	require.Equal(t, quota.Granted, reserve(cur, named, "n1").Outcome, "account default's own budget starts fresh")
	require.Equal(t, quota.ConcurrencyFull, reserve(old, named, "o2").Reason, "the previous release still shares one budget")
}

// TestUpgradeOldReleaseCannotReadPricedMembers pins the limit the
// README's upgrade section states: the previous release's script cannot
// parse the queue member of a priced call on a money budget (the spend
// follows the output tokens) and fails that key's calls with a script
// error, so every worker must run this release before a money budget is
// added. The state a money budget adds (its window) it reads: a key whose
// line holds no priced member works for both.
func TestUpgradeOldReleaseCannotReadPricedMembers(t *testing.T) {
	srv := redistest.StartProcess(t, "Redis's own Lua error messages")
	rate := quota.Per(quota.Requests, 1, time.Second).WithBurst(time.Second)
	// The old worker's policies know no money (its release had none).
	old, _, clock := releasesOn(t, srv, policies(t, quota.Policy{Limits: []quota.Limit{rate}}))
	cur, err := redis.New(srv.Client(), policies(t, quota.Policy{Limits: []quota.Limit{rate, quota.MonthlySpend(quota.Dollars(1), nil)}}),
		redis.Options{Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	reserve := func(s quota.Store, ticket string, c quota.Cost) (quota.Decision, error) {
		return s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: c})
	}

	d, err := reserve(cur, "unpriced", oneRequest)
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome, "%+v", d)
	clock.Advance(time.Second)
	d, err = reserve(old, "old-1", oneRequest)
	require.NoError(t, err, "the money budget's window alone is read by the previous release")
	require.Equal(t, quota.Granted, d.Outcome, "%+v", d)

	clock.Advance(time.Second)
	d, err = reserve(cur, "priced-1", priced(1234))
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome, "%+v", d)
	d, err = reserve(cur, "priced-2", priced(1234))
	require.NoError(t, err)
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
	_, err = reserve(old, "old-2", oneRequest)
	require.ErrorContains(t, err, "user_script", "a priced member in line fails the previous release's script")
}
