package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/testsuite"
)

// The recorder records every scenario from a fresh run, and what it records
// replays with Tollgate's interceptor: re-recording keeps working.
func TestRecordReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario on an embedded Temporal server")
	}
	out := t.TempDir()
	require.NoError(t, record(context.Background(), out, scenarios(), t.Logf))
	var want []string
	opts := map[string]testsuite.Options{}
	for _, sc := range scenarios() {
		files := []string{sc.name + ".json"}
		if sc.child != "" {
			files = append(files, sc.child+".json")
		}
		for _, f := range files {
			want = append(want, f)
			// Replayed with the options it was recorded with.
			opts[f] = testsuite.Options{Interceptor: interceptor.Options{Fallbacks: sc.fallbacks, WaitInWorkflow: sc.waitInWorkflow}}
		}
	}
	for _, name := range want {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(out, name)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NotContains(t, string(b), apiKey)
			require.NoError(t, testsuite.ReplayHistoryFile(nil, path, opts[name]))
		})
	}
	committed, err := filepath.Glob(filepath.Join("..", "..", "testdata", "*.json"))
	require.NoError(t, err)
	require.Len(t, committed, len(want), "testsuite/testdata holds one history per recorded file")
}

func TestPick(t *testing.T) {
	all := scenarios()
	for _, tc := range []struct {
		name, only string
		want       []string
		err        string
	}{
		{name: "all", only: "", want: []string{"plain", "refused", "waited", "retry_after", "spend_cap", "escalation"}},
		{name: "some", only: "spend_cap, plain", want: []string{"spend_cap", "plain"}},
		{name: "unknown", only: "plain,nope", err: `no scenario "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pick(all, tc.only)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, sc := range got {
				names = append(names, sc.name)
			}
			require.Equal(t, tc.want, names)
		})
	}
}
