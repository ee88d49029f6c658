package quota

import (
	"context"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/quota/internal/tickets"
)

// Store keeps the budgets of a set of keys (its Policies) and decides, all or
// nothing across axes, whether a call may run now. Implementations are safe
// for concurrent use; quota/memory serves one process and quota/redis a fleet.
// quota/quotatest holds the behaviour every Store must show.
type Store interface {
	// Reserve charges r.Cost against every axis of r.Key under r.Ticket:
	// of the budget Policies.Lookup resolves it to and, for a tenant whose
	// budget is nested in its account's (Policies.Account), of the
	// account's too, all or nothing. Such a call waits for the later of
	// the two and is refused when either refuses it (a spent daily window,
	// a pause, a wait past the shorter MaxWait); it takes a concurrency
	// slot of each. Tickets are unique per account: a ticket reserved
	// under one tenant (or none) is an *InvalidError under another.
	//
	// Granted: the call may run; settle it with Settle, and renew it with
	// Renew while it runs longer than Decision.GrantLeft. Queued: capacity
	// is reserved for the ticket in the future and Decision.Wait says when
	// it matures; calling Reserve again with the same ticket is idempotent
	// (the same maturity, or the grant once mature) and charges nothing
	// twice. In a line shared by tenants, places go by weighted fair share
	// of cost (Policies.Weight), not by arrival: a queued ticket's maturity
	// moves later when calls of other tenants are placed ahead of it, and
	// Reserve again tells the new one (never one earlier than first told). Refused: no place was taken (the wait is past the policy's
	// MaxWait, a daily window is spent, or the key is paused), and
	// Decision.Wait says how long until trying again is worthwhile.
	//
	// Reserving again under a ticket already granted (an earlier attempt
	// crashed, or could not settle) renews the grant as Renew does, unless
	// the key has been paused since: the grant then goes back in line (its
	// lease released, its charge kept) until the pause ends, and Reserve
	// answers Queued with Reason Paused. A ticket queued and never granted
	// lapses LeaseTTL after its maturity, and its charge is refunded: a
	// call that never ran costs nothing.
	//
	// Errors: *InvalidError for a bad request (ErrInvalid), ErrNoPolicy,
	// *OversizeError when the cost can never fit an axis (ErrOversize), and
	// ErrUnavailable wrapping the cause when the store cannot be reached.
	Reserve(ctx context.Context, r Reservation) (Decision, error)

	// Settle records a granted call's actual cost: the difference from the
	// charged estimate is charged or refunded on every budget the call was
	// charged to, and its concurrency leases are released. A daily window is corrected only while the day the estimate
	// was charged in lasts: a new day owes nothing for an earlier one's.
	// What the provider reported with the call (s.Observed) is applied in
	// the same step, after the cost, as Observe applies it, and whether or
	// not the ticket is held; for a tenant's call it is applied to the
	// account's budget (the tenant's own when its account has none), as is
	// the estimate ratio learned from it: a provider meters the account.
	//
	// Settling a ticket the store does not hold as granted returns
	// ErrUnknownTicket. When the ticket is gone (expired, never reserved,
	// or settled already) the call may still have run, so what s.Actual
	// exceeds s.Charged on each axis is charged all the same (an expired
	// grant's estimate stays charged; nothing is refunded); a ticket still
	// queued is left as it is.
	Settle(ctx context.Context, s Settlement) error

	// Cancel gives up a ticket that will not run: a queued reservation is
	// refunded, a grant's estimate refunded and its lease released (daily
	// windows as Settle corrects them). Unknown tickets are not an error; an
	// empty ticket is an *InvalidError.
	Cancel(ctx context.Context, key Key, ticket string) error

	// Renew extends a granted ticket, and its concurrency lease if it holds
	// one, to lapse ttl from now on the store's clock (0, or more than the
	// policy's LeaseTTL, means the policy's LeaseTTL), never sooner than
	// they already would. It returns how long the grant now has left. A
	// caller renews while its call runs, so that no call outlives its
	// lease. Errors: ErrUnknownTicket when the ticket is not held as
	// granted (its lease may be another call's by now), *InvalidError for
	// an empty ticket or a negative ttl, ErrNoPolicy, ErrUnavailable.
	Renew(ctx context.Context, key Key, ticket string, ttl time.Duration) (time.Duration, error)

	// Pause stops admissions on key for d from now, as the store's clock
	// reads it (a provider's Retry-After, or the time until a spend cap's
	// reset): every Reserve on the key, from every process sharing the
	// store, waits until then. A later Pause only extends a pause, never
	// shortens it; a d of zero or less does nothing. The pause is the
	// budget's that key resolves to (Policies.Lookup): an account's stops
	// every tenant nested in it, a tenant's own stops that tenant alone.
	// Callers pass a
	// duration, never a time read from their own clock, so a worker whose
	// clock is off neither loses nor lengthens the pause. The reason
	// PauseRateLimited, for a provider's 429 on a granted call, also
	// teaches the account's Margin (see burst.go) on every bucket axis,
	// RateLimitedOn(axis) on that axis alone, unless a pause of the
	// account is in force already; a reason that Closes the key shows
	// callers it will not reopen before d. An unknown reason is invalid.
	Pause(ctx context.Context, key Key, d time.Duration, reason PauseReason) error

	// Observe lowers the levels of the budget key resolves to
	// (Policies.Lookup) to what the provider reported remains, never
	// raising them; with Policy.AdoptObservedLimits, a reported limit also
	// becomes the axis's capacity. An account's levels bind every tenant
	// nested in it.
	Observe(ctx context.Context, key Key, obs []Observation) error

	// Snapshot reports the levels per axis of the budget key resolves to
	// (Policies.Lookup; Snapshot.Key names it), for status and metrics: a
	// tenant's own budget, not its account's.
	Snapshot(ctx context.Context, key Key) (Snapshot, error)
}

