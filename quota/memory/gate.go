package memory

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// gate is a bucket's start gate (see quota's burst.go): a level charged
// when a call is granted, as of the time the call starts, holding at most
// the bucket's burst and refilled at its rate. It may run below zero: a
// call larger than the burst starts when the gate is full, and the calls
// after it wait for the debt. The zero gate is full.
type gate struct {
	level float64
	at    time.Time // when level was computed; zero: full
}

// levelAt is the gate's level at now, for a burst refilled at rate.
func (g *gate) levelAt(now time.Time, burst, rate float64) float64 {
	if g.at.IsZero() {
		return burst
	}
	l := g.level
	if dt := now.Sub(g.at); dt > 0 {
		l += dt.Seconds() * rate
	}
	return math.Min(l, burst)
}

// shift moves the gate's level, read at burst and rate, down by as much as
// its burst shrinks to next (see bucket.setMargin), dating it now unless it
// is dated at a start yet to come.
func (g *gate) shift(now time.Time, burst, rate, next float64) {
	if g.at.IsZero() {
		return // full
	}
	at := g.at
	if at.Before(now) {
		at = now
	}
	g.level, g.at = math.Min(g.levelAt(at, burst, rate)+math.Min(0, next-burst), next), at
}

// startIn returns how long until a call costing n may start through the
// gate: until its level holds n, or the whole burst for a call larger. A
// gate charged as of a later start than now is read as of that start.
func (g *gate) startIn(now time.Time, n, burst, rate float64) time.Duration {
	from := now
	if g.at.After(now) {
		from = g.at
	}
	need := math.Min(n, burst)
	wait := from.Sub(now)
	if deficit := need - g.levelAt(from, burst, rate); deficit > 1e-9*math.Max(1, need) {
		wait += time.Duration(math.Ceil(deficit / rate * float64(time.Second)))
	}
	return wait
}

// take charges n as of at, the time the call starts (n < 0 refunds, never
// above the burst, and only to a gate not dated past at): a gate read
// before then reads its level as of at, refilling nothing until then.
func (g *gate) take(at time.Time, n, burst, rate float64) {
	g.takeOwn(at, n, burst, rate, time.Time{})
}

// takeOwn is take for a ticket whose start was own: a refund may undo its
// charge on a gate dated at that start.
func (g *gate) takeOwn(at time.Time, n, burst, rate float64, own time.Time) {
	if at.Before(g.at) {
		if n < 0 && !g.at.Equal(own) {
			// The level after a start yet to come: what is given back
			// now cannot be added there, or the next call would start
			// together with that one. It is given back to nobody.
			return
		}
		at = g.at
	}
	g.level, g.at = math.Min(g.levelAt(at, burst, rate)-n, burst), at
}

// start charges cost to the start gates of the budget's buckets and
// returns how long until the call may start: the longest any gate needs
// to hold its share. ks is a tree's root.
func (ks *keyState) start(now time.Time, cost quota.Cost) time.Duration {
	var wait time.Duration
	for i := range ks.buckets {
		b := &ks.buckets[i]
		n := float64(cost.On(b.axis))
		if n <= 0 {
			continue
		}
		wait = max(wait, b.gate.startIn(now, n, b.burst, b.rate))
	}
	at := now.Add(wait)
	for i := range ks.buckets {
		b := &ks.buckets[i]
		if n := float64(cost.On(b.axis)); n > 0 {
			b.gate.take(at, n, b.burst, b.rate)
		}
		// The line never runs ahead of the starts: a bucket refills every
		// axis at once while a call waits on one, which the provider's
		// window does not, so a grant the gate starts later owes the
		// bucket the time it waits, and the calls behind it wait as long.
		if wait > 0 {
			b.set(now, b.level(now)-b.rate*wait.Seconds())
		}
	}
	return wait
}

// restart charges the start gates of the budget's buckets what a settled
// call used beyond its charge (refunding what it used less). ks is a
// tree's root.
func (ks *keyState) restart(now time.Time, charged, actual quota.Cost) {
	for i := range ks.buckets {
		b := &ks.buckets[i]
		if n := float64(actual.On(b.axis) - charged.On(b.axis)); n != 0 {
			b.gate.take(now, n, b.burst, b.rate)
		}
	}
}

// unstart gives cost back to the start gates of the budget's buckets, for
// a grant whose call did not start at start. ks is a tree's root.
func (ks *keyState) unstart(now time.Time, cost quota.Cost, start time.Time) {
	for i := range ks.buckets {
		b := &ks.buckets[i]
		if n := float64(cost.On(b.axis)); n > 0 {
			b.gate.takeOwn(now, -n, b.burst, b.rate, start)
		}
	}
}

// lesson teaches the budget a provider's rate limit on a call it granted,
// pausing reason for d from now: the margin of the bucket axis the reason
// names (quota.PauseReason.Lesson), or of every bucket when it names none
// or one the budget does not limit, is cut unless a pause is in force
// already (the 429s of one burst are one lesson). ks is a tree's root.
func (ks *keyState) lesson(now time.Time, reason quota.PauseReason) {
	axis, ok := reason.Lesson()
	if !ok || ks.paused(now) {
		return
	}
	if _, ok := ks.policy.Limit(axis); !ok {
		axis = 0
	}
	for i := range ks.buckets {
		if b := &ks.buckets[i]; axis == 0 || b.axis == axis {
			b.setMargin(now, storekit.Cut(b.margin))
		}
	}
}

// gain credits the budget with a call that went well: its settlement
// counted the provider's usage, which grows every bucket's margin. ks is
// a tree's root.
func (ks *keyState) gain(now time.Time, st quota.Settlement) {
	if !st.Counted {
		return
	}
	for i := range ks.buckets {
		b := &ks.buckets[i]
		b.setMargin(now, storekit.Gain(b.margin, ks.maxBurst))
	}
}

// margin is the budget's margin at its most cautious (quota.Snapshot's
// Margin). ks is a tree's root.
func (ks *keyState) margin() quota.Margin {
	ms := make([]quota.Margin, len(ks.buckets))
	for i := range ks.buckets {
		ms[i] = ks.buckets[i].margin
	}
	return storekit.Cautious(ms...)
}

// axisMargins reports each bucket's margin in s, the budget's snapshot.
// ks is a tree's root.
func (ks *keyState) axisMargins(s *quota.Snapshot) {
	for i := range s.Axes {
		for j := range ks.buckets {
			if b := &ks.buckets[j]; b.axis == s.Axes[i].Axis {
				s.Axes[i].Margin = storekit.OrNone(b.margin)
			}
		}
	}
}
