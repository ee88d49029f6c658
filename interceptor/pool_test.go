package interceptor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// poolSetup is a pool of two members of one model's calls: east, which
// allows two calls a minute (as does its provider), and west, which never
// binds. Each member serves its own model, so a call's answer says which
// member ran it.
func poolSetup(t *testing.T) (pool.Set, map[quota.Key]quota.Policy, llmsim.Config) {
	t.Helper()
	east := quota.Key{Provider: "openai", Account: "east", Model: "gpt-east"}
	west := quota.Key{Provider: "openai", Account: "west", Model: "gpt-west"}
	policies := map[quota.Key]quota.Policy{
		east: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 2).WithBurst(time.Minute)}},
		west: generous(),
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	pools, err := pool.New(ps, map[quota.Key][]quota.Key{openaiKey("gpt-pool"): {east, west}})
	require.NoError(t, err)
	models := simModels("gpt-west")
	models = append(models, llmsim.Model{Provider: llmsim.OpenAI, Name: "gpt-east", RequestsPerMinute: 2})
	return pools, policies, llmsim.Config{Models: models}
}

// Calls on a pool run on the members with room: none waits or meets a 429
// while another member has room, and no member runs more than its limit.
func TestPoolAdmitsWhereThereIsRoom(t *testing.T) {
	for _, inWorkflow := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait_in_workflow=%v", inWorkflow), func(t *testing.T) {
			pools, policies, cfg := poolSetup(t)
			e := newEnv(t, cfg)
			ic, _ := e.startWorker(interceptor.Options{Store: memoryStore(t, policies), Pools: pools, WaitInWorkflow: inWorkflow})
			const n = 8
			runs := make([]client.WorkflowRun, n)
			for i := range runs {
				runs[i] = e.start(fmt.Sprintf("pool-%v-%d", inWorkflow, i), agent("gpt-pool"))
			}
			served := map[string]int{}
			for _, run := range runs {
				out, err := e.result(run)
				require.NoError(t, err)
				served[out.Turns[0].Model]++
			}
			t.Logf("served: %v", served)
			require.Equal(t, n, served["gpt-east"]+served["gpt-west"], "every call ran on a member: %v", served)
			require.LessOrEqual(t, served["gpt-east"], 2, "east ran more than its two calls a minute")
			require.Zero(t, e.sim.Stats("gpt-east").TooManyRequests)
			st := ic.Stats()
			require.Zero(t, st.ProviderRateLimited)
			require.Zero(t, st.Queued, "a call waited while west had room")
			require.EqualValues(t, n, st.Admitted)
		})
	}
}

// A pool member whose account reaches its spend cap is closed, and the
// calls move to the other member, each run with its own account's key: no
// call fails or falls back.
func TestPoolMemberSpendCappedMovesCallsToTheOthers(t *testing.T) {
	east := quota.Key{Provider: "openai", Account: "east", Model: "gpt-4o"}
	west := quota.Key{Provider: "openai", Account: "west", Model: "gpt-4o"}
	policies := map[quota.Key]quota.Policy{east: generous(), west: generous()}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	pools, err := pool.New(ps, map[quota.Key][]quota.Key{openaiKey("gpt-pool"): {east, west}})
	require.NoError(t, err)
	e := newEnv(t, llmsim.Config{
		Models: simModels("gpt-4o"),
		Accounts: []llmsim.Account{
			{Name: "main", APIKey: apiKey},
			{Name: "east", APIKey: "sk-east", SpendCapTokens: 40},
			{Name: "west", APIKey: "sk-west"},
		},
	})
	store := memoryStore(t, policies)
	ic, _, _ := e.startWorkerWith(interceptor.Options{Store: store, Pools: pools, Fallbacks: map[string][]string{"openai/gpt-pool": {"openai/gpt-4o"}}},
		workerSetup{accounts: []activities.AccountConfig{
			{Provider: "openai", Account: "east", Config: activities.ProviderConfig{APIKey: "sk-east", BaseURL: e.simURL + "/v1/"}},
			{Provider: "openai", Account: "west", Config: activities.ProviderConfig{APIKey: "sk-west", BaseURL: e.simURL + "/v1/"}},
		}})
	const n = 12
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		runs[i] = e.start(fmt.Sprintf("pool-capped-%d", i), agent("gpt-pool"))
	}
	for _, run := range runs {
		out, err := e.result(run)
		require.NoError(t, err)
		require.Equal(t, "gpt-4o", out.Turns[0].Model)
		require.Empty(t, childWorkflowTypes(e.history(run.GetID())), "%s fell back", run.GetID())
	}
	t.Logf("spent: east %d, west %d", e.sim.Spent("east"), e.sim.Spent("west"))
	require.Zero(t, e.sim.Spent("main"), "no call ran on the provider's default key")
	require.Positive(t, e.sim.Spent("east"))
	require.Positive(t, e.sim.Spent("west"))
	st := ic.Stats()
	require.Positive(t, st.SpendCapped, "east reached its cap")
	require.Zero(t, st.Fallbacks)
	snap, err := store.Snapshot(context.Background(), east)
	require.NoError(t, err)
	require.Equal(t, quota.PauseSpendCap, snap.PauseReason, "east is closed until its reset")
}
