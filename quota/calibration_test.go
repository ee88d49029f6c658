package quota_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestCalibrate(t *testing.T) {
	anthropic := quota.Cost{Requests: 1, Tokens: 1100, InputTokens: 1000, OutputTokens: 100}
	openaiPrompt := quota.Cost{Requests: 1, Tokens: 1000, InputTokens: 1000, OutputTokens: 100}
	openaiOutput := quota.Cost{Requests: 1, Tokens: 500, InputTokens: 200, OutputTokens: 500}
	for _, tc := range []struct {
		name   string
		cost   quota.Cost
		prompt int64
		ratio  float64
		want   quota.Cost
	}{
		{"no prompt", anthropic, 0, 2, anthropic},
		{"ratio one", anthropic, 1000, 1, anthropic},
		{"input and tokens scale, output does not", anthropic, 1000, 1.5,
			quota.Cost{Requests: 1, Tokens: 1600, InputTokens: 1500, OutputTokens: 100}},
		{"rounds up", anthropic, 1000, 1.0001, quota.Cost{Requests: 1, Tokens: 1101, InputTokens: 1001, OutputTokens: 100}},
		{"down", anthropic, 1000, 0.7, quota.Cost{Requests: 1, Tokens: 800, InputTokens: 700, OutputTokens: 100}},
		{"max(max_tokens, prompt) down to max_tokens", openaiPrompt, 1000, 0.05,
			quota.Cost{Requests: 1, Tokens: 100, InputTokens: 50, OutputTokens: 100}},
		{"max_tokens dominating: up errs high", openaiOutput, 200, 2,
			quota.Cost{Requests: 1, Tokens: 700, InputTokens: 400, OutputTokens: 500}},
		{"max_tokens dominating: down keeps max_tokens", openaiOutput, 200, 0.5,
			quota.Cost{Requests: 1, Tokens: 500, InputTokens: 100, OutputTokens: 500}},
		{"axes without the prompt are left alone", quota.Cost{Requests: 1, Tokens: 10}, 1000, 2, quota.Cost{Requests: 1, Tokens: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, quota.Calibrate(tc.cost, tc.prompt, tc.ratio))
		})
	}
}

func TestRatioLearn(t *testing.T) {
	c := quota.Calibration{}.WithDefaults()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r quota.Ratio
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
	require.Equal(t, 4.0, quota.Ratio{Value: 9, At: now}.ValueAt(c, now), "bounded")
}

func TestCalibrationValidate(t *testing.T) {
	require.NoError(t, quota.Calibration{}.Validate())
	require.NoError(t, quota.Calibration{Off: true}.Validate())
	for field, c := range map[string]quota.Calibration{
		"calibration.min_ratio": {MinRatio: 1.2},
		"calibration.max_ratio": {MaxRatio: 0.9},
		"calibration.half_life": {HalfLife: time.Millisecond},
	} {
		err := c.Validate()
		var inv *quota.InvalidError
		require.ErrorAs(t, err, &inv, field)
		require.Equal(t, field, inv.Field)
		require.NotEmpty(t, inv.Fix)
	}
	err := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Tokens, 10)}, Calibration: quota.Calibration{MinRatio: -1}}.Validate()
	require.ErrorContains(t, err, "calibration.min_ratio")
}
