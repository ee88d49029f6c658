package redis_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestClusterConformance runs the conformance suite on a real three-master
// Redis Cluster through go-redis's cluster client: every script run must
// touch keys of one slot, or Redis refuses it with CROSSSLOT.
func TestClusterConformance(t *testing.T) {
	rdb := redistest.StartCluster(t).Client()
	quotatest.Run(t, factory(func(*testing.T) goredis.UniversalClient { return rdb }))
}

// TestClusterKeysShareASlot: every Redis key of one account (state,
// leases, queue, tickets, and its tenants' budgets) hashes to one slot on
// one master, while different accounts spread over the cluster.
func TestClusterKeysShareASlot(t *testing.T) {
	rdb := redistest.StartCluster(t).Client()
	ctx := context.Background()
	models := []string{"gpt-4o", "gpt-4o-mini", "o3", "o4-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-5", "gpt-5-mini"}
	policies := map[quota.Key]quota.Policy{}
	for _, m := range models {
		policies[quota.Key{Provider: "openai", Model: m}] = quota.Policy{Limits: []quota.Limit{
			quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute), quota.PerDay(quota.Tokens, 1000, nil), quota.Concurrent(2)}}
		policies[quota.Key{Provider: "openai", Model: m, Tenant: "vip"}] = quota.Policy{Limits: []quota.Limit{
			quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute), quota.Concurrent(2)}}
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	s, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	for _, m := range models {
		k := quota.Key{Provider: "openai", Model: m}
		vip := k
		vip.Tenant = "vip"
		for _, r := range []struct {
			key    quota.Key
			ticket string
		}{{k, "wf/run/1"}, {vip, "wf/run/2"}, {k, "wf/run/3"}} { // granted, granted, queued
			_, err := s.Reserve(ctx, quota.Reservation{Key: r.key, Ticket: r.ticket, Cost: quota.Cost{Requests: 1, Tokens: 10}})
			require.NoError(t, err)
		}
	}

	var mu sync.Mutex
	masterOf := map[string]string{} // Redis key → master address
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		keys, err := m.Keys(ctx, "*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			masterOf[k] = m.Options().Addr
		}
		return err
	}))
	masters := map[string]bool{}
	for _, m := range models {
		tag := "tollgate:{openai/default/" + m + "}"
		var slots []int64
		var mine []string
		for k := range masterOf {
			if strings.HasPrefix(k, tag) {
				mine = append(mine, k)
				slot, err := rdb.ClusterKeySlot(ctx, k).Result()
				require.NoError(t, err)
				slots = append(slots, slot)
				require.Equal(t, masterOf[tag], masterOf[k], "%s lives with its state hash", k)
			}
		}
		require.Len(t, mine, 8, "%s: state, leases, the queue, three tickets, the tenant's state and leases: %v", m, mine)
		for _, slot := range slots {
			require.Equal(t, slots[0], slot, "%s: one slot for all its keys", m)
		}
		masters[masterOf[tag]] = true
	}
	require.Greater(t, len(masters), 1, "quota keys spread over the masters")
}

// TestClusterPoolMembersOnDifferentMasters: a pool's members keep their
// budgets in their own slots, on different masters, and pool.Admit admits
// across them, each member's Reserve one script run on its own slot.
func TestClusterPoolMembersOnDifferentMasters(t *testing.T) {
	rdb := redistest.StartCluster(t).Client()
	ctx := context.Background()
	accounts := []string{"east", "west", "north", "south", "central"}
	policies := map[quota.Key]quota.Policy{}
	members := make([]quota.Key, len(accounts))
	for i, a := range accounts {
		members[i] = quota.Key{Provider: "openai", Account: a, Model: "gpt-4o"}
		policies[members[i]] = quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1).WithBurst(time.Minute)}}
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	_, err = pool.New(ps, map[quota.Key][]quota.Key{{Provider: "openai", Model: "gpt-4o"}: members})
	require.NoError(t, err)
	s, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	for i := range members {
		a, err := pool.Admit(ctx, s, members, quota.Reservation{Key: members[0], Ticket: "wf/run/" + accounts[i], Cost: quota.Cost{Requests: 1}}, 0)
		require.NoError(t, err)
		require.Equal(t, quota.Granted, a.Decision.Outcome, "call %d", i)
		require.Equal(t, i, a.Index, "call %d runs on the first member with room", i)
	}
	a, err := pool.Admit(ctx, s, members, quota.Reservation{Key: members[0], Ticket: "wf/run/late", Cost: quota.Cost{Requests: 1}}, 0)
	require.NoError(t, err)
	require.Equal(t, quota.Queued, a.Decision.Outcome, "every member is full")

	var mu sync.Mutex
	masters := map[string]bool{}
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		keys, err := m.Keys(ctx, "tollgate:{openai/*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			for _, mk := range members {
				if k == "tollgate:{"+mk.Provider+"/"+mk.Account+"/"+mk.Model+"}" {
					masters[m.Options().Addr] = true
				}
			}
		}
		return err
	}))
	require.GreaterOrEqual(t, len(masters), 2, "the members' budgets live on more than one master")
}
