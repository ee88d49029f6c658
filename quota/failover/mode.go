package failover

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// Mode is what a Store does while its primary is unreachable. The zero Mode
// means Closed.
type Mode uint8

// The modes.
const (
	// Closed refuses every call (Reason quota.Unavailable, Wait
	// Options.Retry): nothing runs that the fleet's budget did not admit.
	Closed Mode = iota + 1
	// Open admits every call without recording it: work goes on, at the
	// risk of the provider's own rate limits.
	Open
	// Local admits from an in-memory store whose limits are this replica's
	// share (Options.LocalShare) of the fleet's.
	Local
)

// String returns "closed", "open" or "local".
func (m Mode) String() string {
	switch m {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case Local:
		return "local"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode returns the mode named s ("closed", "open" or "local", in any
// case), or an *quota.InvalidError naming the field "failover.mode".
func ParseMode(s string) (Mode, error) {
	for _, m := range [...]Mode{Closed, Open, Local} {
		if strings.EqualFold(strings.TrimSpace(s), m.String()) {
			return m, nil
		}
	}
	return 0, &quota.InvalidError{Field: "failover.mode", Value: s, Problem: "is not a known mode",
		Fix: "use closed (refuse while Redis is down), open (admit unrecorded) or local (admit from this replica's share)"}
}
