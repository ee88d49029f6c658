package interceptor

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/quota/price"
)

// Defaults for Options' zero fields.
const (
	DefaultRateLimitWait     = 5 * time.Second
	DefaultEscalateAfter     = 3
	DefaultTransientBudget   = 5
	DefaultBackoffBase       = time.Second
	DefaultBackoffCap        = 30 * time.Second
	DefaultStoreRetry        = time.Second
	DefaultSpendCapPause     = time.Hour
	DefaultRetryMargin       = 25 * time.Millisecond
	DefaultPaceWithin        = 250 * time.Millisecond
	minNextRetryDelay        = 10 * time.Millisecond
	defaultStoreCallDeadline = 5 * time.Second
)

// ChargeFunc tells the interceptor what a call of one activity type costs,
// from the activity's decoded arguments. Use it (Options.Activities) to
// govern activities whose input type you cannot make implement
// quota.Governed.
type ChargeFunc func(args []any) (quota.Charge, error)

// Options configure New. Zero fields take the documented defaults; Store is
// required.
type Options struct {
	// Store holds the shared budgets. Required.
	Store quota.Store

	// Activities governs activity types by name, in addition to every
	// activity whose first argument implements quota.Governed. With
	// WaitInWorkflow the workflow calls the ChargeFunc too (as it calls
	// QuotaCharge), so it must depend on its arguments alone.
	Activities map[string]ChargeFunc

	// Fallbacks maps a target ("provider/model" or
	// "provider/account/model") to the backups to try, in order, when calls
	// to it are rate limited too often, closed by a spend cap, or would
	// wait past the activity's deadline. A target with no entry retries as
	// the provider says until the activity's ScheduleToClose. Only calls
	// whose input implements tollgate.Retargetable (activities.Request
	// does) can move to a backup; others ignore their chain.
	Fallbacks map[string][]string

	// WaitInWorkflow makes a governed call take its place in line before
	// its activity is scheduled: a local activity reserves the call's cost
	// and, when the call must wait, the workflow sleeps on a durable timer
	// until its place matures. The activity then runs once instead of
	// being refused once first, at the price of a marker in history for
	// every governed call (and a timer for every wait). The place holds no
	// concurrency slot: the activity takes one when it starts. A place
	// whose activity has not started within its ScheduleToStart timeout
	// (a minute without one) of maturing lapses and is refunded, so a
	// workflow terminated meanwhile gives it back. Refusals that are not a
	// place in line (a paused key, a daily limit, a wait past the policy's
	// MaxWait or the activity's deadline) still end attempts as usual. It
	// applies to workflows that start with it on: keep it on until they
	// have finished, as their histories hold its waits. Default false.
	WaitInWorkflow bool

	// Pools are the keys served by several members (pool.New): a
	// call on a pool's key is admitted on the member that can run it
	// soonest (pool.Admit) and runs there, its input retargeted to
	// the member's account and model (tollgate.Retargetable, which
	// activities.Request implements: the worker's configuration for that
	// account gives its key and endpoint). A member that rate limits or
	// closes (a spend cap) is paused as any key is, and the call is
	// retried at once on another; only when every member is closed does
	// the call fail or escalate (Fallbacks of the pool's own target).
	// Default: none.
	Pools pool.Set

	// Prices is the price table money budgets charge by (quota.SpendPerDay,
	// quota.SpendPerMonth): a call whose provider and model it prices is
	// charged Price.Estimate of its estimate on Reserve and settled at
	// Price.Spend of its usage (price.Billed, with its cached tokens). A
	// call it does not price is charged no money, which a budget with a
	// money limit refuses (tollgate.InvalidRequest naming cost.spend).
	// Default: none (price.Shipped is the worker's default).
	Prices price.Table
	// FallbackWhenSpent names the budgets (accounts' or tenants' keys, as
	// quota.Decision.Budget names them) whose calls, once that budget's
	// money is spent, move to their target's fallback chain (Fallbacks)
	// instead of failing with tollgate.BudgetExhausted. Default: none.
	FallbackWhenSpent []quota.Key

	// RateLimitWait is the wait after a rate limit or overload whose answer
	// gave no hint (no Retry-After, retry-after-ms or Gemini retryDelay).
	// Default 5 s.
	RateLimitWait time.Duration
	// EscalateAfter is how many rate-limited answers a call retries before
	// the next one escalates to a backup. Default 3 (the 4th escalates).
	EscalateAfter int
	// TransientBudget is how many transport failures a call retries before
	// failing for good. Default 5.
	TransientBudget int
	// BackoffBase and BackoffCap bound the full-jitter backoff of transient
	// failures: attempt n waits a random time in [0, min(cap, base·2ⁿ⁻¹)).
	// Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// StoreRetry is the wait before retrying when the store cannot be
	// reached. Default 1 s.
	StoreRetry time.Duration
	// RetryMargin is added to waits ended by a retry that is not due back
	// early to wait the rest in process (a paused key, a closed window):
	// the provider's own clock reads a call a few milliseconds after
	// Tollgate's, so a call back the instant its wait ends could arrive a
	// hair early and be refused. A place in line is waited out in process
	// to the moment instead: the grant's start (quota.Decision.Start)
	// spaces it from the call before. Default 25 ms.
	RetryMargin time.Duration
	// PaceWithin is the longest a call waits in its activity, holding its
	// worker slot, for its place in line to mature or for its start
	// (quota.Decision.Start: the store spaces the starts of calls by the
	// limits' bursts, see quota.Limit.Burst). A scheduled retry starts a
	// call tens to hundreds of milliseconds after it is due, and
	// unevenly; a wait in process is as precise as the worker's timer,
	// which a provider enforcing its limit per second needs. Longer waits
	// end the attempt with a retry due nine tenths of PaceWithin before
	// the place matures (or the start comes), so the call is back in time
	// to wait the rest here; a grant is kept meanwhile. Default 250 ms.
	PaceWithin time.Duration
	// SpendCapPause is how long a key is paused after a spend cap whose
	// reset time the provider did not say. Default 1 h.
	SpendCapPause time.Duration

	// Classifier reads provider answers. Its MaxRetryAfter is the one cap
	// on the provider's Retry-After, for the wait of a retry and the pause
	// of the key alike. Zero uses classify's defaults
	// (classify.DefaultMaxRetryAfter, 60 s).
	Classifier classify.Classifier

	// Meter records Tollgate's metrics. Default: a no-op meter.
	Meter metric.Meter
	// Tenants are the tenants whose calls the metrics count under their
	// own name (the tenant attribute); every other tenant's are counted
	// under OtherTenants, so a product serving many customers keeps a
	// bounded set of series. The key attribute names the account
	// (provider/account/model) either way. The worker names the tenants
	// of its policies file. Default: none.
	Tenants []string
	// Logger receives the few events worth a line (a spend cap, a store
	// outage). Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time. Default quota.SystemClock.
	Clock quota.Clock
}

