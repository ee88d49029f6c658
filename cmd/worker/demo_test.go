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
	p := plan{Primary: 4, Flaky: 2, FlakyAfter: 1, Capped: 6, Turns: 2, MaxOutputTokens: 128, Timeout: 2 * time.Minute}
	var out, errOut bytes.Buffer
	code := runDemo(context.Background(), cfg, p, &out, &errOut, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	m := regexp.MustCompile(`^demo: workflows=12 completed=12 failed=0 admitted=(\d+) queued=(\d+) provider_429=(\d+) escalations=(\d+) fallbacks=(\d+) spend_capped=(\d+)$`).FindStringSubmatch(last)
	require.NotNil(t, m, "last line: %q", last)
	require.NotEqual(t, "0", m[4], "escalations")
	require.NotEqual(t, "0", m[5], "fallbacks")
	require.NotEqual(t, "0", m[6], "spend caps")
	require.Contains(t, out.String(), "demo: t=", "plain progress lines when stdout is not a terminal")
	require.Regexp(t, `^Temporal UI: http://127\.0\.0\.1:\d+/namespaces/default/workflows `, lines[0], "the UI's address comes first")
}

// The verdict names each way a run departs from the design.
func TestVerdictNamesEachDeparture(t *testing.T) {
	var good tally
	good.completed.Store(3)
	shown := interceptor.Stats{Escalations: 1, Fallbacks: 1, SpendCapped: 1}
	require.Empty(t, verdict(3, shown, &good, 0))

	var short tally
	short.completed.Store(2)
	bad := verdict(3, interceptor.Stats{}, &short, 2)
	require.Len(t, bad, 5)
	for i, want := range []string{"completed=2", "answered 2 429s", "escalated", "FallbackWorkflow", "spend cap"} {
		require.Contains(t, bad[i], want)
	}
}
