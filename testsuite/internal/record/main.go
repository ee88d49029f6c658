// Command record re-records the workflow histories under testsuite/testdata
// from real runs: an embedded Temporal server, llmsim as the provider, a
// memory store and Tollgate's interceptor. From the module root:
//
//	go run ./testsuite/internal/record -out testsuite/testdata
//
// Each scenario checks its history shows what it is named for (a refusal,
// a honoured Retry-After, an escalation, ...) before writing it, so a
// change that alters the behaviour fails here rather than committing a
// fixture that no longer records the case.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	out := flag.String("out", "testsuite/testdata", "directory to write NAME.json histories into")
	only := flag.String("only", "", "comma-separated scenario names to record (default: all)")
	flag.Parse()
	list, err := pick(scenarios(), *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(2)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if err := record(context.Background(), *out, list, logf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// pick returns the scenarios named in the comma-separated list only, or all
// of them when only is empty.
func pick(all []scenario, only string) ([]scenario, error) {
	if only == "" {
		return all, nil
	}
	byName := map[string]scenario{}
	var names []string
	for _, sc := range all {
		byName[sc.name] = sc
		names = append(names, sc.name)
	}
	var list []scenario
	for _, n := range strings.Split(only, ",") {
		sc, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("-only: no scenario %q; have %s", n, strings.Join(names, ", "))
		}
		list = append(list, sc)
	}
	return list, nil
}
