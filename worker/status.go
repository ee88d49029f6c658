package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
)

// StatusTimeout bounds how long Status waits for Redis to answer before it
// reports Redis unreachable.
const StatusTimeout = 5 * time.Second

// Status prints each policy key's levels per axis to out, read from the
// store cfg configures. With REDIS_URL it reads Redis itself, never through
// the STORE_FAILURE fallback a worker uses (whose stand-in buckets would show
// levels nobody shares), and returns an error naming REDIS_URL when Redis
// does not answer PING within StatusTimeout. With no REDIS_URL the store is
// a fresh memory store, so the levels shown are full: Status says so. It
// returns Validate's error for a bad cfg and the store's error when a key
// cannot be read.
func Status(ctx context.Context, cfg Config, out io.Writer, logger *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	w := &Worker{cfg: cfg, logger: logger}
	b, err := w.loadBudgets()
	if err != nil {
		return err
	}
	keys := b.Policies.Keys()
	if cfg.RedisURL == "" {
		store, err := memory.New(b.Policies, memory.Options{})
		if err != nil {
			return fmt.Errorf("worker: memory store: %w", err)
		}
		fmt.Fprintln(out, "store: process memory of this command (no REDIS_URL): every bucket is full; set REDIS_URL to read the fleet's levels")
		return WriteStatus(ctx, out, store, keys)
	}
	store, rdb, err := openRedis(cfg, b.Policies)
	if err != nil {
		return err
	}
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return fmt.Errorf("worker: status: Redis at REDIS_URL (-redis-url) %q is unreachable: %w (start Redis, or set REDIS_URL to the fleet's Redis; status reads Redis only, never a fallback)",
			redactURL(cfg.RedisURL), err)
	}
	fmt.Fprintln(out, "store: Redis", redactURL(cfg.RedisURL))
	return WriteStatus(ctx, out, store, keys)
}

// WriteStatus prints a table of keys' levels from store: per axis, the
// effective capacity, what is available now, the estimate ratio learned for
// axes that count prompt tokens, and when a daily window resets; per key,
// whether and until when it is paused or closed (until a spend cap or daily
// quota resets).
func WriteStatus(ctx context.Context, out io.Writer, store quota.Store, keys []quota.Key) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tAXIS\tCAPACITY\tAVAILABLE\tFILL\tESTIMATE\tNOTE")
	for _, k := range keys {
		snap, err := store.Snapshot(ctx, k)
		if err != nil {
			tw.Flush()
			return fmt.Errorf("worker: status of %s: %w", k, err)
		}
		note := pauseNote(snap)
		if len(snap.Axes) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", k, note)
		}
		for i, l := range snap.Axes {
			n := ""
			if i == 0 {
				n = note
			}
			if !l.ResetAt.IsZero() {
				n = joinNote(n, "resets "+l.ResetAt.UTC().Format(time.RFC3339))
			}
			estimate := "-"
			if l.Axis.Calibrated() {
				estimate = "×" + strconv.FormatFloat(snap.EstimateRatio, 'f', 2, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", k, l.Axis, l.Capacity,
				strconv.FormatFloat(l.Available, 'f', 1, 64), Bar(l.Available, l.Capacity, 10), estimate, n)
		}
	}
	return tw.Flush()
}

// pauseNote says whether and until when a key is paused: for a while after
// a provider's 429, or closed until a spend cap or daily quota resets (a
// Gemini key until midnight in Los Angeles), with the time it reopens.
func pauseNote(snap quota.Snapshot) string {
	if !snap.PausedUntil.After(snap.At) {
		return ""
	}
	left := snap.PausedUntil.Sub(snap.At).Round(time.Second)
	switch snap.PauseReason {
	case classify.SpendCap.String(), classify.DailyQuota.String():
		return fmt.Sprintf("closed until %s, in %s (%s)", snap.PausedUntil.UTC().Format(time.RFC3339), left, snap.PauseReason)
	}
	return fmt.Sprintf("paused %s (%s)", left, snap.PauseReason)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Bar draws available/capacity as a bar of width cells, e.g. "[#####.....]";
// a negative level (reservations queued) draws an empty bar marked "!".
func Bar(available float64, capacity int64, width int) string {
	if capacity <= 0 || width <= 0 {
		return ""
	}
	frac := available / float64(capacity)
	mark := byte('#')
	if frac < 0 {
		frac, mark = 0, '!'
	}
	frac = min(frac, 1)
	n := int(frac*float64(width) + 0.5)
	b := make([]byte, 0, width+2)
	b = append(b, '[')
	for i := range width {
		if i < n {
			b = append(b, '#')
		} else if mark == '!' && i == 0 {
			b = append(b, '!')
		} else {
			b = append(b, '.')
		}
	}
	return string(append(b, ']'))
}
