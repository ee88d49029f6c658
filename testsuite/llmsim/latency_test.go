package llmsim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// delays runs n successful calls through a Sim with latency l and seed, on
// a manual clock, and returns the delay decided for each. Nothing sleeps:
// decide only draws the delay that ServeHTTP would wait.
func delays(t *testing.T, l Latency, seed uint64, n int) []time.Duration {
	t.Helper()
	sim, err := New(Config{Models: []Model{{Provider: OpenAI, Name: "m"}}, Latency: l, Seed: seed}, WithClock(NewManualClock(epoch)))
	require.NoError(t, err)
	c := call{model: "m", chars: 4, maxTokens: 1, prompt: "abcd"}
	out := make([]time.Duration, n)
	for i := range out {
		o := sim.decide(openAIDialect{}, "k", c, nil)
		require.Nil(t, o.err)
		out[i] = o.delay
	}
	return out
}

// sampleStats are a sample's moments and order statistics, in the units of
// time.Duration (nanoseconds).
type sampleStats struct {
	mean, sd, median float64
	min, max         time.Duration
}

func statsOf(ds []time.Duration) sampleStats {
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	mean := sum / float64(len(ds))
	var sq float64
	for _, d := range ds {
		sq += (float64(d) - mean) * (float64(d) - mean)
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sampleStats{
		mean: mean, sd: math.Sqrt(sq / float64(len(ds)-1)), median: float64(sorted[len(sorted)/2]),
		min: sorted[0], max: sorted[len(sorted)-1],
	}
}

// fractionWithin is the share of ds in [lo, hi].
func fractionWithin(ds []time.Duration, lo, hi time.Duration) float64 {
	n := 0
	for _, d := range ds {
		if d >= lo && d <= hi {
			n++
		}
	}
	return float64(n) / float64(len(ds))
}

func TestLatencyDistributions(t *testing.T) {
	const (
		n      = 20000
		fixed  = 100 * time.Millisecond
		jitter = 20 * time.Millisecond
		seed   = 7
	)
	j := float64(jitter)
	// With 20000 draws the sample mean is within about 0.7% of the spread
	// of its true value (one standard error), the standard deviation within
	// about 1%: the bounds below are several standard errors wide, and the
	// seed makes every run draw the same sample.
	for _, tc := range []struct {
		dist     LatencyDistribution
		mean, sd float64
		check    func(t *testing.T, ds []time.Duration, s sampleStats)
	}{
		{"", float64(fixed) + j/2, j / math.Sqrt(12), func(t *testing.T, _ []time.Duration, s sampleStats) {
			require.GreaterOrEqual(t, s.min, fixed)
			require.Less(t, s.max, fixed+jitter)
		}},
		{LatencyUniform, float64(fixed) + j/2, j / math.Sqrt(12), func(t *testing.T, ds []time.Duration, s sampleStats) {
			require.GreaterOrEqual(t, s.min, fixed)
			require.Less(t, s.max, fixed+jitter)
			require.InDelta(t, 0.5, fractionWithin(ds, fixed, fixed+jitter/2), 0.02, "flat: half the draws in each half")
		}},
		{LatencyNormal, float64(fixed), j, func(t *testing.T, ds []time.Duration, s sampleStats) {
			require.Less(t, s.min, fixed-2*jitter, "draws fall below Fixed")
			require.Greater(t, s.max, fixed+2*jitter)
			require.InDelta(t, 0.6827, fractionWithin(ds, fixed-jitter, fixed+jitter), 0.02, "68% within one standard deviation")
			require.InDelta(t, float64(fixed), s.median, 0.03*j, "symmetric about Fixed")
		}},
		{LatencyExponential, float64(fixed) + j, j, func(t *testing.T, ds []time.Duration, s sampleStats) {
			require.GreaterOrEqual(t, s.min, fixed, "never below Fixed")
			require.Less(t, s.min, fixed+jitter/100, "the mode is at Fixed")
			require.InDelta(t, float64(fixed)+j*math.Ln2, s.median, 0.03*j, "median Fixed + Jitter·ln 2")
			require.Greater(t, s.max, fixed+5*jitter, "a long tail")
		}},
	} {
		name := string(tc.dist)
		if name == "" {
			name = "empty means uniform"
		}
		t.Run(name, func(t *testing.T) {
			ds := delays(t, Latency{Fixed: fixed, Jitter: jitter, Distribution: tc.dist}, seed, n)
			s := statsOf(ds)
			require.InDelta(t, tc.mean, s.mean, 0.03*j, "mean")
			require.InDelta(t, tc.sd, s.sd, 0.05*tc.sd, "standard deviation")
			tc.check(t, ds, s)
		})
	}
}

func TestLatencyIsSeeded(t *testing.T) {
	for _, dist := range []LatencyDistribution{LatencyUniform, LatencyNormal, LatencyExponential} {
		t.Run(string(dist), func(t *testing.T) {
			l := Latency{Fixed: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: dist}
			first := delays(t, l, 11, 100)
			require.Equal(t, first, delays(t, l, 11, 100), "the same seed draws the same delays")
			require.NotEqual(t, first, delays(t, l, 12, 100), "another seed draws others")
		})
	}
	l := Latency{Fixed: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}
	uniform := l
	uniform.Distribution = LatencyUniform
	require.Equal(t, delays(t, l, 3, 100), delays(t, uniform, 3, 100), "empty is uniform, draw for draw")
}

func TestLatencyNormalNeverNegative(t *testing.T) {
	ds := delays(t, Latency{Jitter: 10 * time.Millisecond, Distribution: LatencyNormal}, 5, 4000)
	zeros := 0
	for _, d := range ds {
		require.GreaterOrEqual(t, d, time.Duration(0))
		if d == 0 {
			zeros++
		}
	}
	require.InDelta(t, 0.5, float64(zeros)/float64(len(ds)), 0.03, "a draw below zero is a zero delay")
}

func TestLatencyDelayBounds(t *testing.T) {
	huge := Latency{Fixed: math.MaxInt64 / 2, Jitter: math.MaxInt64 / 2, Distribution: LatencyExponential}
	for _, d := range delays(t, huge, 1, 200) {
		require.Positive(t, d, "a draw past the largest Duration is capped, not wrapped")
	}
	require.Equal(t, []time.Duration{7 * time.Millisecond, 7 * time.Millisecond},
		delays(t, Latency{Fixed: 7 * time.Millisecond}, 1, 2), "no jitter: the fixed delay")
}

func TestLatencyErrorsNameTheChoices(t *testing.T) {
	err := Latency{Jitter: time.Millisecond, Distribution: "gaussian"}.validate("latency")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "latency.distribution", ce.Field)
	require.Equal(t, "gaussian", ce.Value)
	require.Contains(t, ce.Fix, `"uniform", "normal" or "exponential"`)

	err = Latency{Fixed: time.Second, Distribution: LatencyNormal}.validate("latency")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "latency.jitter", ce.Field)
	require.Contains(t, ce.Problem, "normal")
}
