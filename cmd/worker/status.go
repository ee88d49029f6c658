package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/quota/storekit"
)

// statusTimeout bounds how long status waits for Redis to answer before it
// reports Redis unreachable.
const statusTimeout = 5 * time.Second

// status prints each policy key's levels per axis to out, read from the
// store cfg configures. With REDIS_URL it reads Redis itself, never through
// the STORE_FAILURE fallback a worker uses (whose stand-in buckets would show
// levels nobody shares), and returns an error naming REDIS_URL when Redis
// does not answer PING within statusTimeout. With no REDIS_URL the store is
// a fresh memory store, so the levels shown are full: status says so. It
// returns the policies' error and the store's error when a key cannot be
// read.
func status(ctx context.Context, cfg config, out io.Writer, logger *slog.Logger) error {
	cfg = cfg.withDefaults()
	b, err := cfg.budgets(logger)
	if err != nil {
		return err
	}
	if cfg.RedisURL == "" {
		store, err := memory.New(b.Policies, memory.Options{})
		if err != nil {
			return fmt.Errorf("worker: memory store: %w", err)
		}
		fmt.Fprintln(out, "store: process memory of this command (no REDIS_URL): every bucket is full; set REDIS_URL to read the fleet's levels")
		return writeStatus(ctx, out, store, b.Policies, b.Pools)
	}
	rdb, desc, err := cfg.RedisClient() // loadConfig checked the URL
	if err != nil {
		return fmt.Errorf("worker: status: %w", err)
	}
	defer rdb.Close()
	store, err := redis.New(rdb, b.Policies, redis.Options{})
	if err != nil {
		return fmt.Errorf("worker: redis store: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return fmt.Errorf("worker: status: %s at REDIS_URL (-redis-url) is unreachable: %w (start Redis, or set REDIS_URL to the fleet's Redis; status reads Redis only, never a fallback)",
			desc, err)
	}
	fmt.Fprintln(out, "store:", desc)
	return writeStatus(ctx, out, store, b.Policies, b.Pools)
}

// writeStatus prints a table of the policy keys' levels from store: per
// axis, the effective capacity, what is available now, the estimate ratio
// learned for axes that count prompt tokens, and when a daily window
// resets (a money budget's in the price table's currency, see writeSpend); per key, whether and until when it is paused or closed (until a
// spend cap or daily quota resets). When calls wait in a saturated
// account's line, a second table says what each tenant has in it (see
// writeLines); when the policies name pools, a last one lists each pool's
// members and whether each can take calls (see writePools).
func writeStatus(ctx context.Context, out io.Writer, store quota.Store, ps quota.Policies, pools pool.Set) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tAXIS\tCAPACITY\tBURST\tAVAILABLE\tFILL\tESTIMATE\tNOTE")
	var lines []quota.Snapshot
	for _, k := range ps.Keys() {
		snap, err := store.Snapshot(ctx, k)
		if err != nil {
			tw.Flush()
			return fmt.Errorf("worker: status of %s: %w", k, err)
		}
		// A tenant nested in its account's budget waits in its account's
		// line, which the account's snapshot lists whole.
		if _, _, nested := ps.Account(k); !nested && len(snap.Line) > 0 {
			lines = append(lines, snap)
		}
		note := statusNote(snap)
		if len(snap.Axes) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t%s\n", k, note)
		}
		for i, l := range snap.Axes {
			n := ""
			if i == 0 {
				n = note
			}
			if l.Axis.Spend() {
				writeSpend(tw, k, l, n)
				continue
			}
			if !l.ResetAt.IsZero() {
				n = joinNote(n, "resets "+l.ResetAt.UTC().Format(time.RFC3339))
			}
			estimate := "-"
			if l.Axis.Calibrated() {
				estimate = "×" + strconv.FormatFloat(snap.EstimateRatio, 'f', 2, 64)
			}
			// A bucket's level holds at most its burst: the fill is of that.
			burst, full := "-", float64(l.Capacity)
			if l.Axis.Kind() == quota.Bucket {
				burst, full = units(l.Burst), l.Burst
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", k, l.Axis, l.Capacity, burst,
				units(l.Available), fill(l.Available, full, 10), estimate, n)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeLines(out, ps, lines); err != nil {
		return err
	}
	return writePools(ctx, out, store, pools)
}

// writeSpend prints a money budget's row: its capacity and what is left
// in the price table's currency, and when its period starts again, e.g.
// "spend_per_month  50.00  -  12.40  [##........]  -  12.40 of 50.00 left,
// resets 2027-01-01T08:00:00Z". note is the key's note, on its first row.
func writeSpend(w io.Writer, k quota.Key, l quota.AxisLevel, note string) {
	capacity, left := quota.Money(l.Capacity), quota.Money(math.Round(l.Available))
	spend := fmt.Sprintf("%s of %s left", left, capacity)
	if !l.ResetAt.IsZero() {
		spend += ", resets " + l.ResetAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t-\t%s\t%s\t-\t%s\n", k, l.Axis, capacity, left,
		fill(l.Available, float64(l.Capacity), 10), joinNote(note, spend))
}

// writePools prints each pool's members in order of preference, with the
// requests each has available now and whether it takes calls: open, or
// paused or closed (a member a call is never admitted on until then). The
// member that served each call is counted by tollgate.pool.calls. It
// prints nothing when there are no pools.
func writePools(ctx context.Context, out io.Writer, store quota.Store, pools pool.Set) error {
	if pools.Len() == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tMEMBER\tREQUESTS AVAILABLE\tSTATE")
	for _, k := range pools.Keys() {
		members, _ := pools.Members(k)
		for _, m := range members {
			snap, err := store.Snapshot(ctx, m)
			if err != nil {
				tw.Flush()
				return fmt.Errorf("worker: status of pool %s member %s: %w", k, m, err)
			}
			avail := "-"
			for _, l := range snap.Axes {
				if l.Axis == quota.Requests {
					avail = units(l.Available)
				}
			}
			state := pausedNote(snap)
			if state == "" {
				state = "open"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k, m, avail, state)
		}
	}
	return tw.Flush()
}

// writeLines prints, for each snapshot, what waits in its line per tenant:
// the tenant's weight (its share of the account while the account is
// saturated), how many of its calls wait and what they were charged. It
// prints nothing when no line holds a call.
func writeLines(out io.Writer, ps quota.Policies, snaps []quota.Snapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nwaiting for capacity, per tenant (served in turn by weight and cost, not by arrival):")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTENANT\tWEIGHT\tWAITING\tCOST")
	for _, snap := range snaps {
		for _, l := range snap.Line {
			k, name := snap.Key, l.Tenant
			k.Tenant = l.Tenant
			if name == "" {
				name = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", snap.Key.WithoutTenant(), name,
				strconv.FormatFloat(ps.Weight(k), 'g', -1, 64), l.Tickets, l.Cost)
		}
	}
	return tw.Flush()
}