// Reservation is one request to Reserve.
type Reservation struct {
	// Key is the budget charged (resolved through Policies.Lookup).
	Key Key
	// Ticket identifies the caller across attempts, at most MaxTicketLen
	// bytes: e.g. TicketFor(namespace, workflow id, run id, activity id).
	// Required.
	Ticket string
	// Cost is the estimate charged now and corrected by Settle.
	Cost Cost
	// Priority decides whether the policy's PriorityReserve is open to it.
	Priority Priority
	// Prompt is how many of Cost's tokens are the prompt's as estimated
	// before tokenizing (characters/4), counted in Cost.InputTokens and
	// Cost.Tokens. Unless the policy's Calibration is Off, the store
	// charges them at the key's learned ratio instead (see Calibrate):
	// what its provider was seen to count per estimated prompt token.
	// Zero charges Cost as given.
	Prompt int64
	// LeaseTTL is how long a grant, and its concurrency lease, lives
	// unless renewed (Renew) or settled: at most the policy's LeaseTTL,
	// which 0 means. Choose it from how soon a crashed holder is noticed,
	// e.g. an activity's heartbeat timeout. For a Place, it is how long
	// the place waits for its call once mature.
	LeaseTTL time.Duration
	// Place takes a place in line for a call that is not ready to run
	// yet (its workflow schedules it once the place matures): the cost is
	// charged and the ticket queued as for any reservation, but Reserve
	// never grants it and takes no concurrency lease. It answers Queued,
	// with the Wait until the place matures (Reason Capacity), or with no
	// Wait and NoReason once it has; or Refused. A Reserve under the same
	// ticket without Place then grants the place once mature, taking the
	// lease. A place no call claims lapses LeaseTTL after it matures, and
	// its charge is refunded.
	Place bool
}

// Validate reports an *InvalidError naming the first bad field of r, or nil.
func (r Reservation) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	if r.Ticket == "" {
		return invalid("ticket", "", "is empty", "pass a stable id for the caller, e.g. quota.TicketFor(namespace, workflow id, run id, activity id)")
	}
	if err := validateTicket(r.Ticket); err != nil {
		return err
	}
	if r.LeaseTTL < 0 {
		return invalid("lease_ttl", r.LeaseTTL.String(), "is negative", "use 0 for the policy's LeaseTTL or a positive duration")
	}
	if r.Prompt < 0 {
		return invalid("prompt", strconv.FormatInt(r.Prompt, 10), "is negative", "pass the prompt's estimated tokens, or 0")
	}
	if r.Priority != Normal && r.Priority != Low {
		return invalid("priority", strconv.Itoa(int(r.Priority)), "is not a known priority", "use quota.Normal or quota.Low")
	}
	return r.Cost.Validate()
}

