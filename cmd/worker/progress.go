package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/activities"
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
	clock quota.Clock
	start time.Time
	lines int // lines of the last block drawn (tty)
	// closed holds the keys already reported closed (plain lines).
	closed map[quota.Key]bool
}

func (v *progress) draw(ctx context.Context) {
	st := v.w.Stats()
	n := v.plan.workflows()
	elapsed := v.clock.Now().Sub(v.start).Round(time.Second)
	if !v.tty {
		fmt.Fprintf(v.out, "demo: t=%s done=%d/%d failed=%d admitted=%d queued=%d refused=%d provider_429=%d escalations=%d fallbacks=%d spend_capped=%d\n",
			elapsed, v.tally.done(), n, v.tally.failed.Load(), st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
		v.reportClosed(ctx, elapsed)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Tollgate demo: %d agent workflows x %d tools on simulated providers   %s\n", n, v.plan.Tools, elapsed)
	fmt.Fprintf(&b, "workflows  %s %d/%d done, %d failed, %d tool calls run, %d turns answered by a backup\n",
		bar(float64(v.tally.done()), int64(n), 30), v.tally.done(), n, v.tally.failed.Load(), v.tally.toolCalls.Load(), v.tally.backupTurns.Load())
	fmt.Fprintf(&b, "tollgate   admitted %d  queued %d  refused %d  |  provider 429s %d  escalations %d  fallbacks %d  spend caps %d\n",
		st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
	for _, k := range v.w.Budgets().Policies.Keys() {
		fmt.Fprintf(&b, "  %-42s %s\n", k, levels(ctx, v.w.Store(), k, dayZone(v.w.Budgets(), k)))
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

// reportClosed prints a plain line for each key closed since the last tick:
// what the live block shows on a terminal.
func (v *progress) reportClosed(ctx context.Context, elapsed time.Duration) {
	for _, k := range v.w.Budgets().Policies.Keys() {
		if v.closed[k] {
			continue
		}
		snap, err := v.w.Store().Snapshot(ctx, k)
		if err != nil || !snap.PausedUntil.After(snap.At) || !snap.PauseReason.Closes() {
			continue
		}
		if v.closed == nil {
			v.closed = make(map[quota.Key]bool)
		}
		v.closed[k] = true
		fmt.Fprintf(v.out, "demo: t=%s %s %s\n", elapsed, k, pauseNote(snap, dayZone(v.w.Budgets(), k)))
	}
}

// levels describes a key's request bucket (the axis the demo's limits
// bind), its requests-per-day window if it has one, and whether it is
// paused or closed.
func levels(ctx context.Context, s quota.Store, k quota.Key, zone *time.Location) string {
	snap, err := s.Snapshot(ctx, k)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	var parts []string
	for _, l := range snap.Axes {
		switch l.Axis {
		case quota.Requests:
			// The level holds at most the burst: the bar is of that.
			parts = append(parts, fmt.Sprintf("requests %s %5.2f/%s at once, %d a period", fill(l.Available, l.Burst, 20), l.Available, units(l.Burst), l.Capacity))
		case quota.RequestsPerDay:
			parts = append(parts, fmt.Sprintf("today %.0f/%d", l.Available, l.Capacity))
		}
	}
	if note := pauseNote(snap, zone); note != "" {
		parts = append(parts, note)
	}
	return strings.Join(parts, "  ")
}

// pauseNote says whether a key is paused after a provider's 429 or closed
// until a spend cap or daily quota resets, with when it reopens in zone
// (where its day ends), or "" when it is open.
func pauseNote(snap quota.Snapshot, zone *time.Location) string {
	if !snap.PausedUntil.After(snap.At) {
		return ""
	}
	left := snap.PausedUntil.Sub(snap.At).Round(time.Second)
	if snap.PauseReason.Closes() {
		return fmt.Sprintf("CLOSED until %s (in %s, %s)", snap.PausedUntil.In(zone).Format("Mon 2 Jan 15:04 MST"), left, snap.PauseReason)
	}
	return fmt.Sprintf("paused %s (%s)", left, snap.PauseReason)
}

// dayZone is the time zone whose midnight resets a key's daily limits (its
// policy's requests_per_day or tokens_per_day), UTC when it has none.
func dayZone(b worker.Budgets, k quota.Key) *time.Location {
	if _, p, ok := b.Policies.Lookup(k); ok {
		for _, a := range []quota.Axis{quota.RequestsPerDay, quota.TokensPerDay} {
			if l, ok := p.Limit(a); ok {
				return l.Zone()
			}
		}
	}
	return time.UTC
}

// summarize prints the per-model table, the verdict and the last line, and
// returns the exit code. watch holds the closings the run saw, from start to
// end.
func summarize(out io.Writer, w *worker.Worker, sim *llmsim.Sim, p plan, t *tally, watch *closures, start, end time.Time) int {
	st := w.Stats()
	took := end.Sub(start)
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
		{simGemini, fmt.Sprintf("%d requests left today", simGeminiRequestsPerDay), p.Gemini},
		{simBackup, "backup", 0},
	} {
		s := sim.Stats(m.name)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", m.name, m.role, m.n, s.Received, s.Accepted, s.TooManyRequests, s.SpendCapped)
	}
	tw.Flush()
	fmt.Fprintf(out, "\naccount research (%s): spent %d tokens of its %d-token spend cap\n", simCapped, sim.Spent("research"), simSpendCapTokens)
	geminiKey := quota.Key{Provider: activities.Gemini, Model: simGemini}
	zone := dayZone(w.Budgets(), geminiKey)
	gemini := watch.daily(geminiKey, zone, start, end)
	snap, err := w.Store().Snapshot(context.Background(), geminiKey)
	if err != nil {
		snap = quota.Snapshot{}
	}
	fmt.Fprintf(out, "project studio (%s): had %d requests left today; its key is %s; %d Gemini turns answered by %s instead\n",
		simGemini, simGeminiRequestsPerDay, geminiState(snap, gemini, zone), t.geminiBackupTurns.Load(), simBackup)
	daily := watch.dailyClosed(func(k quota.Key) *time.Location { return dayZone(w.Budgets(), k) })
	fmt.Fprintf(out, "tollgate: admitted %d, queued %d, refused %d, provider 429s %d, escalations %d, fallbacks %d, spend caps %d\n",
		st.Admitted, st.Queued, st.Refused, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped)
	fmt.Fprintf(out, "workflows: %d completed, %d failed, %d tool calls run, %d turns answered by the backup model\n",
		t.completed.Load(), t.failed.Load(), t.toolCalls.Load(), t.backupTurns.Load())
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
	if bad := verdict(p.workflows(), st, t, sim.Stats(simPrimary).TooManyRequests, gemini); len(bad) > 0 {
		code = 1
		for _, b := range bad {
			fmt.Fprintln(out, "NOT AS DESIGNED:", b)
		}
	} else {
		fmt.Fprintln(out, "as designed: every workflow completed; the proactive layer queued the primary's calls, rate-limited calls escalated, the spend-capped key fell back, and "+geminiDesign(gemini))
	}
	fmt.Fprintf(out, "demo: workflows=%d completed=%d failed=%d tool_calls=%d admitted=%d queued=%d provider_429=%d escalations=%d fallbacks=%d spend_capped=%d daily_closed=%d\n",
		p.workflows(), t.completed.Load(), t.failed.Load(), t.toolCalls.Load(), st.Admitted, st.Queued, st.ProviderRateLimited, st.Escalations, st.Fallbacks, st.SpendCapped, daily)
	return code
}

// geminiState says how the Gemini key stands at the end of a run: closed or
// paused now (snap), else open, and why when it closed during the run or
// its day ended.
func geminiState(snap quota.Snapshot, d dailyClose, zone *time.Location) string {
	switch {
	case pauseNote(snap, zone) != "":
		return pauseNote(snap, zone)
	case !d.Until.IsZero():
		return fmt.Sprintf("open again: its daily quota closed it until %s, which passed during the run", d.Until.Format("Mon 2 Jan 15:04 MST"))
	case d.DayEnded:
		return fmt.Sprintf("open: the day ended in %s during the run, before the project's requests ran out", zone)
	}
	return "open"
}

// geminiDesign is the verdict's clause on the Gemini key of a run as
// designed.
func geminiDesign(d dailyClose) string {
	if d.Until.IsZero() {
		return "the Gemini project's day ended during the run, before its requests ran out"
	}
	return "the Gemini key closed until midnight Pacific and fell back"
}
