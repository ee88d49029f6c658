package interceptor

import (
	"context"
	"runtime"
	"time"
)

// sleep waits d, or until ctx is done, and wakes on time: a paced call's
// start is spaced from the one before it by no more slack than its
// limits' margin, so the millisecond a timer can oversleep by is a
// millisecond less between two calls at the provider whenever the call
// before did not oversleep. The timer wakes spinWithin early; the rest is
// waited out by yielding to other goroutines until the moment.
func sleep(ctx context.Context, d time.Duration) error {
	due := time.Now().Add(d)
	if early := d - spinWithin; early > 0 {
		t := time.NewTimer(early)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	for time.Now().Before(due) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
			runtime.Gosched()
		}
	}
	return nil
}

// spinWithin is how long before a sleep's end its timer is due: more than
// a timer oversleeps by on a loaded host (about 1 ms at the 90th
// percentile, measured in bench/fleet), little enough that the yielding
// rest costs a paced call no more than that much of a core's time.
const spinWithin = 2 * time.Millisecond
