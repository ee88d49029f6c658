package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Definitions printed with every run, so a reader of the table knows exactly
// what each column counts.
const definitions = `Definitions:
  window        the load window: workflows are started at a steady rate for -duration, then the
                run drains (no new workflows) for at most -drain.
  goodput       the input tokens the provider accepted during the window ÷ what it would
                have accepted of the same calls, in the same order, from a client that knew
                its limiter exactly and sent each call the moment it fit (llmsim.Ideal). A
                limit enforced over a short window does not bank one axis's idle time for
                another, so with calls of mixed sizes even that client leaves part of each
                limit unused (req use and tok use show how much). A -pool run, whose members
                are several accounts, is compared with the limit alone, as req/tok use are:
  req/tok use   the provider's limit used on each axis during the window:
                  units the provider accepted in the window ÷ (burst + rate × window),
                where burst + rate × window is the most the provider's limiter lets through in
                the window: rate is the limit per period, burst what may go at once, the whole
                limit, or with -window F only F of it (the provider's enforcement window
                holds no more). On the request axis that is accepted calls ÷ the most calls
                the provider would have accepted.
                The axis reaching the higher fraction is reported as binding; it is the
                goodput of a -pool run.
  429/100       provider 429 answers per 100 provider calls, over the whole run (window + drain).
  attempts/call Temporal activity attempts of the LLM activity (every execution a worker
                started, counted by an outermost interceptor, including Tollgate's
                scheduled-retry refusals, which end at once without calling the provider; the
                agents' tool activity is not an LLM call and is not counted) per completed LLM
                call, whole run:
                attempts_per_call in fleet.json.
  calls/call    provider calls (every HTTP request llmsim received) per completed LLM call
                (an activity that returned the provider's answer), whole run:
                provider_calls_per_call in fleet.json. attempts/call − calls/call is the
                attempts that never reached the provider.
  p50/p99       workflow completion latency (start request to result), nearest rank, over the
                workflows that completed before the drain deadline.
  peak slots    the most activity executions in flight at once across the fleet (outermost
                interceptor), tool calls included, i.e. worker activity slots held.
  done/total    workflows completed successfully ÷ workflows started; the rest were still
                running at the drain deadline (and were terminated) or failed.`

// faultDefinitions are printed after definitions in a fault run.
const faultDefinitions = `  lost          workflows started but not completed (total − done): failed (the run prints
                why), or still running at the drain deadline.
  over limit    the most calls llmsim held in flight at once, less the policy's concurrency
                limit; 0 when the limit held. llmsim counts a call from the moment it has read
                its request until just before it writes the answer, so a caller holding its
                answer is never counted; a killed replica's calls leave when their
                connections close.`

// counts is what one setup's run measured, before it is summarized.
type counts struct {
	// Window is the load window; Period the provider's refill period;
	// Enforcement the window the provider also enforces each limit over
	// (-window), 0 for the whole period.
	Window, Period, Enforcement time.Duration
	// RequestLimit and InputTokenLimit are the provider's capacities per
	// Period.
	RequestLimit, InputTokenLimit int64
	// WindowAccepted and WindowInputTokens are what the provider accepted
	// during the window: calls, and the input tokens they were charged.
	WindowAccepted, WindowInputTokens int64
	// ConcurrencyLimit is the policy's limit on calls in flight at once; 0
	// when it has none.
	ConcurrencyLimit int64
	// ProviderCalls and Provider429 count every call the provider received
	// and every 429 it sent, over the whole run.
	ProviderCalls, Provider429 int64
	// ProviderPeakInFlight is the most calls the provider held at once.
	ProviderPeakInFlight int64
	// CompletedCalls counts activities that returned an answer;
	// ActivityAttempts every activity execution started.
	CompletedCalls, ActivityAttempts int64
	// Latencies holds the completion latency of each completed workflow.
	Latencies []time.Duration
	// Completed and Total count workflows completed and started.
	Completed, Total int
	// PeakSlots is the most activity executions in flight at once.
	PeakSlots int64
	// Allowances is how many times the limit the provider offered over
	// the window: 1, or in a pool run the members open meanwhile (see
	// poolLog.allowances); 0 means 1.
	Allowances float64
	// SpendCapped counts the spend-cap answers of a pool run's capped
	// member, which Provider429 does not.
	SpendCapped int64
	// Exact is the goodput against an exact client (exactGoodput); 0 when
	// none was computed (a pool run), which leaves the limit's.
	Exact float64
}

