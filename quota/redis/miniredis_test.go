package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// The script runs on miniredis as it does on Redis: a machine without
// redis-server runs every Redis test on miniredis, whose Lua (gopher-lua)
// differs from Redis's in small ways a script can trip over (string.match
// returns no value on a miss; a, b = b, a on locals assigns one value to
// both). Run here whatever the machine has, so a script edit that only
// Redis's Lua accepts fails on every machine, not just on fresh ones.
func TestConformanceOnMiniredis(t *testing.T) {
	quotatest.Run(t, factory(func(t *testing.T) goredis.UniversalClient { return redistest.StartMini(t).Client() }))
}
