package classify_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
)

func TestClass(t *testing.T) {
	for _, tc := range []struct {
		class     classify.Class
		name      string
		retryable bool
		throttled bool
		terminal  bool
	}{
		{classify.Unknown, "unknown", false, false, false},
		{classify.OK, "ok", false, false, false},
		{classify.RateLimited, "rate_limited", true, true, false},
		{classify.Overloaded, "overloaded", true, true, false},
		{classify.SpendCap, "spend_cap", false, false, true},
		{classify.DailyQuota, "daily_quota", false, false, true},
		{classify.Transient, "transient", true, false, false},
		{classify.ContextTooLong, "context_too_long", false, false, false},
		{classify.BadRequest, "bad_request", false, false, false},
		{classify.Auth, "auth", false, false, false},
		{classify.NotFound, "not_found", false, false, false},
		{classify.Canceled, "canceled", false, false, false},
		{classify.Class(200), "class(200)", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.class.String())
			require.Equal(t, tc.retryable, tc.class.Retryable())
			require.Equal(t, tc.throttled, tc.class.Throttled())
			require.Equal(t, tc.terminal, tc.class.Terminal())
		})
	}
}
