package activities

import (
	"errors"
	"fmt"

	"github.com/tollgate/tollgate"
)

// Application error types the activities return (as the Type of a
// non-retryable *temporal.ApplicationError), for workflows and the
// interceptor to match on.
const (
	// ErrTypeInvalidRequest marks a Request that can never succeed as given:
	// the same input would fail the same way on every attempt.
	ErrTypeInvalidRequest = "tollgate.InvalidRequest"
	// ErrTypeProviderNotConfigured marks a Request for a provider this worker
	// has no configuration (API key) for.
	ErrTypeProviderNotConfigured = "tollgate.ProviderNotConfigured"
	// ErrTypeMalformedResponse marks a 2xx answer that holds no answer: no
	// choices, no content, or a body the SDK could not decode. It is
	// tollgate.MalformedResponse.
	ErrTypeMalformedResponse = tollgate.MalformedResponse
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
