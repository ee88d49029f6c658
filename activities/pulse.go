package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeatEveryWithoutTimeout is how often a call heartbeats when its
// activity has no HeartbeatTimeout: only so that a workflow's cancellation,
// which the SDK learns from a heartbeat's answer, reaches it.
const heartbeatEveryWithoutTimeout = 10 * time.Second

// Progress is the heartbeat detail Complete records while a call runs: how
// far its answer has got. A non-streaming call's Progress stays zero until
// it returns. Read it with activity.GetHeartbeatDetails on a later attempt
// (a call cannot resume, so Complete itself does not).
type Progress struct {
	// Events counts the stream events received.
	Events int64 `json:"events"`
	// OutputTokens is the answer's tokens so far: the provider's count once
	// it has sent one (Anthropic's message_delta), else EstimateTokens of
	// the text received.
	OutputTokens int64 `json:"output_tokens"`
}

// pulse heartbeats one call while it runs, so that the activity's
// HeartbeatTimeout tells a lost worker from a long answer: on a ticker (a
// quarter of the timeout) whatever the call does, and for a stream as each
// event arrives, with the tokens so far. The SDK batches heartbeats (at
// most one RPC per 80 % of the timeout), so frequent calls cost little.
// Outside an activity it does nothing.
type pulse struct {
	on bool
	// idle bounds how long a stream may stay silent: the activity's
	// HeartbeatTimeout; zero (no bound) without one.
	idle time.Duration

	mu       sync.Mutex // orders heartbeats, so a newer Progress is never overwritten by an older one
	progress Progress

	stopOnce sync.Once
	done     chan struct{}
	stopped  chan struct{}
}

// startPulse starts heartbeating for the call that ctx runs, until stop.
func startPulse(ctx context.Context) *pulse {
	p := &pulse{on: activity.IsActivity(ctx), done: make(chan struct{}), stopped: make(chan struct{})}
	if !p.on {
		close(p.stopped)
		return p
	}
	p.idle = activity.GetInfo(ctx).HeartbeatTimeout
	every := heartbeatEveryWithoutTimeout
	if p.idle > 0 {
		every = p.idle / 4
	}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.beat(ctx, nil)
			case <-p.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

// event records a stream event and the answer's tokens so far, and
// heartbeats them.
func (p *pulse) event(ctx context.Context, outputTokens int64) {
	if !p.on {
		return
	}
	p.beat(ctx, func(pr *Progress) {
		pr.Events++
		pr.OutputTokens = max(pr.OutputTokens, outputTokens)
	})
}

// beat applies update, if any, and heartbeats the progress.
func (p *pulse) beat(ctx context.Context, update func(*Progress)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if update != nil {
		update(&p.progress)
	}
	activity.RecordHeartbeat(ctx, p.progress)
}

// stop ends the heartbeats and waits for the ticker to finish, so that no
// heartbeat follows the call's end (the interceptor records its own last).
func (p *pulse) stop() {
	p.stopOnce.Do(func() { close(p.done) })
	<-p.stopped
}
