package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/worker"
)

// progress draws the demo's live status: redrawn in place on a terminal,
// a plain line per tick otherwise.
type progress struct {
	out   io.Writer
	tty   bool
	w     *worker.Worker
	plan  plan
	tally *tally
	start time.Time
	lines int // lines of the last block drawn (tty)
}

func (v *progress) draw(ctx context.Context) {
	st := v.w.Stats()
	n := v.plan.workflows()
	elapsed := time.Since(v.start).Round(time.Second)
	if !v.tty {
		fmt.Fprintf(v.out, "demo: t=%s done=%d/%d failed=%d admitted=%d queued=%d refused=%d provider_429=%d escalations=%d fallbacks=%d spend_capped=%d\n",
			elapsed, v.tally.done(), n, v.tally.failed.Load(), st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Tollgate demo: %d agent workflows x %d turns on simulated providers   %s\n", n, v.plan.Turns, elapsed)
	fmt.Fprintf(&b, "workflows  %s %d/%d done, %d failed, %d turns answered by a backup\n",
		bar(float64(v.tally.done()), int64(n), 30), v.tally.done(), n, v.tally.failed.Load(), v.tally.backupTurns.Load())
	fmt.Fprintf(&b, "tollgate   admitted %d  queued %d  refused %d  |  provider 429s %d  escalations %d  fallbacks %d  spend caps %d\n",
		st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
	for _, k := range v.w.Budgets().Policies.Keys() {
		fmt.Fprintf(&b, "  %-42s %s\n", k, levels(ctx, v.w.Store(), k))
	}
	block := b.String()
	if v.lines > 0 {
		fmt.Fprintf(v.out, "\x1b[%dA", v.lines) // back to the top of the last block
	}
	for _, line := range strings.SplitAfter(block, "\n") {
		if line != "" {
			fmt.Fprint(v.out, "\x1b[2K"+line) // clear, then write
		}
	}
	v.lines = strings.Count(block, "\n")
}

// levels describes a key's request bucket (the axis the demo's limits bind)
// and whether it is paused.
func levels(ctx context.Context, s quota.Store, k quota.Key) string {
	snap, err := s.Snapshot(ctx, k)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	var parts []string
	for _, l := range snap.Axes {
		if l.Axis == quota.Requests {
			parts = append(parts, fmt.Sprintf("requests %s %6.1f/%d", bar(l.Available, l.Capacity, 20), l.Available, l.Capacity))
		}
	}
	if snap.PausedUntil.After(snap.At) {
		parts = append(parts, fmt.Sprintf("paused %s (%s)", snap.PausedUntil.Sub(snap.At).Round(time.Second), snap.PauseReason))
	}
	return strings.Join(parts, "  ")
}

// summarize prints the per-model table, the verdict and the last line, and
// returns the exit code.
func summarize(out io.Writer, w *worker.Worker, sim *llmsim.Sim, p plan, t *tally, took time.Duration) int {
	st := w.Stats()
	fmt.Fprintf(out, "\nsummary after %s\n\n", took.Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\trole\tworkflows\tcalls received\tanswered\t429 answers\tof which spend cap\t")
	for _, m := range []struct {
		name, role string
		n          int
	}{
		{simPrimary, "primary, 60 RPM", p.Primary},
		{simFlaky, "429 faults after call " + fmt.Sprint(p.FlakyAfter), p.Flaky},
		{simCapped, "account spend cap", p.Capped},
		{simBackup, "backup", 0},
	} {
		s := sim.Stats(m.name)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", m.name, m.role, m.n, s.Received, s.Accepted, s.TooManyRequests, s.SpendCapped)
	}
	tw.Flush()
	fmt.Fprintf(out, "\naccount research (%s): spent %d tokens of its %d-token spend cap\n", simCapped, sim.Spent("research"), simSpendCapTokens)
	fmt.Fprintf(out, "tollgate: admitted %d, queued %d, refused %d, provider 429s %d, escalations %d, fallbacks %d, spend caps %d\n",
		st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
	fmt.Fprintf(out, "workflows: %d completed, %d failed, %d turns answered by the backup model\n",
		t.completed.Load(), t.failed.Load(), t.backupTurns.Load())
	t.mu.Lock()
	for i, e := range t.errors {
		if i == 5 {
			fmt.Fprintf(out, "  … and %d more failures\n", len(t.errors)-5)
			break
		}
		fmt.Fprintln(out, "  failed:", e)
	}
	t.mu.Unlock()
	code := 0
	if bad := verdict(p.workflows(), st, t, sim.Stats(simPrimary).TooManyRequests); len(bad) > 0 {
		code = 1
		for _, b := range bad {
			fmt.Fprintln(out, "NOT AS DESIGNED:", b)
		}
	} else {
		fmt.Fprintln(out, "as designed: every workflow completed; the proactive layer queued the primary's calls, rate-limited calls escalated, and the spend-capped key fell back")
	}
	fmt.Fprintf(out, "demo: workflows=%d completed=%d failed=%d admitted=%d queued=%d provider_429=%d escalations=%d fallbacks=%d spend_capped=%d\n",
		p.workflows(), t.completed.Load(), t.failed.Load(), st.Admitted, st.Queued, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
	return code
}