func (o Options) withDefaults() (Options, error) {
	if o.Store == nil {
		return o, errors.New("interceptor: Options.Store is nil: pass a quota.Store (memory.New for one worker, redis.New for a fleet)")
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"RateLimitWait", &o.RateLimitWait, DefaultRateLimitWait},
		{"BackoffBase", &o.BackoffBase, DefaultBackoffBase},
		{"BackoffCap", &o.BackoffCap, DefaultBackoffCap},
		{"StoreRetry", &o.StoreRetry, DefaultStoreRetry},
		{"SpendCapPause", &o.SpendCapPause, DefaultSpendCapPause},
		{"RetryMargin", &o.RetryMargin, DefaultRetryMargin},
		{"PaceWithin", &o.PaceWithin, DefaultPaceWithin},
	} {
		if *f.v < 0 {
			return o, fmt.Errorf("interceptor: Options.%s is %s: use a positive duration, or 0 for the default %s", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.EscalateAfter < 0 {
		return o, fmt.Errorf("interceptor: Options.EscalateAfter is %d: use a positive count, or 0 for the default %d", o.EscalateAfter, DefaultEscalateAfter)
	}
	if o.EscalateAfter == 0 {
		o.EscalateAfter = DefaultEscalateAfter
	}
	if o.TransientBudget < 0 {
		return o, fmt.Errorf("interceptor: Options.TransientBudget is %d: use a positive count, or 0 for the default %d", o.TransientBudget, DefaultTransientBudget)
	}
	if o.TransientBudget == 0 {
		o.TransientBudget = DefaultTransientBudget
	}
	if o.BackoffCap < o.BackoffBase {
		return o, fmt.Errorf("interceptor: Options.BackoffCap (%s) is below BackoffBase (%s): raise the cap", o.BackoffCap, o.BackoffBase)
	}
	for name, fn := range o.Activities {
		if name == "" || fn == nil {
			return o, fmt.Errorf("interceptor: Options.Activities[%q]: give each activity type name a non-nil ChargeFunc", name)
		}
	}
	for from, chain := range o.Fallbacks {
		if _, err := tollgate.ParseTarget(from); err != nil {
			return o, fmt.Errorf("interceptor: Options.Fallbacks key: %w", err)
		}
		if len(chain) == 0 {
			return o, fmt.Errorf("interceptor: Options.Fallbacks[%q] is empty: list at least one backup or remove the entry", from)
		}
		for _, to := range chain {
			if _, err := tollgate.ParseTarget(to); err != nil {
				return o, fmt.Errorf("interceptor: Options.Fallbacks[%q]: %w", from, err)
			}
		}
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("tollgate")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = quota.SystemClock{}
	}
	return o, nil
}

// backups returns the fallback chain configured for key's target.
func (o Options) backups(key quota.Key) []string {
	t := tollgate.Target{Provider: key.Provider, Account: key.Account, Model: key.Model}
	if chain, ok := o.Fallbacks[t.String()]; ok {
		return chain
	}
	t.Account = ""
	return o.Fallbacks[t.String()]
}

// comeBack is how long before its place matures (or its start comes) a
// call that ends its attempt to wait is due back: nine tenths of
// PaceWithin. Temporal starts a retry, or a workflow timer's activity,
// late and unevenly (a traced bench/fleet -window 0.0167 run, on the
// embedded server: a median of about 120 ms past due, a tenth over 250 ms),
// and a call back in time waits the rest in process, to the moment,
// where one back late leaves the provider's window idle: a limit
// enforced per second banks nothing for it.
func (o *Options) comeBack() time.Duration { return o.PaceWithin - o.PaceWithin/10 }
