package quota

import (
	"context"
	"strconv"
	"time"
)

// Store keeps the budgets of a set of keys (its Policies) and decides, all or
// nothing across axes, whether a call may run now. Implementations are safe
// for concurrent use; quota/memory serves one process and quota/redis a fleet.
// quota/quotatest holds the behaviour every Store must show.
type Store interface {
	// Reserve charges r.Cost against every axis of r.Key under r.Ticket.
	//
	// Granted: the call may run; settle it with Settle. Queued: capacity
	// is reserved for the ticket in the future and Decision.Wait says when
	// it matures; calling Reserve again with the same ticket is idempotent
	// (the same maturity, or the grant once mature) and charges nothing
	// twice. Refused: no place was taken (the wait is past the policy's
	// MaxWait, a daily window is spent, or the key is paused), and
	// Decision.Wait says how long until trying again is worthwhile.
	//
	// Errors: *InvalidError for a bad request (ErrInvalid), ErrNoPolicy,
	// *OversizeError when the cost can never fit an axis (ErrOversize), and
	// ErrUnavailable wrapping the cause when the store cannot be reached.
	Reserve(ctx context.Context, r Reservation) (Decision, error)

	// Settle records a granted call's actual cost: the difference from the
	// charged estimate is charged or refunded, and its concurrency lease is
	// released. A daily window is corrected only while the day the estimate
	// was charged in lasts: a new day owes nothing for an earlier one's. What the provider reported with the call (s.Observed) is
	// applied in the same step, after the cost, as Observe applies it, and
	// whether or not the ticket is held. Settling a ticket the store does
	// not hold as granted (never reserved, already settled, or expired)
	// returns ErrUnknownTicket.
	Settle(ctx context.Context, s Settlement) error

	// Cancel gives up a ticket that will not run: a queued reservation is
	// refunded, a grant's estimate refunded and its lease released (daily
	// windows as Settle corrects them). Unknown tickets are not an error; an
	// empty ticket is an *InvalidError.
	Cancel(ctx context.Context, key Key, ticket string) error

	// Pause stops admissions on key until the given time (a provider's
	// Retry-After, or a spend cap's reset): every Reserve on the key, from
	// every process sharing the store, waits until then. A later Pause only
	// extends a pause, never shortens it.
	Pause(ctx context.Context, key Key, until time.Time, reason string) error

	// Observe lowers the key's levels to what the provider reported remains,
	// never raising them; with Policy.AdoptObservedLimits, a reported limit
	// also becomes the axis's capacity.
	Observe(ctx context.Context, key Key, obs []Observation) error

	// Snapshot reports the key's levels per axis, for status and metrics.
	Snapshot(ctx context.Context, key Key) (Snapshot, error)
}

// Reservation is one request to Reserve.
type Reservation struct {
	// Key is the budget charged (resolved through Policies.Lookup).
	Key Key
	// Ticket identifies the caller across attempts, e.g. an activity's
	// namespace/workflow/run/activity id. Required.
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
}

// Validate reports an *InvalidError naming the first bad field of r, or nil.
func (r Reservation) Validate() error {
	if err := r.Key.Validate(); err != nil {
		return err
	}
	if r.Ticket == "" {
		return invalid("ticket", "", "is empty", "pass a stable id for the caller, e.g. the activity's workflow and activity ids")
	}
	if len(r.Ticket) > MaxTicketLen {
		return invalid("ticket", r.Ticket[:32]+"…", "is longer than "+strconv.Itoa(MaxTicketLen)+" bytes", "use a shorter id or a hash of it")
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
}

// Validate reports an *InvalidError naming the first bad field of s, or nil.
func (s Settlement) Validate() error {
	if err := s.Key.Validate(); err != nil {
		return err
	}
	if err := ValidateTicket(s.Ticket); err != nil {
		return err
	}
	if err := s.Actual.Validate(); err != nil {
		return err
	}
	if s.Prompt < 0 {
		return invalid("prompt", strconv.FormatInt(s.Prompt, 10), "is negative", "pass the reservation's prompt, or 0")
	}
	return ValidateObservations(s.Observed)
}

// ValidateTicket reports an *InvalidError if ticket, given to Settle or
// Cancel, is empty, or nil.
func ValidateTicket(ticket string) error {
	if ticket == "" {
		return invalid("ticket", "", "is empty", "pass the ticket the call was reserved under")
	}
	return nil
}

// MaxTicketLen is the longest ticket a Store accepts, in bytes.
const MaxTicketLen = 512

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
	PauseReason string
	// Lease is set when the key has a Concurrency limit and the call was
	// granted: the lease expires at LeaseExpiry unless settled first.
	Lease       bool
	LeaseExpiry time.Time
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

// ValidateObservations reports an *InvalidError for the first observation
// of an unknown axis, or nil.
func ValidateObservations(obs []Observation) error {
	for _, o := range obs {
		if !o.Axis.Valid() {
			return invalid("observation.axis", o.Axis.String(), "is not a known axis", "report one of quota.Axes()")
		}
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
	// PausedUntil is zero when the key is not paused.
	PausedUntil time.Time
	PauseReason string
	// EstimateRatio is the key's learned ratio (1 when uncalibrated): what
	// its provider counts per estimated prompt token, applied to the
	// InputTokens and Tokens axes.
	EstimateRatio float64
}

// AxisLevel is one axis's state in a Snapshot.
type AxisLevel struct {
	Axis Axis
	// Capacity is the effective capacity (after headroom and adoption).
	Capacity int64
	// Available is what could be charged now: a bucket's level (negative
	// while queued reservations are outstanding), a window's remainder, or
	// free concurrency slots.
	Available float64
	// ResetAt is when a daily window resets; zero for other kinds.
	ResetAt time.Time
}

// Clock tells the time. Stores take one so tests can move time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock that reads time.Now.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
