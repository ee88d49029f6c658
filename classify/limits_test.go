package classify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
)

func TestLimits(t *testing.T) {
	rfc := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name   string
		header http.Header
		want   []quota.Observation
	}{
		{name: "no headers", header: nil, want: nil},
		{name: "unrelated headers", header: hdr("Content-Type", "application/json"), want: nil},
		{
			name: "openai requests and tokens",
			header: hdr(
				"x-ratelimit-limit-requests", "10000", "x-ratelimit-remaining-requests", "9999", "x-ratelimit-reset-requests", "6ms",
				"x-ratelimit-limit-tokens", "200000", "x-ratelimit-remaining-tokens", "199000", "x-ratelimit-reset-tokens", "6m0s",
			),
			want: []quota.Observation{
				{Axis: quota.Requests, Limit: 10000, Remaining: 9999, Reset: 6 * time.Millisecond},
				{Axis: quota.Tokens, Limit: 200000, Remaining: 199000, Reset: 6 * time.Minute},
			},
		},
		{
			name:   "openai compound reset",
			header: hdr("x-ratelimit-remaining-tokens", "10", "x-ratelimit-reset-tokens", "1h2m3.5s"),
			want:   []quota.Observation{{Axis: quota.Tokens, Limit: -1, Remaining: 10, Reset: time.Hour + 2*time.Minute + 3500*time.Millisecond}},
		},
		{
			name:   "openai reset in plain seconds",
			header: hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-reset-requests", "1.5"),
			want:   []quota.Observation{{Axis: quota.Requests, Limit: 60, Remaining: -1, Reset: 1500 * time.Millisecond}},
		},
		{
			name: "anthropic all four families",
			header: hdr(
				"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", rfc(time.Second),
				"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "89000", "anthropic-ratelimit-tokens-reset", rfc(2*time.Second),
				"anthropic-ratelimit-input-tokens-limit", "50000", "anthropic-ratelimit-input-tokens-remaining", "48000", "anthropic-ratelimit-input-tokens-reset", rfc(3*time.Second),
				"anthropic-ratelimit-output-tokens-limit", "10000", "anthropic-ratelimit-output-tokens-remaining", "9000", "anthropic-ratelimit-output-tokens-reset", rfc(4*time.Second),
			),
			want: []quota.Observation{
				{Axis: quota.Requests, Limit: 50, Remaining: 49, Reset: time.Second},
				{Axis: quota.Tokens, Limit: 90000, Remaining: 89000, Reset: 2 * time.Second},
				{Axis: quota.InputTokens, Limit: 50000, Remaining: 48000, Reset: 3 * time.Second},
				{Axis: quota.OutputTokens, Limit: 10000, Remaining: 9000, Reset: 4 * time.Second},
			},
		},
		{
			name:   "anthropic reset in the past is now",
			header: hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", rfc(-time.Minute)),
			want:   []quota.Observation{{Axis: quota.Requests, Limit: -1, Remaining: 0, Reset: 0}},
		},
		{
			name:   "anthropic reset with a zone offset",
			header: hdr("anthropic-ratelimit-tokens-remaining", "5", "anthropic-ratelimit-tokens-reset", now.Add(90*time.Second).In(time.FixedZone("X", -5*3600)).Format(time.RFC3339)),
			want:   []quota.Observation{{Axis: quota.Tokens, Limit: -1, Remaining: 5, Reset: 90 * time.Second}},
		},
		{
			name:   "garbage values are not reported",
			header: hdr("x-ratelimit-limit-requests", "lots", "x-ratelimit-remaining-requests", "-3", "x-ratelimit-reset-requests", "-1s"),
			want:   nil,
		},
		{
			name:   "one good value keeps the axis",
			header: hdr("x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "NaN", "x-ratelimit-reset-tokens", "tomorrow"),
			want:   []quota.Observation{{Axis: quota.Tokens, Limit: 1000, Remaining: -1, Reset: 0}},
		},
		{
			name:   "overflowing numbers are not reported",
			header: hdr("x-ratelimit-limit-tokens", "99999999999999999999999", "x-ratelimit-remaining-tokens", "7", "x-ratelimit-reset-tokens", "9999999h"),
			want:   []quota.Observation{{Axis: quota.Tokens, Limit: -1, Remaining: 7, Reset: 0}},
		},
		{
			name: "anthropic wins when both are present",
			header: hdr(
				"anthropic-ratelimit-requests-remaining", "3",
				"x-ratelimit-remaining-requests", "9",
			),
			want: []quota.Observation{{Axis: quota.Requests, Limit: -1, Remaining: 3, Reset: 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, classify.Limits(tc.header, now))
		})
	}
}
