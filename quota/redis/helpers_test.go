package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

func goredisClient(t *testing.T, opts *goredis.Options) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// factory returns the conformance suite's Factory for Stores on the client
// connect gives each subtest (a Redis of its own, or a shared cluster).
func factory(connect func(t *testing.T) goredis.UniversalClient) quotatest.Factory {
	return func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
		s, err := redis.New(connect(t), ps, redis.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// storesOn returns n Stores of ps on srv, each with a client of its own, as
// n worker processes sharing one Redis would have.
func storesOn(t *testing.T, srv *redistest.Server, ps quota.Policies, n int) []*redis.Store {
	t.Helper()
	stores := make([]*redis.Store, n)
	for i := range stores {
		s, err := redis.New(srv.Client(), ps, redis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	return stores
}

// passHook is a go-redis hook that passes dials and pipelines through:
// embedded by the tests' hooks, which each act on single commands.
type passHook struct{}

func (passHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (passHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
