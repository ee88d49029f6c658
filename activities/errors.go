package activities

import (
	"errors"
	"fmt"
)

// ErrInvalidRequest is matched (errors.Is) by every *InvalidRequestError.
var ErrInvalidRequest = errors.New("activities: invalid request")

// InvalidRequestError reports a bad field of a Request or Config: which
// field, the value given, what is wrong and the fix.
type InvalidRequestError struct {
	Field   string
	Value   string
	Problem string
	Fix     string
}

// Error returns e.g. `activities: request.model "" is empty: set …`.
func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("activities: %s %q %s: %s", e.Field, e.Value, e.Problem, e.Fix)
}

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *InvalidRequestError) Is(target error) bool { return target == ErrInvalidRequest }

func invalid(field, value, problem, fix string) error {
	return &InvalidRequestError{Field: field, Value: value, Problem: problem, Fix: fix}
}
