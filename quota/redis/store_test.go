package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

func TestConformance(t *testing.T) {
	quotatest.Run(t, factory(func(t *testing.T) goredis.UniversalClient { return redistest.Start(t) }))
}
