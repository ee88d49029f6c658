package activities

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// StallError reports a stream that sent nothing for Idle, the activity's
// HeartbeatTimeout: the worker is alive (it kept heartbeating) but the
// answer has stopped. It is a timeout, errors.Is(err,
// context.DeadlineExceeded), so classify counts it as a transient failure
// and the interceptor retries it within its transient budget.
type StallError struct {
	// Idle is how long the stream had been silent.
	Idle time.Duration
}

// Error says how long the stream was silent and what bounds it.
func (e *StallError) Error() string {
	return fmt.Sprintf("activities: the stream sent nothing for %s (the activity's HeartbeatTimeout); "+
		"raise HeartbeatTimeout if the model may think that long before it answers", e.Idle)
}

// Unwrap returns context.DeadlineExceeded: a stall is an idle deadline
// passed.
func (e *StallError) Unwrap() error { return context.DeadlineExceeded }

// Timeout reports true, as a net.Error that timed out does.
func (e *StallError) Timeout() bool { return true }

// watchdog cancels a stream's context once nothing has been read from its
// response body for idle. Every byte counts, so a provider's keep-alive
// (Anthropic's ping events) keeps a slow answer alive. A zero idle watches
// nothing.
type watchdog struct {
	idle  time.Duration
	timer *time.Timer
	fired atomic.Bool
}

// watch returns a context for one stream, cancelled when the stream stalls
// (see watchdog), and its watchdog. Call stop when the stream is done.
func watch(ctx context.Context, idle time.Duration) (context.Context, *watchdog) {
	w := &watchdog{idle: idle}
	if idle <= 0 {
		return ctx, w
	}
	ctx, cancel := context.WithCancel(ctx)
	w.timer = time.AfterFunc(idle, func() {
		w.fired.Store(true)
		cancel()
	})
	return ctx, w
}

// kick restarts the idle bound: something arrived.
func (w *watchdog) kick() {
	if w.timer != nil && !w.fired.Load() {
		w.timer.Reset(w.idle)
	}
}

// stop disarms the watchdog.
func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// cause is the error a stream ended with: a *StallError when the watchdog
// ended it (the SDK saw only a cancelled context), else err.
func (w *watchdog) cause(err error) error {
	if err != nil && w.fired.Load() {
		return &StallError{Idle: w.idle}
	}
	return err
}

// wrap makes every read of res's body kick the watchdog: the SDKs'
// middleware hook (option.WithMiddleware) calls it with the response.
func (w *watchdog) wrap(res *http.Response, err error) (*http.Response, error) {
	w.kick()
	if res != nil && res.Body != nil && w.timer != nil {
		res.Body = kickingBody{ReadCloser: res.Body, w: w}
	}
	return res, err
}

// kickingBody is a response body that kicks its watchdog on every read that
// returns data.
type kickingBody struct {
	io.ReadCloser
	w *watchdog
}

func (b kickingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.kick()
	}
	return n, err
}
