package classify

import (
	"regexp"
	"time"
	_ "time/tzdata" // the zone rules of pacific, wherever the binary runs
)

// nextMonthUTC returns 00:00 UTC on the 1st of the month after now's (in
// UTC): when a monthly spend cap reopens.
func nextMonthUTC(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// pacific is US Pacific time, whose midnight resets Gemini's per-day quotas.
// Its rules come from the zone database embedded by time/tzdata, so they do
// not depend on the host's (a distroless image has none).
var pacific = mustLoadLocation("America/Los_Angeles")

func mustLoadLocation(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("classify: time zone " + name + " is missing from the embedded zone database: " + err.Error()) // programmer error
	}
	return loc
}

// nextPacificMidnight returns the next midnight in America/Los_Angeles after
// now: when Gemini's per-day quotas reset. Midnight never falls inside a
// daylight-saving transition there, so it is always a wall-clock instant.
func nextPacificMidnight(now time.Time) time.Time {
	y, m, d := now.In(pacific).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, pacific).UTC()
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
