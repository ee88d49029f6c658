package redis

import (
	"context"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/testsuite/redistest"
)

// luaSources returns every file of lua/ by name.
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	src := make(map[string]string, len(files))
	for _, f := range files {
		b, err := luaFiles.ReadFile(f)
		require.NoError(t, err)
		src[strings.TrimPrefix(f, "lua/")] = string(b)
	}
	return src
}

// code returns src without its comments and string literals.
func code(src string) string {
	src = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(src, "")
	return regexp.MustCompile(`'(\\.|[^'\\])*'|"(\\.|[^"\\])*"`).ReplaceAllString(src, "''")
}

// TestConstantsTable: every constant the scripts read comes from the one
// table written from Go, none is defined again in a file, and the table
// holds none the scripts do not read.
func TestConstantsTable(t *testing.T) {
	defined := make(map[string]bool, len(constants))
	for _, c := range constants {
		require.False(t, defined[c.name], "%s twice in the table", c.name)
		defined[c.name] = true
	}
	used := make(map[string]bool)
	upper := regexp.MustCompile(`\b[A-Z][A-Z0-9_]+\b`)
	for file, src := range luaSources(t) {
		c := code(src)
		for _, name := range upper.FindAllString(c, -1) {
			if name == "KEYS" || name == "ARGV" {
				continue
			}
			require.True(t, defined[name], "%s reads %s, which the constants table lacks", file, name)
			used[name] = true
		}
		require.NotRegexp(t, `local\s+[A-Z][A-Z0-9_]+\s*[=,]`, c, "%s defines a constant of its own", file)
	}
	for name := range defined {
		require.True(t, used[name], "constant %s is read by no script", name)
	}
}

// TestConstantsReadAsWritten: Lua reads each constant as the Go value it
// mirrors (no exponent gopher-lua cannot parse, no digits lost).
func TestConstantsReadAsWritten(t *testing.T) {
	rdb := redistest.Start(t)
	var ret []string
	for _, c := range constants {
		if _, ok := c.value.(string); ok {
			ret = append(ret, c.name)
		} else {
			ret = append(ret, "string.format('%.17g', "+c.name+")")
		}
	}
	res, err := rdb.Eval(context.Background(), withConstants("return {"+strings.Join(ret, ", ")+"}"), nil).StringSlice()
	require.NoError(t, err)
	require.Len(t, res, len(constants))
	for i, c := range constants {
		if s, ok := c.value.(string); ok {
			require.Equal(t, s, res[i], c.name)
			continue
		}
		want, err := strconv.ParseFloat(luaValue(c.value), 64)
		require.NoError(t, err)
		got, err := strconv.ParseFloat(res[i], 64)
		require.NoError(t, err, c.name)
		require.Equal(t, want, got, c.name)
	}
}

// TestScriptErrorsNameTheirFile: an error Redis reports inside a script
// names the file and line of lua/ it comes from.
func TestScriptErrorsNameTheirFile(t *testing.T) {
	rdb := redistest.StartProcess(t, "Redis's own Lua error messages").Client()
	lines := strings.Split(luaSources(t)["common.lua"], "\n")
	// A missing now fails in fmt, formatting it, in common.lua.
	err := reserveScript.Run(context.Background(), rdb, []string{"k"}).Err()
	require.Error(t, err)
	m := regexp.MustCompile(`lua/common\.lua:(\d+):`).FindStringSubmatch(reserveScript.where(err.Error()))
	require.NotNil(t, m, "from %q", err.Error())
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Contains(t, lines[n-1], "x % 1 == 0", "line %d of common.lua is where the arithmetic fails", n)
}

// TestScriptFiles: each file opens with a header naming what it is, and no
// file of the package is longer than 400 lines.
func TestScriptFiles(t *testing.T) {
	for file, src := range luaSources(t) {
		require.True(t, strings.HasPrefix(src, "-- "+file+": "), "%s opens with its header", file)
		require.LessOrEqual(t, strings.Count(src, "\n"), 400, file)
	}
}

// TestWithConstants: a constant's name is written in as its literal where
// it stands in code, and left as it is in a comment or a string.
func TestWithConstants(t *testing.T) {
	src := "local a = SWEEP + 1 -- SWEEP\nlocal b = 'SWEEP' .. \"it's SWEEP\" .. PLACEHOLDER\nlocal SWEEPS, c = 1, xSWEEP\n" +
		"local d = {S = T, x = b.S, y = b:S(), z = S == N}\n"
	require.Equal(t, "local a = 4 + 1 -- SWEEP\nlocal b = 'SWEEP' .. \"it's SWEEP\" .. \"\\000lost \"\nlocal SWEEPS, c = 1, xSWEEP\n"+
		"local d = {S = KEYS[3], x = b.S, y = b:S(), z = KEYS[1] == KEYS[5]}\n",
		withConstants(src))
}

// TestReachable: a script keeps the functions its chunk calls, directly or
// through others, and blanks the rest, every line keeping its number.
func TestReachable(t *testing.T) {
	src := "local function a() return 1 end\n" +
		"local function b()\n  return a()\nend\n" +
		"local function c()\n  return 'b()' -- b()\nend\n" +
		"local function d() return c() end\n" +
		"return b()\n"
	require.Equal(t, "local function a() return 1 end\n"+
		"local function b()\n  return a()\nend\n"+
		"\n\n\n"+
		"\n"+
		"return b()\n", reachable(src), "c is named only in a string and a comment; d, by nobody")
}
