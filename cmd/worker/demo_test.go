package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/worker"
)

func quietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// A small demo shows every layer and ends with the line scripts read.
func TestDemoSmallWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a workload for about ten seconds")
	}
	cfg := config{Config: worker.Config{MetricsAddr: "off", TaskQueue: "demo-test"}, EmbeddedAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0"}
	// Six Gemini agents with one tool (two turns each) meet their project's last 10 requests of
	// the day: the eleventh call closes the key (about 22 s in, at the
	// policy's 8 a minute), and the calls queued behind it fall back.
	p := plan{Primary: 4, Flaky: 2, FlakyAfter: 1, Capped: 6, Gemini: 6, Tools: 1, MaxOutputTokens: 128, Timeout: 2 * time.Minute}
	var out, errOut bytes.Buffer
	code := runDemo(context.Background(), cfg, p, quota.SystemClock{}, &out, &errOut, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	m := regexp.MustCompile(`^demo: workflows=18 completed=18 failed=0 tool_calls=(\d+) admitted=(\d+) queued=(\d+) provider_429=(\d+) escalations=(\d+) fallbacks=(\d+) spend_capped=(\d+) daily_closed=1$`).FindStringSubmatch(last)
	require.NotNil(t, m, "last line: %q", last)
	require.Equal(t, "18", m[1], "each agent called its tool once")
	require.NotEqual(t, "0", m[5], "escalations")
	require.NotEqual(t, "0", m[6], "fallbacks")
	require.NotEqual(t, "0", m[7], "spend caps")
	require.Contains(t, out.String(), "demo: t=", "plain progress lines when stdout is not a terminal")
	require.Regexp(t, `^Temporal UI: http://127\.0\.0\.1:\d+/namespaces/default/workflows `, lines[0], "the UI's address comes first")
	require.Regexp(t, `(?m)^demo: t=\S+ gemini/default/gemini-2\.5-flash CLOSED until \w+ \d+ \w+ 00:00 P[SD]T \(in \S+, daily_quota\)$`, out.String(),
		"the moment the key closed, with midnight in Los Angeles")
	require.Regexp(t, `(?m)^\s*gemini-2\.5-flash\s+10 requests left today\s+6\s+1[1-2]\s+10\s+1\s+0\s*$`, out.String(),
		"the per-model table: 10 answered, one per-day 429, the rest never sent")
}

// The verdict names each way a run departs from the design.
func TestVerdictNamesEachDeparture(t *testing.T) {
	var good tally
	good.completed.Store(3)
	shown := interceptor.Stats{Escalations: 1, Fallbacks: 1, SpendCapped: 1}
	closed := dailyClose{Until: time.Date(2026, 1, 16, 0, 0, 0, 0, losAngeles(t))}
	require.Empty(t, verdict(3, shown, &good, 0, closed))
	require.Empty(t, verdict(3, shown, &good, 0, dailyClose{DayEnded: true}), "the day ended before the quota ran out")

	var short tally
	short.completed.Store(2)
	bad := verdict(3, interceptor.Stats{}, &short, 2, dailyClose{})
	require.Len(t, bad, 6)
	for i, want := range []string{"completed=2", "answered 2 429s", "escalated", "FallbackWorkflow", "spend cap", "midnight America/Los_Angeles"} {
		require.Contains(t, bad[i], want)
	}
}

func losAngeles(t *testing.T) *time.Location {
	t.Helper()
	zone, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	return zone
}

// The verdict on the Gemini key holds whenever the demo runs, across
// midnight in Los Angeles too: there the key's daily quota closes it only
// until that midnight, and the project's quota starts a new day. Each case
// starts at 23:59:30 (or noon) Pacific on the demo's clock, closes the key
// as the interceptor would (for the time until its reset, at the store's
// clock), and reads the verdict at the end of the run.
func TestGeminiVerdictAcrossMidnight(t *testing.T) {
	zone := losAngeles(t)
	late := time.Date(2026, 1, 15, 23, 59, 30, 0, zone)
	midnight := time.Date(2026, 1, 16, 0, 0, 0, 0, zone)
	key := quota.Key{Provider: activities.Gemini, Model: simGemini}
	type step struct {
		after time.Duration // since the start
		close bool          // the key's daily quota closes it until the next midnight
	}
	tests := []struct {
		name      string
		start     time.Time
		steps     []step
		end       time.Duration // since the start
		wantUntil time.Time
		wantOK    bool
		wantState string
	}{
		{name: "closed before midnight, open again after it", start: late,
			steps: []step{{after: 10 * time.Second, close: true}}, end: time.Minute,
			wantUntil: midnight, wantOK: true, wantState: "open again: its daily quota closed it until Fri 16 Jan 00:00 PST, which passed during the run"},
		{name: "closed after midnight, until the next", start: late,
			steps: []step{{after: 40 * time.Second, close: true}}, end: time.Minute,
			wantUntil: midnight.AddDate(0, 0, 1), wantOK: true, wantState: "CLOSED until Sat 17 Jan 00:00 PST"},
		{name: "the day ended before the quota ran out", start: late,
			end: time.Minute, wantOK: true, wantState: "open: the day ended in America/Los_Angeles during the run"},
		{name: "closed at noon, still closed", start: late.Add(-12 * time.Hour),
			steps: []step{{after: 10 * time.Second, close: true}}, end: time.Minute,
			wantUntil: midnight, wantOK: true, wantState: "CLOSED until Fri 16 Jan 00:00 PST"},
		{name: "never closed, the same day", start: late.Add(-12 * time.Hour),
			end: time.Minute, wantOK: false, wantState: "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := llmsim.NewManualClock(tt.start)
			store, err := memory.New(defaultBudgets().Policies, memory.Options{Clock: clock})
			require.NoError(t, err)
			ctx := context.Background()
			watch := newClosures(store, defaultBudgets().Policies.Keys())
			start := clock.Now()
			for _, s := range tt.steps {
				clock.Advance(start.Add(s.after).Sub(clock.Now()))
				if s.close {
					now := clock.Now()
					y, m, d := now.In(zone).Date()
					reset := time.Date(y, m, d+1, 0, 0, 0, 0, zone)
					require.NoError(t, store.Pause(ctx, key, reset.Sub(now), quota.PauseDailyQuota))
				}
				watch.observe(ctx)
			}
			clock.Advance(start.Add(tt.end).Sub(clock.Now()))
			watch.observe(ctx) // the run's last look, as runDemo takes it

			got := watch.daily(key, zone, start, clock.Now())
			require.True(t, got.Until.Equal(tt.wantUntil), "closed until %s, want %s", got.Until, tt.wantUntil)
			require.Equal(t, tt.wantOK, got.asDesigned())
			bad := verdict(1, interceptor.Stats{Escalations: 1, Fallbacks: 1, SpendCapped: 1}, completed(1), 0, got)
			if tt.wantOK {
				require.Empty(t, bad)
			} else {
				require.Len(t, bad, 1)
				require.Contains(t, bad[0], "not closed until midnight America/Los_Angeles")
			}
			wantClosed := 0
			if !tt.wantUntil.IsZero() {
				wantClosed = 1
			}
			require.Equal(t, wantClosed, watch.dailyClosed(func(quota.Key) *time.Location { return zone }), "the last line's daily_closed")
			snap, err := store.Snapshot(ctx, key)
			require.NoError(t, err)
			require.Contains(t, geminiState(snap, got, zone), tt.wantState)
		})
	}
}

func completed(n int64) *tally {
	var t tally
	t.completed.Store(n)
	return &t
}

func TestMidnightBetween(t *testing.T) {
	zone := losAngeles(t)
	late := time.Date(2026, 1, 15, 23, 59, 30, 0, zone)
	require.True(t, midnightBetween(late, late.Add(30*time.Second), zone), "midnight itself ends the day")
	require.False(t, midnightBetween(late, late.Add(29*time.Second), zone))
	require.False(t, midnightBetween(late.Add(time.Minute), late.Add(2*time.Minute), zone), "the next day, before its midnight")
	require.False(t, midnightBetween(late, late, zone))
	require.True(t, midnightBetween(late.UTC(), late.Add(time.Minute).UTC(), zone), "read in the zone, whatever the times' own")
}
