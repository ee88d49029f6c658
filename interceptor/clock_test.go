package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// A provider's Retry-After pauses the key for that long on the store's
// clock (Redis TIME), whatever the worker's clock says: a worker behind
// Redis does not lose the pause, and one ahead does not lengthen it.
func TestPauseUsesTheStoresClock(t *testing.T) {
	const retryAfter = 2 * time.Second
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"worker 3s behind", -3 * time.Second},
		{"worker 30s ahead", 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := openaiKey("gpt-u")
			ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: generous()})
			require.NoError(t, err)
			store, err := redis.New(redistest.Start(t), ps, redis.Options{}) // Redis TIME
			require.NoError(t, err)
			u := newUnit(t, nil, interceptor.Options{Store: store})
			u.clock.Set(time.Now().Add(tc.skew))
			require.NoError(t, u.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "gpt-u", Times: 1, RetryAfter: retryAfter}))

			_, err = u.complete(request("gpt-u"))
			require.Equal(t, tollgate.RateLimited, appError(t, err).Type())
			snap, err := store.Snapshot(context.Background(), key)
			require.NoError(t, err)
			require.False(t, snap.PausedUntil.IsZero(), "the key is paused")
			require.InDelta(t, float64(retryAfter), float64(snap.PausedUntil.Sub(snap.At)), float64(500*time.Millisecond),
				"paused for %s on Redis's clock, asked %s", snap.PausedUntil.Sub(snap.At), retryAfter)
		})
	}
}
