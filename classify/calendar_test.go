package classify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNextMonthUTC(t *testing.T) {
	for _, tc := range []struct {
		name      string
		now, want time.Time
	}{
		{"mid month", time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"december", time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"first instant of a month", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"local zone still in the old month", time.Date(2026, 1, 31, 20, 0, 0, 0, time.FixedZone("EST", -5*3600)), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextMonthUTC(tc.now))
		})
	}
}

func TestNextPacificMidnight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		now, want time.Time
	}{
		{"standard time", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 11, 8, 0, 0, 0, time.UTC)},
		{"daylight time", time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC), time.Date(2026, 7, 5, 7, 0, 0, 0, time.UTC)},
		{"evening in LA, next day in UTC", time.Date(2026, 7, 5, 3, 0, 0, 0, time.UTC), time.Date(2026, 7, 5, 7, 0, 0, 0, time.UTC)},
		{"day daylight time starts", time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC)},
		{"after daylight time starts", time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC)},
		{"day daylight time ends", time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC)},
		{"after daylight time ends", time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)},
		{"exactly midnight", time.Date(2026, 1, 11, 8, 0, 0, 0, time.UTC), time.Date(2026, 1, 12, 8, 0, 0, 0, time.UTC)},
		{"new year", time.Date(2026, 12, 31, 9, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 8, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextPacificMidnight(tc.now))
		})
	}
}

// The next midnight agrees with the zone database hour by hour over
// several years, across every daylight-saving change in them.
func TestNextPacificMidnightHourByHour(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	for at := time.Date(2024, 1, 1, 0, 30, 0, 0, time.UTC); at.Year() < 2029; at = at.Add(time.Hour) {
		got := nextPacificMidnight(at)
		require.True(t, got.After(at), "at %s: %s is not after it", at, got)
		require.LessOrEqual(t, got.Sub(at), 25*time.Hour, "at %s", at)
		l := got.In(la)
		require.Equal(t, [3]int{0, 0, 0}, [3]int{l.Hour(), l.Minute(), l.Second()}, "at %s: %s is not a Los Angeles midnight", at, l)
		require.Equal(t, time.UTC, got.Location(), "reset times are in UTC")
	}
}
