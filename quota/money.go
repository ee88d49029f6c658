package quota

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Money is an amount in millionths of the price table's currency (US
// dollars for price.Shipped): what Cost.Spend charges and the SpendPerDay
// and SpendPerMonth limits hold. A whole int64 keeps every budget exact:
// 2^50 millionths is over a billion.
type Money int64

// Dollars returns d units of currency as Money, rounded to the nearest
// millionth.
func Dollars(d float64) Money { return Money(math.Round(d * 1e6)) }

// String prints m with at least two decimals and no trailing zeros past
// them: "12.50", "0.000125", "-3.00".
func (m Money) String() string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1e6), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return sign + strconv.FormatUint(u/1e6, 10) + "." + frac
}

// ParseMoney reads a non-negative decimal amount such as "50", "12.5" or
// "0.000125" (at most six decimals), with an optional leading "$".
func ParseMoney(s string) (Money, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, dot := strings.Cut(t, ".")
	if whole == "" && frac == "" || dot && frac == "" || len(frac) > 6 || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not an amount: write a decimal number of at most six decimals, e.g. 12.50", s)
	}
	w := uint64(0)
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil || w > maxCapacity/1_000_000 {
			return 0, fmt.Errorf("%q is too large: keep amounts below %d", s, int64(maxCapacity/1_000_000))
		}
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	if w*1e6+f > maxCapacity {
		return 0, fmt.Errorf("%q is too large: keep amounts below %d", s, int64(maxCapacity/1_000_000))
	}
	return Money(w*1e6 + f), nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
