package redis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReplyDelayCountsFromTheFastestReply: a reply is as late as its gap
// (local clock at the reply less the script's now) exceeds the least gap
// seen lately, never less than zero nor more than maxReplyDelay, and the
// least is forgotten two spans after it was seen, so a stepped clock does
// not make every reply look late for long.
func TestReplyDelayCountsFromTheFastestReply(t *testing.T) {
	var r replyDelay
	t0 := time.Now()
	reply := func(after, gap time.Duration) time.Duration {
		at := t0.Add(after)
		return r.late(float64(at.UnixMicro()-gap.Microseconds()), at)
	}
	require.Zero(t, reply(0, 800*time.Microsecond), "the first reply is the fastest seen")
	require.Equal(t, 3*time.Millisecond, reply(time.Second, 3800*time.Microsecond))
	require.Zero(t, reply(2*time.Second, 500*time.Microsecond), "a faster reply is the new least")
	require.Equal(t, 300*time.Microsecond, reply(3*time.Second, 800*time.Microsecond))
	require.Equal(t, maxReplyDelay, reply(4*time.Second, time.Second), "a reply a second late counts as maxReplyDelay")

	// A span later the least is still remembered; two spans later it is not.
	require.Equal(t, 300*time.Microsecond, reply(delaySpan+3*time.Second, 800*time.Microsecond))
	require.Equal(t, time.Millisecond, reply(delaySpan+4*time.Second, 1500*time.Microsecond))
	require.Zero(t, reply(3*delaySpan+4*time.Second, 5*time.Millisecond),
		"after two quiet spans the first reply is the fastest seen again")
	require.Equal(t, time.Millisecond, reply(3*delaySpan+5*time.Second, 6*time.Millisecond))
}

func TestSinceNeverGoesBelowZero(t *testing.T) {
	require.Equal(t, 7*time.Millisecond, since(10*time.Millisecond, 3*time.Millisecond))
	require.Zero(t, since(2*time.Millisecond, 3*time.Millisecond))
}
