package storekit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tickets"
)

// LeaseTTL returns how long a grant asked to live ttl does under a
// policy's lease TTL (quota.Policy.LeaseTTL, with its default): ttl, unless
// it is zero or longer than policyTTL, which it is then.
func LeaseTTL(policyTTL, ttl time.Duration) time.Duration {
	if ttl <= 0 || ttl > policyTTL {
		return policyTTL
	}
	return ttl
}

// ValidateTicket reports an *quota.InvalidError if ticket, given to a
// Store's Cancel or Renew, is empty or longer than quota.MaxTicketLen, or
// nil: the check quota.Reservation.Validate and quota.Settlement.Validate
// make of theirs.
func ValidateTicket(ticket string) error {
	if value, problem, fix, bad := tickets.Check(ticket); bad {
		return invalid("ticket", value, problem, fix)
	}
	return nil
}

// ValidateRenewal reports an error for a ticket ValidateTicket rejects or
// a negative ttl, or nil.
func ValidateRenewal(ticket string, ttl time.Duration) error {
	if err := ValidateTicket(ticket); err != nil {
		return err
	}
	if ttl < 0 {
		return invalid("ttl", ttl.String(), "is negative", "use 0 for the policy's LeaseTTL or a positive duration")
	}
	return nil
}

// ValidateObservations reports a *quota.InvalidError for the first
// observation of an unknown axis, or nil.
func ValidateObservations(obs []quota.Observation) error {
	for _, o := range obs {
		if err := o.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// NoPolicyError wraps quota.ErrNoPolicy with the key.
func NoPolicyError(k quota.Key) error {
	return fmt.Errorf("%w %s: add a policy for it or leave it ungoverned", quota.ErrNoPolicy, k)
}

// WrongTenantError reports a ticket used under key whose tenant is not the
// one it was reserved under (held): the tickets of an account and of its
// tenants share one namespace, and a ticket belongs to one of them.
func WrongTenantError(key quota.Key, ticket, held string) *quota.InvalidError {
	name := func(t string) string {
		if t == "" {
			return "no tenant"
		}
		return "tenant " + strconv.Quote(t)
	}
	return invalid("ticket", ticket, fmt.Sprintf("was reserved under %s, not %s (%s)", name(held), name(key.Tenant), key),
		"use the key the ticket was reserved under, tenant included")
}

func invalid(field, value, problem, fix string) *quota.InvalidError {
	return &quota.InvalidError{Field: field, Value: value, Problem: problem, Fix: fix}
}

// ValidateSpend reports a *quota.InvalidError when a budget of policies
// (the call's own and its account's) limits money but c has tokens and no
// Spend: the caller did not price the call, and the budget would charge it
// nothing.
func ValidateSpend(c quota.Cost, policies ...quota.Policy) error {
	if c.Spend > 0 || c.Tokens == 0 && c.InputTokens == 0 && c.OutputTokens == 0 {
		return nil
	}
	if a, ok := spendAxis(policies); ok {
		return invalid("cost.spend", "0", "is zero on a budget limited by "+a.String(),
			"price the call: give the interceptor a price table (interceptor.Options.Prices, the policies file's prices) that names its model")
	}
	return nil
}

// MetersSpend reports whether any of policies limits money
// (quota.SpendPerDay, SpendPerMonth): where none does, a store may drop a
// cost's Spend, which no limit reads.
func MetersSpend(policies ...quota.Policy) bool {
	_, ok := spendAxis(policies)
	return ok
}

func spendAxis(policies []quota.Policy) (quota.Axis, bool) {
	for _, p := range policies {
		for _, l := range p.Limits {
			if l.Axis.Spend() {
				return l.Axis, true
			}
		}
	}
	return 0, false
}
