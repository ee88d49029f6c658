// Command worker runs Tollgate's Temporal worker.
//
//	go run ./cmd/worker           # serve: poll the task queue until interrupted
//	go run ./cmd/worker demo      # a one-minute workload on the embedded defaults
//	go run ./cmd/worker status    # each policy key's bucket levels
//	go run ./cmd/worker sim       # serve the simulated providers on SIM_ADDRESS
//	go run ./cmd/worker health    # exit 0 if a worker's /metrics answers on METRICS_ADDR
//
// Configuration comes from environment variables and flags of the same name
// (TEMPORAL_ADDRESS or -temporal-address; flags win); run with -h for the
// list. With none at all it starts an embedded Temporal server with the
// Temporal Web UI on http://127.0.0.1:8233, the memory store and a simulated
// provider, and says so.
//
// The worker itself is package worker, a library a service's own main can
// use instead; the embedded server, its UI, the simulator and the demo's
// view are this command's alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `usage: worker [serve|demo|status|sim|health] [flags]

  serve   run the worker until interrupted (the default)
  demo    run a realistic workload on the embedded defaults and report
  status  print each policy key's bucket levels from the configured store
          (with REDIS_URL, from Redis itself; exits 1 when it is unreachable)
  sim     serve the simulated providers (SIM_CONFIG, or the default profile)
          on SIM_ADDRESS, for a fleet of workers to share (see docker-compose.yml)
  health  exit 0 when the worker's /metrics answers on METRICS_ADDR, else 1
          (a container health check that needs no shell)

Every flag can also be set by the environment variable of the same name in
upper case with underscores (-temporal-address = TEMPORAL_ADDRESS); flags win.
`

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "demo", "status", "sim", "health":
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stderr, "\n"+usage)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch cmd {
	case "demo":
		return runDemo(ctx, cfg, defaultPlan(), quota.SystemClock{}, stdout, stderr, isTerminal(stdout))
	case "status":
		logger, _ := worker.NewLogger(stderr, "warn")
		// go-redis logs each failed dial itself; status reports the
		// outcome in one line, so its lines go to the logger's debug level.
		goredis.SetLogger(redisLog{logger})
		if err := status(ctx, cfg, stdout, logger); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	case "health":
		if err := health(ctx, cfg.Config); err != nil {
			fmt.Fprintln(stderr, err)
			var ce *worker.ConfigError
			if errors.As(err, &ce) {
				return 2
			}
			return 1
		}
		fmt.Fprintln(stdout, "worker: healthy: /metrics answers on", cfg.MetricsAddr)
		return 0
	}
	logger, err := worker.NewLogger(stderr, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cmd == "sim" {
		if err := serveSim(ctx, cfg, logger); err != nil {
			logger.Error("simulator failed", "error", err)
			return 1
		}
		return 0
	}
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("worker failed", "error", err)
		return 1
	}
	return 0
}

// redisLog passes go-redis's own log lines to a slog.Logger at debug level.
type redisLog struct{ logger *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.logger.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// isTerminal reports whether w is a terminal, where the demo redraws its
// status block in place. (A character device is not enough: /dev/null is
// one.)
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
