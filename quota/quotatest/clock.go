package quotatest

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Clock is a quota.Clock moved by hand. It never moves on its own, so a test
// can assert exact waits and levels. The zero Clock reads the zero time; build
// one with NewClock. A Clock is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ quota.Clock = (*Clock)(nil)

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
