package tollgate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/golist"
)

// libraryPackages are what a service imports to wire Tollgate into its own
// process.
var libraryPackages = []string{"./quota/...", "./classify/", "./interceptor/", "./activities/", "./workflows/", "./worker/", "."}

// applicationOnly are the import paths, each with the packages under it, of
// what only the application (cmd/worker), tests and benchmarks may use: a
// Temporal server, its Web UI, the simulator, charting. A library package
// that reached one would make every importer compile it.
var applicationOnly = []string{
	"go.temporal.io/server",
	"github.com/temporalio/ui-server",
	"gonum.org/v1/plot",
	"github.com/tollgate/tollgate/internal/devserver",
	"github.com/tollgate/tollgate/testsuite/llmsim",
	"github.com/tollgate/tollgate/cmd/",
}

// forbidden returns the packages of deps that only the application may use.
func forbidden(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if slices.ContainsFunc(applicationOnly, func(p string) bool { return d == p || strings.HasPrefix(d, p+"/") }) {
			bad = append(bad, d)
		}
	}
	return bad
}

// TestLibraryImportsNoApplicationPackage fails when a library package comes
// to depend, directly or through any package it imports, on a Temporal
// server, the Web UI, the simulator or a charting library.
func TestLibraryImportsNoApplicationPackage(t *testing.T) {
	deps := golist.Deps(t, libraryPackages...)
	for _, pkg := range []string{"github.com/tollgate/tollgate", "github.com/tollgate/tollgate/worker", "github.com/tollgate/tollgate/quota/redis"} {
		require.Contains(t, deps, pkg, "go list reports every library package")
	}
	for pkg, d := range deps {
		require.Empty(t, forbidden(d), "%s depends on packages only cmd/worker, tests and benchmarks may use; move that code to cmd/worker", pkg)
	}
}

// TestForbiddenCatchesTheApplication checks the guard on the command, which
// embeds the server and the simulator, so a broken listing cannot pass the
// test above vacuously.
func TestForbiddenCatchesTheApplication(t *testing.T) {
	deps := golist.Deps(t, "./cmd/worker/")
	bad := forbidden(deps["github.com/tollgate/tollgate/cmd/worker"])
	for _, want := range []string{"github.com/tollgate/tollgate/internal/devserver", "github.com/tollgate/tollgate/testsuite/llmsim", "go.temporal.io/server/temporal"} {
		require.Contains(t, bad, want)
	}
}
