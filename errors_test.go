package tollgate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want tollgate.Target
		ok   bool
	}{
		{"openai/gpt-4o", tollgate.Target{Provider: "openai", Model: "gpt-4o"}, true},
		{"openai/team-a/gpt-4o", tollgate.Target{Provider: "openai", Account: "team-a", Model: "gpt-4o"}, true},
		{"openai", tollgate.Target{}, false},
		{"openai//gpt-4o", tollgate.Target{}, false},
		{"/gpt-4o", tollgate.Target{}, false},
		{"openai/gpt-4o/", tollgate.Target{}, false},
		{"a/b/c/d", tollgate.Target{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := tollgate.ParseTarget(tc.in)
			if !tc.ok {
				require.ErrorContains(t, err, `want "provider/model" or "provider/account/model"`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.in, got.String(), "String gives back what was parsed")
		})
	}
}