// statusNote says whether and until when a key is paused: for a while after
// a provider's 429, or closed until a spend cap or daily quota resets (a
// Gemini key until midnight in Los Angeles), with the time it reopens.
func statusNote(snap quota.Snapshot) string {
	return joinNote(pausedNote(snap), marginNote(snap), unreadableNote(snap.Unreadable))
}

// unreadableNote says how many ticket records and queue members of a form
// this release cannot read the store dropped (refunding what they held):
// written by a newer release sharing the Redis, or damaged.
func unreadableNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d unreadable records dropped (a newer release's?)", n)
}

// marginNote says what the key learned of its provider's limiter, when it
// learned anything: per bucket axis, the multiple of its burst and the
// share of its rate it now uses, and the burst its provider last refused.
// A tenant's own budget, which starts its calls at its account's gates,
// shows the account's most cautious.
func marginNote(snap quota.Snapshot) string {
	var parts []string
	for _, l := range snap.Axes {
		if l.Axis.Kind() == quota.Bucket && l.Margin != (quota.Margin{}) {
			if p := marginPart(l.Margin); p != "" {
				parts = append(parts, l.Axis.String()+" "+p)
			}
		}
	}
	if len(parts) == 0 {
		if p := marginPart(snap.Margin); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "margin learned: " + strings.Join(parts, "; ")
}

// marginPart is one margin's note, "" for none learned.
func marginPart(m quota.Margin) string {
	if storekit.OrNone(m) == storekit.NoMargin {
		return ""
	}
	note := fmt.Sprintf("burst ×%.2f, rate ×%.3f", m.Burst, m.Rate)
	if m.Refused > 0 {
		return note + fmt.Sprintf(", the provider refused ×%.2f", m.Refused)
	}
	return note + ", none refused"
}

// pausedNote says whether and until when a key is paused.
func pausedNote(snap quota.Snapshot) string {
	if !snap.PausedUntil.After(snap.At) {
		return ""
	}
	left := snap.PausedUntil.Sub(snap.At).Round(time.Second)
	if snap.PauseReason.Closes() {
		return fmt.Sprintf("closed until %s, in %s (%s)", snap.PausedUntil.UTC().Format(time.RFC3339), left, snap.PauseReason)
	}
	return fmt.Sprintf("paused %s (%s)", left, snap.PauseReason)
}

// joinNote joins the notes that say something with "; ".
func joinNote(notes ...string) string {
	var said []string
	for _, n := range notes {
		if n != "" {
			said = append(said, n)
		}
	}
	return strings.Join(said, "; ")
}

// bar draws available/capacity as a bar of width cells, e.g. "[#####.....]";
// a negative level (reservations queued) draws an empty bar marked "!".
// units formats a level: as it is when short (0.95, -19, 200000), else
// to two decimals.
func units(x float64) string {
	if s := strconv.FormatFloat(x, 'f', -1, 64); len(s) <= 8 {
		return s
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func bar(available float64, capacity int64, width int) string {
	return fill(available, float64(capacity), width)
}

// fill draws available of full as a bar width wide: [!....] below zero.
func fill(available, full float64, width int) string {
	if full <= 0 || width <= 0 {
		return ""
	}
	frac := available / full
	if frac < 0 {
		return "[!" + strings.Repeat(".", width-1) + "]"
	}
	n := int(min(frac, 1)*float64(width) + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
