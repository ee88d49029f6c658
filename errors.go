package tollgate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
)

// Error types of the *temporal.ApplicationError values Tollgate returns, as
// seen by workflow code (ApplicationError.Type) and in the Temporal UI.
const (
	// QuotaRefused: the shared budget had no room now. Retryable, Benign
	// category; NextRetryDelay is when the call's reserved place matures.
	QuotaRefused = "tollgate.QuotaRefused"
	// RateLimited: the provider answered 429 or overloaded (503/529).
	// Retryable; NextRetryDelay honours the provider's Retry-After (capped).
	RateLimited = "tollgate.RateLimited"
	// RateLimitEscalation: the call was rate limited too often (or would
	// wait past its deadline) and a backup model exists. Not retryable;
	// details are an EscalationDetails. The workflow interceptor turns it
	// into a FallbackWorkflow child.
	RateLimitEscalation = "tollgate.RateLimitEscalation"
	// SpendCapReached: the account's spend cap is reached. Not retryable;
	// the key is paused fleet-wide until the cap resets.
	SpendCapReached = "tollgate.SpendCapReached"
	// DailyQuotaExhausted: a per-day quota is spent. Not retryable; the key
	// is paused until the daily reset.
	DailyQuotaExhausted = "tollgate.DailyQuotaExhausted"
	// BudgetExhausted: a money budget (quota.SpendPerDay, SpendPerMonth)
	// has no room for the call's price until its period resets. Not
	// retryable; details are a BudgetDetails naming the budget and its
	// reset.
	BudgetExhausted = "tollgate.BudgetExhausted"
	// Transient: a connection failure, timeout or 5xx. Retryable with full
	// jitter backoff within its own budget.
	Transient = "tollgate.Transient"
	// TransientBudgetExhausted: more transient failures than the budget.
	// Not retryable.
	TransientBudgetExhausted = "tollgate.TransientBudgetExhausted"
	// QuotaWaitExceedsDeadline: the wait for budget would pass the
	// activity's ScheduleToClose deadline and there is no backup. Not
	// retryable.
	QuotaWaitExceedsDeadline = "tollgate.QuotaWaitExceedsDeadline"
	// CostExceedsCapacity: the call's cost can never fit the key's limits.
	// Not retryable.
	CostExceedsCapacity = "tollgate.CostExceedsCapacity"
	// InvalidRequest: the activity input can never succeed as given: it
	// could not be charged (bad key or cost), or the activities package
	// refused it (a missing field, an unknown provider). The same input
	// would fail the same way on every attempt, so it is not retryable.
	InvalidRequest = "tollgate.InvalidRequest"
	// ProviderNotConfigured: the request names a provider this worker has
	// no configuration (API key) for. Not retryable.
	ProviderNotConfigured = "tollgate.ProviderNotConfigured"
	// ProviderRejected: the provider refused the request for a reason a
	// retry cannot fix (bad request, auth, not found, context too long).
	// Not retryable; the message carries the provider's code.
	ProviderRejected = "tollgate.ProviderRejected"
	// MalformedResponse: the provider answered 2xx with a body that holds
	// no answer (no choices, no content, not the API's JSON). Not
	// retryable: it is neither a rate limit nor a transient failure, so no
	// retry budget would bound it; the message names the provider, model
	// and request id.
	MalformedResponse = "tollgate.MalformedResponse"
	// StoreUnavailable: the quota store could not be reached and the
	// failure policy is closed. Retryable.
	StoreUnavailable = "tollgate.StoreUnavailable"
	// FallbackChainExhausted: every model of a fallback chain failed. Not
	// retryable; the message names every model tried.
	FallbackChainExhausted = "tollgate.FallbackChainExhausted"
)

// EscalationDetails is the detail of a RateLimitEscalation error, recorded
// in workflow history so that a replay reads the same backup.
type EscalationDetails struct {
	// From is the target ("provider/model") that was given up on.
	From string `json:"from"`
	// Backups is the rest of the chain to try, in order.
	Backups []string `json:"backups"`
	// Reason is "rate_limited", "deadline", "spend_cap" or "daily_quota".
	Reason string `json:"reason"`
	// RateLimited is how many provider rate-limit answers the call had.
	RateLimited int `json:"rate_limited"`
	// Wait is the wait the store or provider asked for, when Reason is
	// "deadline".
	Wait time.Duration `json:"wait,omitempty"`
}

// BudgetDetails is the detail of a BudgetExhausted error.
type BudgetDetails struct {
	// Budget is the spent budget's key ("provider/account/model" and
	// "/tenant" for a tenant's own).
	Budget string `json:"budget"`
	// Axis is "spend_per_day" or "spend_per_month".
	Axis string `json:"axis"`
	// ResetAt is when the budget's period starts again.
	ResetAt time.Time `json:"reset_at"`
}

// Escalation reports whether err is, or has in its chain, a
// RateLimitEscalation application error and returns its details.
func Escalation(err error) (EscalationDetails, bool) {
	appErr := findType(err, RateLimitEscalation)
	if appErr == nil {
		return EscalationDetails{}, false
	}
	var d EscalationDetails
	if err := appErr.Details(&d); err != nil {
		return EscalationDetails{}, false
	}
	return d, true
}

// IsType reports whether err is, or has in its chain, an application error
// of the given Tollgate type. Unlike errors.As, it looks past application
// errors of other types (such as a workflow's own wrapping).
func IsType(err error, errType string) bool {
	return findType(err, errType) != nil
}

func findType(err error, errType string) *temporal.ApplicationError {
	for err != nil {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			return nil
		}
		if appErr.Type() == errType {
			return appErr
		}
		err = appErr.Unwrap()
	}
	return nil
}

// Target names a model to run a call on: "provider/model", optionally
// "provider/account/model".
type Target struct {
	Provider string
	Account  string
	Model    string
}

// String returns "provider/model" or "provider/account/model".
func (t Target) String() string {
	if t.Account == "" {
		return t.Provider + "/" + t.Model
	}
	return t.Provider + "/" + t.Account + "/" + t.Model
}

// ParseTarget parses "provider/model" or "provider/account/model".
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, "/")
	if slices.Contains(parts, "") {
		parts = nil
	}
	switch len(parts) {
	case 2:
		return Target{Provider: parts[0], Model: parts[1]}, nil
	case 3:
		return Target{Provider: parts[0], Account: parts[1], Model: parts[2]}, nil
	}
	return Target{}, fmt.Errorf("tollgate: target %q: want \"provider/model\" or \"provider/account/model\", e.g. \"anthropic/claude-3-5-haiku-latest\"", s)
}

// Retargetable is implemented by a governed activity input that can be sent
// to another model (activities.Request does). Fallbacks need it: the
// activity interceptor applies the target of a fallback step to the input
// before charging and running it.
type Retargetable interface {
	Retarget(t Target) (any, error)
}
