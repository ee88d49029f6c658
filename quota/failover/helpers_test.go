package failover_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func goredisClient(t *testing.T, opts *goredis.Options) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
