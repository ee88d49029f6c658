package llmsim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWindowShapesDisagree runs one 60-per-minute limit enforced per second
// in each shape and sends the same calls: one at 0.9 s past a second's
// boundary, one at 1.0 s, one at 1.9 s. A fixed window forgets the first at
// the boundary; a sliding log remembers it for a whole second; the bucket
// earns back what a tenth of a second pays for. Each refusal's wait is the
// shape's own.
func TestWindowShapesDisagree(t *testing.T) {
	for _, tc := range []struct {
		shape string
		// at1 is the answer at 1.0 s and wait1 its wait ("" when
		// admitted); at19 the answer at 1.9 s.
		at1   int
		wait1 string
		at19  int
	}{
		{ShapeFixed, http.StatusOK, "", http.StatusTooManyRequests},
		{ShapeSliding, http.StatusTooManyRequests, "900ms", http.StatusOK},
		{ShapeBucket, http.StatusTooManyRequests, "900ms", http.StatusOK},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, Window: time.Second, WindowShape: tc.shape}}})
			boundary := f.clock.Now().Truncate(time.Second).Add(time.Second)
			at := func(offset time.Duration) reply {
				f.clock.Advance(boundary.Add(offset).Sub(f.clock.Now()))
				return f.openai(t, "k", "m", "hi", 10)
			}
			require.Equal(t, http.StatusOK, at(900*time.Millisecond).status)
			r := at(950 * time.Millisecond)
			require.Equal(t, http.StatusTooManyRequests, r.status, "one request per second in every shape")
			if tc.shape == ShapeFixed {
				require.Contains(t, r.str("error.message"), "try again in 50ms", "a fixed window opens at the boundary")
			}
			r = at(time.Second)
			require.Equal(t, tc.at1, r.status)
			if tc.wait1 != "" {
				require.Contains(t, r.str("error.message"), "try again in "+tc.wait1)
			}
			require.Equal(t, tc.at19, at(1900*time.Millisecond).status)
		})
	}
}

// TestFixedAndSlidingStretchAWindowUnderOneCall checks a 30-per-minute
// limit enforced per second admits one call every two seconds in the
// counting shapes (the window's share, half a call, is stretched to one).
func TestFixedAndSlidingStretchAWindowUnderOneCall(t *testing.T) {
	for _, shape := range []string{ShapeFixed, ShapeSliding} {
		t.Run(shape, func(t *testing.T) {
			f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 30, Window: time.Second, WindowShape: shape}}})
			f.clock.Advance(f.clock.Now().Truncate(2 * time.Second).Add(2 * time.Second).Sub(f.clock.Now()))
			require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 10).status)
			f.clock.Advance(1500 * time.Millisecond)
			require.Equal(t, http.StatusTooManyRequests, f.openai(t, "k", "m", "hi", 10).status, "half a window's share is not a call")
			f.clock.Advance(500 * time.Millisecond)
			require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 10).status, "two seconds after the first")
		})
	}
}

// TestSlidingLogTokens checks the sliding log on a token limit: calls fill
// the window's share, a larger call waits until enough of the log has aged
// out, and a refund takes back the newest entry.
func TestSlidingLogTokens(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWindow(ShapeSliding, 6000, time.Second, time.Minute, now) // 100 tokens a second
	w.refill(now)
	w.take(60)
	w.refill(now.Add(300 * time.Millisecond))
	w.take(30)
	w.refill(now.Add(500 * time.Millisecond))
	require.Zero(t, w.wait(10), "90 of 100 used")
	require.Equal(t, 500*time.Millisecond, w.wait(50), "room once the 60 leave at 1 s")
	require.Equal(t, 800*time.Millisecond, w.wait(80), "and the 30 at 1.3 s")
	require.Equal(t, 800*time.Millisecond, w.wait(500), "a call larger than the share waits for an empty log")
	w.give(30)
	require.Zero(t, w.wait(40), "the refund took back the newest 30")
	w.refill(now.Add(time.Second))
	require.Zero(t, w.wait(100))
}

// TestWindowShapeIsValidated checks a misspelt shape is named with the fix.
func TestWindowShapeIsValidated(t *testing.T) {
	_, err := New(Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, Window: time.Second, WindowShape: "sliding-log"}}})
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "window_shape") && strings.Contains(err.Error(), `"fixed"`), err.Error())
}
