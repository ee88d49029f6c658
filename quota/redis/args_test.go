package redis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestDecidedInReadsTheEpochsPassed: decidedIn finds, in the ARGV args
// builds, the epochs a call passed for each budget (here an account and a
// tenant's own budget, each with a daily limit, whose midnights come
// before them), and prefers the one a reply names.
func TestDecidedInReadsTheEpochsPassed(t *testing.T) {
	account := quota.Key{Provider: "openai", Model: "gpt-4o"}
	tenant := account
	tenant.Tenant = "vip"
	daily := []quota.Limit{quota.PerMinute(quota.Requests, 60), quota.PerDay(quota.Requests, 1000, time.UTC)}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{account: {Limits: daily}, tenant: {Limits: daily}})
	require.NoError(t, err)
	s, err := New(redistest.Start(t), ps, Options{})
	require.NoError(t, err)
	ks, err := s.lookup(tenant)
	require.NoError(t, err)
	require.Len(t, ks.views, 2)
	ks.views[0].epoch.Store("root-epoch")
	ks.views[1].epoch.Store("own-epoch")
	args := ks.args("", tenant.Tenant, "1", time.Now(), 0)

	require.Equal(t, [2]any{"root-epoch", "own-epoch"}, ks.decidedIn(args, []any{int64(0), int64(0)}))
	require.Equal(t, [2]any{"root-epoch", "new-own"}, ks.decidedIn(args, []any{int64(0), "new-own"}))
}
