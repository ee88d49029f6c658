package classify_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	deps := listDeps(t, "github.com/tollgate/tollgate/classify")
	require.Contains(t, deps, "github.com/tollgate/tollgate/classify", "go list reports the package itself")
	require.Empty(t, forbidden(deps), "classify must stay free of Temporal and Redis")
}

// TestForbiddenCatchesAnImporter checks the guard on a package known to
// import Temporal, so a broken listing cannot pass the test above vacuously.
func TestForbiddenCatchesAnImporter(t *testing.T) {
	deps := listDeps(t, "github.com/tollgate/tollgate") // the root package's errors import the Temporal SDK
	require.NotEmpty(t, forbidden(deps))
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

// listDeps returns `go list -deps pkg`: pkg and every package it imports,
// transitively (tests excluded).
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin := goTool(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, "list", "-deps", pkg)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s list -deps %s: %v\n%s", goBin, pkg, err, stderr.String())
	}
	return strings.Fields(stdout.String())
}

// goTool finds the go command that built this test: GOROOT's own, else the
// one on PATH.
func goTool(t *testing.T) string {
	t.Helper()
	name := "go"
	if runtime.GOOS == "windows" {
		name = "go.exe"
	}
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command in GOROOT/bin or on PATH: %v; put the Go toolchain on PATH to run the dependency check", err)
	}
	return p
}
