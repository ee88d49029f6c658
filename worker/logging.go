package worker

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a text logger writing to out at level (debug, info, warn
// or error; empty means info). An unknown level is an error naming the fix.
func NewLogger(out io.Writer, level string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: l})), nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("worker: log level %q: use debug, info, warn or error", s)
}
