package redis_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

func TestConformance(t *testing.T) {
	quotatest.Run(t, func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
		s, err := redis.New(redistest.Start(t), ps, redis.Options{Clock: clock})
		require.NoError(t, err)
		return s
	})
}
