// Package golist asks the go command about packages, for tests that guard
// the module's dependency graph.
package golist

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Deps returns, for each package the patterns match, every package it
// imports directly or indirectly (what `go list -deps` lists besides the
// package itself; tests excluded). It runs in the test's directory and
// fails t when the go command does.
func Deps(t testing.TB, patterns ...string) map[string][]string {
	t.Helper()
	goBin := goTool(t)
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, patterns...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", goBin, strings.Join(args, " "), err, stderr.String())
	}
	deps := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	return deps
}

// goTool finds the go command that built this test: GOROOT's own, else the
// one on PATH.
func goTool(t testing.TB) string {
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
