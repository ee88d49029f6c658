// Package tickets holds the rule a ticket is checked by: quota checks it
// in Reservation.Validate and Settlement.Validate, storekit for the tickets
// a Store's Cancel and Renew are given.
package tickets

import "strconv"

// MaxLen is the longest ticket a Store accepts, in bytes (quota.MaxTicketLen).
const MaxLen = 512

// Check returns what is wrong with ticket, if anything: the value to name
// it by in an error, the problem and its fix.
func Check(ticket string) (value, problem, fix string, bad bool) {
	if ticket == "" {
		return "", "is empty", "pass the ticket the call was reserved under", true
	}
	if len(ticket) > MaxLen {
		return ticket[:32] + "…", "is longer than " + strconv.Itoa(MaxLen) + " bytes",
			"pass quota.TicketFor(…) of the identity instead: a fixed-length digest of it", true
	}
	return "", "", "", false
}
