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

	"github.com/tollgate/tollgate/interceptor"
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
	// Six two-turn Gemini agents meet their project's last 10 requests of
	// the day: the eleventh call closes the key (about 22 s in, at the
	// policy's 8 a minute), and the calls queued behind it fall back.
	p := plan{Primary: 4, Flaky: 2, FlakyAfter: 1, Capped: 6, Gemini: 6, Turns: 2, MaxOutputTokens: 128, Timeout: 2 * time.Minute}
	var out, errOut bytes.Buffer
	code := runDemo(context.Background(), cfg, p, &out, &errOut, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	m := regexp.MustCompile(`^demo: workflows=18 completed=18 failed=0 admitted=(\d+) queued=(\d+) provider_429=(\d+) escalations=(\d+) fallbacks=(\d+) spend_capped=(\d+) daily_closed=1$`).FindStringSubmatch(last)
	require.NotNil(t, m, "last line: %q", last)
	require.NotEqual(t, "0", m[4], "escalations")
	require.NotEqual(t, "0", m[5], "fallbacks")
	require.NotEqual(t, "0", m[6], "spend caps")
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
	require.Empty(t, verdict(3, shown, &good, 0, true))

	var short tally
	short.completed.Store(2)
	bad := verdict(3, interceptor.Stats{}, &short, 2, false)
	require.Len(t, bad, 6)
	for i, want := range []string{"completed=2", "answered 2 429s", "escalated", "FallbackWorkflow", "spend cap", "midnight America/Los_Angeles"} {
		require.Contains(t, bad[i], want)
	}
}
