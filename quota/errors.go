package quota

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalid is matched by every *InvalidError.
	ErrInvalid = errors.New("quota: invalid input")
	// ErrOversize is matched by every *OversizeError.
	ErrOversize = errors.New("quota: cost exceeds capacity")
	// ErrNoPolicy means the key has no policy in the store's Policies.
	ErrNoPolicy = errors.New("quota: no policy for key")
	// ErrUnknownTicket means Settle found no grant under the ticket.
	ErrUnknownTicket = errors.New("quota: unknown ticket")
	// ErrUnavailable wraps a failure to reach the store's backend.
	ErrUnavailable = errors.New("quota: store unavailable")
)

// InvalidError reports a bad field in a Key, Cost, Limit, Policy or
// Reservation: which field, the value given, what is wrong and the fix.
type InvalidError struct {
	Field   string
	Value   string
	Problem string
	Fix     string
}

func invalid(field, value, problem, fix string) *InvalidError {
	return &InvalidError{Field: field, Value: value, Problem: problem, Fix: fix}
}

// Error returns e.g. `quota: key.model "" is empty: set the model …`.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("quota: %s %q %s: %s", e.Field, e.Value, e.Problem, e.Fix)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// OversizeError reports a cost that can never fit an axis: more than the
// whole capacity open to the call's priority.
type OversizeError struct {
	Key  Key
	Axis Axis
	Cost int64
	// Capacity is the most the call's priority may ever be charged on
	// Axis: the effective capacity, less the PriorityReserve for Low
	// priority, rounded down. On Concurrency, Cost is 1 (a call's slot)
	// and Capacity the slots open to the priority.
	Capacity int64
	// Priority is the call's priority.
	Priority Priority
}

// Error names the axis, the cost and the capacity open to the priority.
func (e *OversizeError) Error() string {
	if e.Axis == Concurrency {
		return fmt.Sprintf("quota: %s: a call takes one concurrency slot but %s priority may hold %d: it can never run; raise the concurrency limit or lower the priority reserve",
			e.Key, e.Priority, e.Capacity)
	}
	if e.Priority == Low {
		return fmt.Sprintf("quota: %s costs %d %s but the capacity open to low priority is %d: it can never fit; lower the request's size (e.g. max tokens), raise the limit or lower the priority reserve",
			e.Key, e.Cost, e.Axis, e.Capacity)
	}
	return fmt.Sprintf("quota: %s costs %d %s but the capacity is %d: it can never fit; lower the request's size (e.g. max tokens) or raise the limit",
		e.Key, e.Cost, e.Axis, e.Capacity)
}

// Is makes errors.Is(err, ErrOversize) true.
func (e *OversizeError) Is(target error) bool { return target == ErrOversize }
