package classify

import (
	"regexp"
	"time"
)

// nextMonthUTC returns 00:00 UTC on the 1st of the month after now's (in
// UTC): when a monthly spend cap reopens.
func nextMonthUTC(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// nextPacificMidnight returns the next midnight in America/Los_Angeles after
// now: when Gemini's per-day quotas reset. It applies the US daylight-saving
// rules in force since 2007 (from 02:00 on the second Sunday of March to
// 02:00 on the first Sunday of November) itself, so it does not depend on the
// host's time-zone database. Midnight never falls inside a transition.
func nextPacificMidnight(now time.Time) time.Time {
	local := now.UTC().Add(pacificOffset(now))
	y, m, d := local.Date()
	wall := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC) // the next local midnight, as a wall clock
	at := wall.Add(8 * time.Hour)                      // as if standard time (UTC−8)
	if pacificOffset(at) == -7*time.Hour {
		at = wall.Add(7 * time.Hour)
	}
	return at
}

// pacificOffset returns US Pacific time's offset from UTC at instant t.
func pacificOffset(t time.Time) time.Duration {
	t = t.UTC()
	y := t.Year()
	start := nthSunday(y, time.March, 2).Add(10 * time.Hour) // 02:00 PST
	end := nthSunday(y, time.November, 1).Add(9 * time.Hour) // 02:00 PDT
	if !t.Before(start) && t.Before(end) {
		return -7 * time.Hour
	}
	return -8 * time.Hour
}

// nthSunday returns 00:00 UTC on the n-th Sunday of month m in year y.
func nthSunday(y int, m time.Month, n int) time.Time {
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	d := 1 + (7-int(first.Weekday()))%7 + 7*(n-1)
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// regainAccess finds the date in Anthropic's spend-limit message: "You will
// regain access on 2024-08-01 at 00:00 UTC."
var regainAccess = regexp.MustCompile(`regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) UTC`)

// accessResumesAt returns the time an Anthropic spend-limit message says
// access resumes, if it says so.
func accessResumesAt(msg string) (time.Time, bool) {
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	m := regainAccess.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02 15:04", m[1]+" "+m[2])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
