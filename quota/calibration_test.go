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