// Result is one setup's line of the table and one object of fleet.json.
type Result struct {
	Name                  string  `json:"name"`
	Goodput               float64 `json:"goodput"`
	BindingAxis           string  `json:"binding_axis"`
	RequestUtilization    float64 `json:"request_utilization"`
	InputTokenUtilization float64 `json:"input_token_utilization"`
	Provider429Per100     float64 `json:"provider_429_per_100"`
	AttemptsPerCall       float64 `json:"attempts_per_call"`
	ProviderCallsPerCall  float64 `json:"provider_calls_per_call"`
	P50Ms                 float64 `json:"p50_ms"`
	P99Ms                 float64 `json:"p99_ms"`
	PeakSlots             int64   `json:"peak_slots"`
	Completed             int     `json:"completed"`
	Total                 int     `json:"total"`
	// Lost is Total − Completed.
	Lost int `json:"lost"`
	// ConcurrencyLimit is the policy's concurrency limit (0: none);
	// ProviderPeakInFlight the most calls the provider held at once; and
	// OverLimit how far that went over the limit (0 when it held, or with
	// no limit).
	ConcurrencyLimit     int64 `json:"concurrency_limit,omitempty"`
	ProviderPeakInFlight int64 `json:"provider_peak_in_flight"`
	OverLimit            int64 `json:"over_limit"`
	// SpendCapped counts a pool run's spend-cap answers (not in
	// Provider429Per100).
	SpendCapped int64 `json:"spend_capped,omitempty"`
}

// summarize turns a setup's counts into its Result. Ratios with nothing to
// divide by are 0.
func summarize(name string, c counts) Result {
	n := c.Allowances
	if n == 0 {
		n = 1
	}
	reqUse := ratio(float64(c.WindowAccepted), n*allowance(c.RequestLimit, c.Period, c.Enforcement, c.Window))
	tokUse := ratio(float64(c.WindowInputTokens), n*allowance(c.InputTokenLimit, c.Period, c.Enforcement, c.Window))
	r := Result{
		Name:                  name,
		Goodput:               reqUse,
		BindingAxis:           "requests",
		RequestUtilization:    reqUse,
		InputTokenUtilization: tokUse,
		Provider429Per100:     100 * ratio(float64(c.Provider429), float64(c.ProviderCalls)),
		AttemptsPerCall:       ratio(float64(c.ActivityAttempts), float64(c.CompletedCalls)),
		ProviderCallsPerCall:  ratio(float64(c.ProviderCalls), float64(c.CompletedCalls)),
		P50Ms:                 millis(percentile(c.Latencies, 0.50)),
		P99Ms:                 millis(percentile(c.Latencies, 0.99)),
		PeakSlots:             c.PeakSlots,
		Completed:             c.Completed,
		Total:                 c.Total,
		Lost:                  c.Total - c.Completed,
		ConcurrencyLimit:      c.ConcurrencyLimit,
		ProviderPeakInFlight:  c.ProviderPeakInFlight,
		SpendCapped:           c.SpendCapped,
	}
	if c.ConcurrencyLimit > 0 {
		r.OverLimit = max(0, c.ProviderPeakInFlight-c.ConcurrencyLimit)
	}
	if tokUse > reqUse {
		r.Goodput, r.BindingAxis = tokUse, "input_tokens"
	}
	if c.Exact > 0 {
		r.Goodput = c.Exact
	}
	return r
}

// allowance is the most a provider's limiter of limit units per period,
// full at the start, lets through in window: the burst it lets go at once
// plus what it earns meanwhile. The burst is the whole limit, or only the
// enforcement window's share of it when the provider also enforces the
// limit over a shorter window (enforcement, 0 for none): the window holds
// no more, so no client can use more. It is 0 for an unlimited axis
// (limit ≤ 0).
func allowance(limit int64, period, enforcement, window time.Duration) float64 {
	if limit <= 0 || period <= 0 {
		return 0
	}
	burst := period
	if enforcement > 0 && enforcement < period {
		burst = enforcement
	}
	return float64(limit) * (burst.Seconds() + window.Seconds()) / period.Seconds()
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// percentile is the nearest-rank percentile p (in (0, 1]) of ds, 0 when ds
// is empty. ds is not modified.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*10) / 10
}

// writeJSON writes results as fleet.json: an indented list, one object per
// setup.
func writeJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// printTable writes results as an aligned table; with faults, with the
// columns lost and over limit after 429/100.
func printTable(w io.Writer, results []Result, faults bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	faultHead := ""
	if faults {
		faultHead = "lost\tover limit\t"
	}
	fmt.Fprintln(tw, "setup\tgoodput\tbinding\treq use\ttok use\t429/100\t"+faultHead+"attempts/call\tcalls/call\tp50 ms\tp99 ms\tpeak slots\tdone/total\t")
	for _, r := range results {
		faultCols := ""
		if faults {
			faultCols = fmt.Sprintf("%d\t%d\t", r.Lost, r.OverLimit)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t%.3f\t%.3f\t%.2f\t%s%.2f\t%.2f\t%.0f\t%.0f\t%d\t%d/%d\t\n",
			r.Name, r.Goodput, strings.TrimSuffix(r.BindingAxis, "_tokens")+axisSuffix(r.BindingAxis), r.RequestUtilization, r.InputTokenUtilization,
			r.Provider429Per100, faultCols, r.AttemptsPerCall, r.ProviderCallsPerCall, r.P50Ms, r.P99Ms, r.PeakSlots, r.Completed, r.Total)
	}
	return tw.Flush()
}

// axisSuffix shortens "input_tokens" to "input tok" in the table.
func axisSuffix(axis string) string {
	if strings.HasSuffix(axis, "_tokens") {
		return " tok"
	}
	return ""
}
