package interceptor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// A workflow id as long as Temporal allows (1000 characters) is governed
// like any other, with and without WaitInWorkflow: a call's ticket is a
// fixed-length digest of its identity, not the identity itself.
func TestVeryLongWorkflowIDIsGoverned(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait bool
	}{{"activity", false}, {"wait in workflow", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, llmsim.Config{Models: simModels("gpt-long")})
			key := openaiKey("gpt-long")
			ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerDay(quota.Requests, 1000, nil)}}})
			require.NoError(t, err)
			store, err := redis.New(redistest.Start(t), ps, redis.Options{})
			require.NoError(t, err)
			ic, _ := e.startWorker(interceptor.Options{Store: store, WaitInWorkflow: tc.wait})

			id := "long-" + strings.Repeat("x", 1000-len("long-"))
			_, err = e.result(e.start(id, agent("gpt-long")))
			require.NoError(t, err)
			require.EqualValues(t, 1, ic.Stats().Admitted)
			require.EqualValues(t, 1, e.sim.Stats("gpt-long").Accepted)
			snap, err := store.Snapshot(context.Background(), key)
			require.NoError(t, err)
			require.InDelta(t, 999, snap.Axes[0].Available, 1e-9, "the call was charged")
		})
	}
}
