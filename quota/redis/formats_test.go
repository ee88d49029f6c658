package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

const (
	gpt4oTag    = "tollgate:{openai/default/gpt-4o}"
	gpt4oQueue  = gpt4oTag + ":queue"
	gpt4oLine   = gpt4oTag + ":line"
	gpt4oTicket = gpt4oTag + ":t:"
)

func formatsStore(t *testing.T) (*redis.Store, goredis.UniversalClient, *quotatest.Clock) {
	t.Helper()
	rdb := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{
		quota.Per(quota.Requests, 10, 10*time.Second).WithBurst(10 * time.Second), quota.Concurrent(2),
	}, LeaseTTL: time.Second}), redis.Options{Clock: clock})
	require.NoError(t, err)
	return s, rdb, clock
}

func unreadable(t *testing.T, s *redis.Store) int64 {
	t.Helper()
	snap, err := s.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	return snap.Unreadable
}

// TestUnreadableRecordIsDropped: a ticket record of a form the script cannot
// read (a release it does not know wrote it) is neither an error nor a
// grant: the call under it is a new one, and the record is counted.
func TestUnreadableRecordIsDropped(t *testing.T) {
	s, rdb, _ := formatsStore(t)
	ctx := context.Background()
	for i, raw := range []string{"g 1 2 3", "x 1 2 3 4 5 6 7 8 . - -", "g 1 99999999999999999 0 one 0 0 0 0 . - -"} {
		ticket := "t" + string(rune('a'+i))
		require.NoError(t, rdb.Set(ctx, gpt4oTicket+ticket, raw, time.Hour).Err())
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err, "record %q", raw)
		require.Equal(t, quota.Granted, d.Outcome, "record %q", raw)
		require.Equal(t, quota.Cost{Requests: 1}, d.Charged)
		require.EqualValues(t, i+1, unreadable(t, s))
		require.NoError(t, s.Cancel(ctx, gpt4o, ticket))
	}
}

// TestUnreadableQueueMemberIsDropped: a queue or line member of a form the
// script cannot read is dropped when it lapses, refunding nothing (it says
// nothing it could refund), counted, and never fails a call.
func TestUnreadableQueueMemberIsDropped(t *testing.T) {
	s, rdb, clock := formatsStore(t)
	ctx := context.Background()
	d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "a", Cost: quota.Cost{Requests: 10}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome)
	expiry := float64(clock.Now().UnixMicro())
	for _, m := range []string{"1 0 0 0 b", "#1 x 0 0 0 5 . c", "#2 1 0 0 0 5 .", "garbage"} {
		require.NoError(t, rdb.ZAdd(ctx, gpt4oQueue, goredis.Z{Score: expiry, Member: m}).Err())
		require.NoError(t, rdb.ZAdd(ctx, gpt4oLine, goredis.Z{Score: 0, Member: m}).Err())
	}
	clock.Advance(time.Second) // 1 request refilled; the members lapsed
	d, err = s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "d", Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome, "no member read counts ahead of d: %+v", d)
	require.EqualValues(t, 4, unreadable(t, s))
	for _, key := range []string{gpt4oQueue, gpt4oLine} {
		n, err := rdb.ZCard(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "every member dropped from %s", key)
	}
}

// TestAccountNamedDefault: an account named "default" is not the provider's
// default account (Account ""): the two keep two budgets, as in memory.
func TestAccountNamedDefault(t *testing.T) {
	named := gpt4o
	named.Account = "default"
	one := quota.Policy{Limits: []quota.Limit{quota.Concurrent(1)}}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{gpt4o: one, named: one})
	require.NoError(t, err)
	s, err := redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range []quota.Key{gpt4o, named} {
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t-" + k.Account, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome, "%s has a slot of its own: %+v", k, d)
	}
}

// TestFinishTagsStayBounded: the line keeps each tenant's latest tag while
// it is busy, and drops the ones behind its virtual time, so an account that
// stays saturated while tenant after tenant comes and goes keeps a bounded
// hash, not one field per tenant it ever served.
func TestFinishTagsStayBounded(t *testing.T) {
	rdb := redistest.Start(t)
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{
		quota.Per(quota.Requests, 1, time.Second).WithBurst(time.Second)}, MaxWait: time.Hour}), redis.Options{Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	reserve := func(tenant string) quota.Decision {
		t.Helper()
		k := gpt4o
		k.Tenant = tenant
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t-" + tenant, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		return d
	}
	require.Equal(t, quota.Granted, reserve("first").Outcome)
	const tenants = 300
	require.Equal(t, quota.Queued, reserve("t0").Outcome)
	for i := 1; i < tenants; i++ {
		require.Equal(t, quota.Queued, reserve(fmt.Sprintf("t%d", i)).Outcome, "the line stays busy")
		clock.Advance(time.Second)
		require.Equal(t, quota.Granted, reserve(fmt.Sprintf("t%d", i-1)).Outcome)
	}
	n, err := rdb.HLen(ctx, gpt4oTag+":finish").Result()
	require.NoError(t, err)
	require.Positive(t, n, "the line is busy: it keeps tags")
	require.LessOrEqual(t, n, int64(2*64), "tags of %d tenants served", tenants)
}
