package classify_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/golist"
)

// forbiddenDeps are the import-path prefixes classify must never depend on:
// it is pure (no Temporal, no Redis), so that anything may import it and its
// verdicts can be tested without either.
var forbiddenDeps = []string{
	"go.temporal.io/",
	"github.com/redis/",
	"github.com/go-redis/",
}

// TestNoTemporalOrRedisDependency fails when classify, directly or through
// any package it imports, comes to depend on Temporal or Redis.
func TestNoTemporalOrRedisDependency(t *testing.T) {
	deps := golist.Deps(t, "github.com/tollgate/tollgate/classify")
	require.Contains(t, deps, "github.com/tollgate/tollgate/classify", "go list reports the package itself")
	require.Empty(t, forbidden(deps["github.com/tollgate/tollgate/classify"]), "classify must stay free of Temporal and Redis")
}

// TestForbiddenCatchesAnImporter checks the guard on a package known to
// import Temporal, so a broken listing cannot pass the test above vacuously.
func TestForbiddenCatchesAnImporter(t *testing.T) {
	deps := golist.Deps(t, "github.com/tollgate/tollgate") // the root package's errors import the Temporal SDK
	require.NotEmpty(t, forbidden(deps["github.com/tollgate/tollgate"]))
}

func forbidden(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, prefix := range forbiddenDeps {
			if strings.HasPrefix(d, prefix) {
				bad = append(bad, d)
			}
		}
	}
	return bad
}
