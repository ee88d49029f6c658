package interceptor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSleepNeverWakesEarly: sleep returns no sooner than asked, both when
// its timer runs (longer than spinWithin) and when it only yields.
func TestSleepNeverWakesEarly(t *testing.T) {
	for _, d := range []time.Duration{0, 300 * time.Microsecond, spinWithin, 7 * time.Millisecond} {
		start := time.Now()
		require.NoError(t, sleep(context.Background(), d))
		require.GreaterOrEqual(t, time.Since(start), d)
	}
}

// TestSleepEndsWithItsContext: a cancelled context ends the sleep, in its
// timer or in its last yielding stretch.
func TestSleepEndsWithItsContext(t *testing.T) {
	for _, d := range []time.Duration{time.Hour, spinWithin} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, sleep(ctx, d), context.Canceled)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, sleep(ctx, time.Hour), context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Minute)
}

// BenchmarkSleepOversleep measures how late a 5 ms sleep ends, for sleep
// and, as the baseline, a plain timer: the mean, p90 and p99 lateness in
// µs. Run it with other work on the host (go test -bench . -cpu 2 while
// the machine is loaded) to see the tail a paced call meets.
func BenchmarkSleepOversleep(b *testing.B) {
	const d = 5 * time.Millisecond
	timer := func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, bb := range []struct {
		name  string
		sleep func(context.Context, time.Duration) error
	}{{"timer", timer}, {"sleep", sleep}} {
		b.Run(bb.name, func(b *testing.B) {
			var late []float64
			for b.Loop() {
				start := time.Now()
				if err := bb.sleep(context.Background(), d); err != nil {
					b.Fatal(err)
				}
				late = append(late, float64(time.Since(start)-d)/1e3)
			}
			slices.Sort(late)
			var sum float64
			for _, l := range late {
				sum += l
			}
			b.ReportMetric(sum/float64(len(late)), "late-µs")
			b.ReportMetric(late[len(late)*90/100], "p90-late-µs")
			b.ReportMetric(late[len(late)*99/100], "p99-late-µs")
		})
	}
}
