package main

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// closureEvery is how often the demo looks for keys that closed.
const closureEvery = 250 * time.Millisecond

// closures records the closings of the demo's keys (a spend cap or a daily
// quota) as the run sees them, the first of each key and reason. A key
// closed by its daily quota reopens at midnight in its zone, so a run that
// crosses that midnight ends with the key open again: the verdict reads
// what the run saw, not only how the key stands at the end. Safe for
// concurrent use.
type closures struct {
	store quota.Store
	keys  []quota.Key
	mu    sync.Mutex
	seen  map[closedKey]quota.Snapshot
}

// closedKey names one key's closing for one reason.
type closedKey struct {
	key    quota.Key
	reason quota.PauseReason
}

func newClosures(s quota.Store, keys []quota.Key) *closures {
	return &closures{store: s, keys: keys, seen: make(map[closedKey]quota.Snapshot)}
}

// observe reads every key once and records those it finds closed for a
// reason not seen before. A key that cannot be read is left for the next
// look.
func (c *closures) observe(ctx context.Context) {
	for _, k := range c.keys {
		snap, err := c.store.Snapshot(ctx, k)
		if err != nil || !snap.PausedUntil.After(snap.At) || !snap.PauseReason.Closes() {
			continue
		}
		c.mu.Lock()
		if _, ok := c.seen[closedKey{k, snap.PauseReason}]; !ok {
			c.seen[closedKey{k, snap.PauseReason}] = snap
		}
		c.mu.Unlock()
	}
}

// watch observes every closureEvery until ctx is done.
func (c *closures) watch(ctx context.Context) {
	tick := time.NewTicker(closureEvery)
	defer tick.Stop()
	for {
		c.observe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dailyClose is what a run saw of one key's daily quota.
type dailyClose struct {
	// Until is the midnight in the key's zone its daily quota was seen
	// closing it until; zero when the run never saw that.
	Until time.Time
	// DayEnded: a midnight in the key's zone passed during the run, which
	// reopens a key its daily quota closed and gives its provider's
	// project a new day, so the run need not end with it closed, nor even
	// see it close.
	DayEnded bool
}

// asDesigned reports whether the key behaved as the design says: closed
// until midnight by its daily quota, unless the day ended mid-run.
func (d dailyClose) asDesigned() bool { return !d.Until.IsZero() || d.DayEnded }

// daily returns what the run, from start to end (read from the demo's
// clock), saw of k's daily quota, its day ending at midnight in zone.
func (c *closures) daily(k quota.Key, zone *time.Location, start, end time.Time) dailyClose {
	d := dailyClose{DayEnded: midnightBetween(start, end, zone)}
	c.mu.Lock()
	snap, ok := c.seen[closedKey{k, quota.PauseDailyQuota}]
	c.mu.Unlock()
	if ok && closedUntilMidnight(snap, zone) {
		d.Until = snap.PausedUntil.In(zone).Round(time.Second)
	}
	return d
}

// dailyClosed counts the keys the run saw closed by a daily quota until a
// midnight in their zone, zoneOf naming each key's.
func (c *closures) dailyClosed(zoneOf func(quota.Key) *time.Location) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for cl, snap := range c.seen {
		if cl.reason == quota.PauseDailyQuota && closedUntilMidnight(snap, zoneOf(cl.key)) {
			n++
		}
	}
	return n
}

// midnightBetween reports whether a midnight in zone falls in (start, end]:
// the day there changed during the span.
func midnightBetween(start, end time.Time, zone *time.Location) bool {
	y1, m1, d1 := start.In(zone).Date()
	y2, m2, d2 := end.In(zone).Date()
	return end.After(start) && (y1 != y2 || m1 != m2 || d1 != d2)
}

// closedUntilMidnight reports whether snap shows its key closed by a daily
// quota until a midnight in zone, ahead of it. The worker pauses the key
// for the time until that midnight, which the store adds to its own clock,
// so the pause ends within a second of it, not on the nanosecond.
func closedUntilMidnight(snap quota.Snapshot, zone *time.Location) bool {
	until := snap.PausedUntil.In(zone).Round(time.Second)
	return snap.PauseReason == quota.PauseDailyQuota && until.After(snap.At) &&
		until.Sub(snap.At) <= 25*time.Hour && until.Hour() == 0 && until.Minute() == 0 && until.Second() == 0
}
