package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// The Store's clock, its conversions of the scripts' numbers, and its
// errors.

// fmtFloat writes f without an exponent, which gopher-lua (miniredis) cannot parse.
func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// epochName returns a name for the epochs of key state a Store begins:
// random, so that every store's differ (see lua.go).
func epochName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (s *Store) lookup(k quota.Key) (*keyState, error) {
	bucket, _, ok := s.ps.Lookup(k)
	if !ok {
		return nil, storekit.NoPolicyError(k)
	}
	return s.keys[bucket], nil
}

// now returns the script's "now" argument ("" for Redis TIME) and the local
// clock the daily midnights are computed around.
func (s *Store) now() (string, time.Time) {
	if s.clock == nil {
		return "", time.Now()
	}
	t := s.clock.Now()
	return strconv.FormatInt(t.UnixMicro(), 10), t
}

// timeFrom returns a converter from the script's unix µs to time.Time, given
// the script's now. With a test clock, times are offsets from the clock's
// reading, so they keep its location and sub-microsecond part.
func (s *Store) timeFrom(nowUS float64, local time.Time) func(float64) time.Time {
	if s.clock == nil {
		return func(us float64) time.Time { return time.UnixMicro(int64(math.Round(us))) }
	}
	return func(us float64) time.Time { return local.Add(durationOf(us - nowUS)) }
}

// fail wraps a failed script run: errors reaching Redis, and replies saying
// Redis cannot serve now, match quota.ErrUnavailable; a caller's cancelled
// context and script errors do not. A script error names the file and
// line of lua/ it comes from.
func (s *Store) fail(op string, k quota.Key, script *luaScript, err error) error {
	if errors.Is(err, context.Canceled) || !unavailable(err) {
		var rerr goredis.Error
		if errors.As(err, &rerr) {
			if msg := script.where(err.Error()); msg != err.Error() {
				return fmt.Errorf("redis: %s %s: %s", op, k, msg)
			}
		}
		return fmt.Errorf("redis: %s %s: %w", op, k, err)
	}
	return fmt.Errorf("redis: %s %s: %w: %w", op, k, quota.ErrUnavailable, err)
}

// unavailable reports whether err means the server could not serve the call
// (as opposed to rejecting it): network errors, timeouts, and replies from a
// server that is loading, read-only, failing over or busy.
func unavailable(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return true // dial, read and write errors, timeouts, a closed client
	}
	msg := rerr.Error()
	for _, p := range [...]string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// durationOf converts script µs to a Duration, rounded to the nanosecond.
func durationOf(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }
