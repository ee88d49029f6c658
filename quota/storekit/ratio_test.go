package storekit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

func TestRatioLearn(t *testing.T) {
	c := quota.Calibration{}.WithDefaults()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r storekit.Ratio
	require.Equal(t, 1.0, r.ValueAt(c, now), "unlearned")
	r = r.Learn(c, 1.5, now)
	require.Equal(t, 1.0, r.ValueAt(c, now), "one sample is not yet a trend")
	r = r.Learn(c, 1.5, now)
	require.Equal(t, 1.5, r.ValueAt(c, now), "two agreeing samples raise it at once")
	r = r.Learn(c, 100, now)
	require.Equal(t, 1.5, r.ValueAt(c, now), "one outlier is the median's odd one out")
	r = r.Learn(c, 1.0, now)
	require.InDelta(t, 1.5, r.ValueAt(c, now), 1e-12, "median(1.0, 4, 1.5)")
	r = r.Learn(c, 1.0, now)
	require.InDelta(t, 1.5, r.ValueAt(c, now), 1e-12, "the outlier is still among the last three: no fall")
	r = r.Learn(c, 1.0, now)
	require.InDelta(t, 1.25, r.ValueAt(c, now), 1e-12, "falls half the way to the highest of the last three")
	r = r.Learn(c, 0.01, now)
	require.InDelta(t, 1.125, r.ValueAt(c, now), 1e-12, "a low outlier counts no more than the highest of three")
	require.InDelta(t, 1+(r.Value-1)/2, r.ValueAt(c, now.Add(c.HalfLife)), 1e-12, "halfway back to 1 in a half-life")
	require.Equal(t, 4.0, storekit.Ratio{Value: 9, At: now}.ValueAt(c, now), "bounded")
}