// Settlement is one request to Settle.
type Settlement struct {
	// Key and Ticket name the granted reservation.
	Key    Key
	Ticket string
	// Actual is what the call cost; the estimate charged by Reserve is
	// corrected to it.
	Actual Cost
	// Observed is what the provider reported in the call's response, if
	// anything: applied as Observe applies it.
	Observed []Observation
	// Counted says Actual is the provider's own count of the call (the
	// usage in its answer), not an estimate. With Prompt, the reservation's
	// Prompt, the store then learns the key's estimate ratio from
	// Actual.InputTokens / Prompt, whether or not the ticket is held.
	Counted bool
	Prompt  int64
	// Charged is what the ticket was charged, as Reserve's Decision.Charged
	// said. It matters only when the ticket is gone (its grant expired):
	// the store then charges what Actual exceeds it by. Zero charges
	// Actual whole.
	Charged Cost
}

// Validate reports an *InvalidError naming the first bad field of s, or nil.
func (s Settlement) Validate() error {
	if err := s.Key.Validate(); err != nil {
		return err
	}
	if err := validateTicket(s.Ticket); err != nil {
		return err
	}
	if err := s.Actual.Validate(); err != nil {
		return err
	}
	if err := s.Charged.Validate(); err != nil {
		return err
	}
	if s.Prompt < 0 {
		return invalid("prompt", strconv.FormatInt(s.Prompt, 10), "is negative", "pass the reservation's prompt, or 0")
	}
	for _, o := range s.Observed {
		if err := o.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// validateTicket reports an *InvalidError if ticket is empty or longer
// than MaxTicketLen, or nil.
func validateTicket(ticket string) error {
	if value, problem, fix, bad := tickets.Check(ticket); bad {
		return invalid("ticket", value, problem, fix)
	}
	return nil
}

// MaxTicketLen is the longest ticket a Store accepts, in bytes. Tickets
// made by TicketFor are far shorter, whatever the identity's length.
const MaxTicketLen = tickets.MaxLen

// Outcome is what Reserve decided.
type Outcome uint8

// The outcomes.
const (
	// Granted: run the call now.
	Granted Outcome = iota + 1
	// Queued: capacity is reserved for the ticket; come back after Wait.
	Queued
	// Refused: nothing was reserved; come back after Wait.
	Refused
)

// String returns "granted", "queued" or "refused".
func (o Outcome) String() string {
	switch o {
	case Granted:
		return "granted"
	case Queued:
		return "queued"
	case Refused:
		return "refused"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Reason says why a decision was not Granted.
type Reason uint8

// The reasons.
const (
	// NoReason accompanies a grant.
	NoReason Reason = iota
	// Capacity: a bucket axis needs time to refill (Axis names it).
	Capacity
	// DailyLimit: a daily window is spent until its reset (Axis names it).
	DailyLimit
	// ConcurrencyFull: every concurrency slot is leased.
	ConcurrencyFull
	// Paused: the key is paused (Decision.PauseReason says why).
	Paused
	// Unavailable: the store could not be reached and its failure policy
	// refused the call.
	Unavailable
	// BudgetSpent: a money budget (SpendPerDay, SpendPerMonth) has no room
	// for the call's price until its reset (Axis names it,
	// Decision.Budget the budget).
	BudgetSpent
)

// String returns the reason's name as used in metrics.
func (r Reason) String() string {
	switch r {
	case NoReason:
		return "none"
	case Capacity:
		return "capacity"
	case DailyLimit:
		return "daily_limit"
	case ConcurrencyFull:
		return "concurrency"
	case Paused:
		return "paused"
	case Unavailable:
		return "unavailable"
	case BudgetSpent:
		return "budget_spent"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Decision is Reserve's answer.
type Decision struct {
	Outcome Outcome
	// Wait is, for Queued, the time until the reservation matures and, for
	// Refused, the time until trying again is worthwhile. Zero when Granted.
	Wait time.Duration
	// Reason and Axis say what binds when not Granted.
	Reason Reason
	Axis   Axis
	// PauseReason is the reason given to Pause, when Reason is Paused.
	PauseReason PauseReason
	// Budget is, for DailyLimit and BudgetSpent, the budget whose window
	// is spent: the call's tenant's own, or its account's.
	Budget Key
	// Lease is set when the key has a Concurrency limit and the call was
	// granted: the lease expires at LeaseExpiry unless renewed or settled
	// first.
	Lease       bool
	LeaseExpiry time.Time
	// Start is, for Granted, how long the call should wait before it
	// reaches the provider, on the store's clock: the time until the start
	// gate of every bucket axis (see Limit.Burst) holds it, so that calls
	// granted together start no closer than the limits' bursts and rates
	// space them. The gate is charged at the grant, as of that start; a
	// caller that cannot wait that long in process comes back under the
	// same ticket shortly before it (the grant stays its own, and a
	// Reserve again answers the Start left). Zero to start at once. Like
	// Wait, it counts from the moment Reserve returns: a store whose
	// replies travel takes out what a late reply spent on the way.
	Start time.Duration
	// Delay is, for Granted, the part of Start the store adds to every
	// grant so that calls start on the gates' schedule whatever their
	// replies' trips took (see the Redis store's Options.StartDelay): a
	// grant whose Start is no more than Delay found its gates open.
	Delay time.Duration
	// GrantLeft is, for Granted, how long the grant (its ticket, and its
	// lease with Lease) lives unless renewed or settled, on the store's
	// clock: renew it well within that (see Store.Renew).
	GrantLeft time.Duration
	// Charged is what the ticket holds charged (the estimate after
	// calibration), for Granted and Queued: what a call that cannot report
	// its usage is settled at.
	Charged Cost
}

// Observation is what a provider reported about one axis in a response's
// headers. A negative Limit or Remaining means "not reported".
type Observation struct {
	Axis Axis
	// Limit is the provider's capacity for the axis, or -1.
	Limit int64
	// Remaining is what the provider says is left now, or -1.
	Remaining int64
	// Reset is how long until the provider's bucket is full again (or the
	// window resets), 0 when not reported. The stores do not use it: a
	// lowered level refills at the policy's own rate, which the provider's
	// reset only restates for a bucket refilling continuously.
	Reset time.Duration
}

// Validate reports an *InvalidError for an observation of an unknown axis.
func (o Observation) Validate() error {
	if !o.Axis.Valid() {
		return invalid("observation.axis", o.Axis.String(), "is not a known axis", "report one of quota.Axes()")
	}
	return nil
}

// Snapshot is a key's state at one moment.
type Snapshot struct {
	Key Key
	// At is the store's clock when the snapshot was taken.
	At time.Time
	// Axes reports each limited axis, in Axes() order.
	Axes []AxisLevel
	// PausedUntil is zero when the key's budget is not paused (a tenant's
	// own pause; its account's shows in the account's snapshot).
	PausedUntil time.Time
	PauseReason PauseReason
	// EstimateRatio is the key's learned ratio (1 when uncalibrated): what
	// its provider counts per estimated prompt token, applied to the
	// InputTokens and Tokens axes. A tenant nested in its account's budget
	// reports the account's, which its calls are charged at.
	EstimateRatio float64
	// Margin is what the key has learned of its provider's limiter (see
	// Margin), at its most cautious: the least burst and the least rate
	// of its bucket axes' margins (AxisLevel.Margin), with the burst
	// refused of the axis whose burst is least; 1 for both parts before
	// any lesson. A tenant nested in its account's budget reports the
	// account's.
	Margin Margin
	// Unreadable counts the ticket records and queue entries of a form
	// the store could not read (written by a release it does not know),
	// which it dropped, since the key's state began: nonzero means a mixed
	// fleet met a format it should not have (see the README's upgrades).
	Unreadable int64
	// Line is what waits in the line for capacity, per tenant, sorted by
	// Tenant: for an account's budget, every tenant's tickets (the
	// untenanted ones under ""); for a tenant's own budget nested in its
	// account's, that tenant's alone. Empty when nothing waits.
	Line []TenantLine
}

// TenantLine is one tenant's share of a line in a Snapshot.
type TenantLine struct {
	// Tenant is the tenant's name, "" for untenanted calls.
	Tenant string
	// Tickets is how many of its tickets wait for capacity.
	Tickets int
	// Cost is what they were charged, together.
	Cost Cost
}

// AxisLevel is one axis's state in a Snapshot.
type AxisLevel struct {
	Axis Axis
	// Capacity is the effective capacity (after headroom and adoption).
	Capacity int64
	// Burst is, for a bucket, how much of it may start at once: its start
	// gate's capacity, after the learned margin (see Limit.Burst).
	Burst float64
	// Available is what could be charged now: a bucket's level (negative
	// while queued reservations are outstanding), a window's remainder, or
	// free concurrency slots.
	Available float64
	// ResetAt is when a daily or monthly window resets; zero for other
	// kinds.
	ResetAt time.Time
	// Margin is, for a bucket of an account's budget, what the axis has
	// learned of its provider's limiter (see Margin; Burst above is its
	// gate after it): 1 for both parts before any lesson. Zero for other
	// kinds, and for a tenant's own budget nested in an account's, whose
	// calls start at the account's gates.
	Margin Margin
}

// Clock tells the time. Stores take one so tests can move time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock that reads time.Now.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
