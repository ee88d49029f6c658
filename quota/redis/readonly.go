package redis

import (
	"context"
	"strings"
)

// readOnly runs script, which only reads, as EVALSHA_RO, so that a replica
// may serve it and nothing it does is taken for a write. A server that
// cannot run it so (Redis before 7.0 has no EVALSHA_RO; miniredis counts
// TIME, the script's clock, as a write) runs it as EVALSHA from then on:
// the script writes nothing either way.
func (s *Store) readOnly(ctx context.Context, script *luaScript, keys []string, args []any) ([]any, error) {
	if !s.writable.Load() {
		res, err := script.RunRO(ctx, s.rdb, keys, args...).Slice()
		if err == nil || !refusesReadOnly(err) {
			return res, err
		}
		s.writable.Store(true)
	}
	return script.Run(ctx, s.rdb, keys, args...).Slice()
}

// refusesReadOnly reports whether err is a server's refusal to run a
// script read-only, rather than the script's own failure.
func refusesReadOnly(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "not allowed in read-only scripts") ||
		strings.Contains(m, "unknown command") && strings.Contains(m, "evalsha_ro")
}
