package interceptor_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/failover"
	"github.com/tollgate/tollgate/quota/redis"
)

// With the closed failure policy (STORE_FAILURE=closed), an unreachable
// Redis ends the attempt with the documented tollgate.StoreUnavailable,
// retryable after the policy's wait, not with a quota refusal.
func TestClosedStoreOutageIsStoreUnavailable(t *testing.T) {
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-u"): generous()})
	require.NoError(t, err)
	dead := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	primary, err := redis.New(dead, ps, redis.Options{})
	require.NoError(t, err)
	store, err := failover.New(primary, ps, failover.Options{Mode: failover.Closed})
	require.NoError(t, err)

	u := newUnit(t, nil, interceptor.Options{Store: store})
	for range 2 { // the outage found, then the breaker open
		_, err = u.complete(request("gpt-u"))
		appErr := appError(t, err)
		require.Equal(t, tollgate.StoreUnavailable, appErr.Type(), "got %v", err)
		require.False(t, appErr.NonRetryable())
		require.Equal(t, failover.DefaultRetry, appErr.NextRetryDelay())
	}
	require.Zero(t, u.sim.Stats("").Received)
	require.Zero(t, u.ic.Stats().Refused, "an outage is not a refusal")
}
