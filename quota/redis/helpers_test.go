package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

func goredisClient(t *testing.T, opts *goredis.Options) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
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
