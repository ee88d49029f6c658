package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/workflows"
)

// replicaTarget is what a replica joins: the Temporal server (through
// dial), llmsim, and the setup's model and task queue. heartbeat, when
// positive, replaces the HeartbeatTimeout of every activity the replica's
// workflows schedule (see heartbeatTimeout).
type replicaTarget struct {
	dial             func(client.Options) (client.Client, error)
	simURL           string
	model, taskQueue string
	heartbeat        time.Duration
	// pool is the pool run's member count (limits.Pool), 0 otherwise.
	pool int
}

// startReplica starts replica i of setup s: its own Temporal client,
// activities (an HTTP client over transport) and, per the setup, its own
// store and interceptor, with counter outermost. stop stops it; it is safe
// to call twice.
func startReplica(s setup, i int, t replicaTarget, counter *slots, transport http.RoundTripper) (stop func(), err error) {
	var closers []func()
	stop = sync.OnceFunc(func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	})
	c, err := t.dial(client.Options{Logger: quietLogger(), Identity: fmt.Sprintf("%s-replica-%d", s.name, i)})
	if err != nil {
		return stop, fmt.Errorf("replica %d: dial Temporal: %w", i, err)
	}
	closers = append(closers, c.Close)
	opts, closeFn, err := s.replica(i, t.model, counter)
	if err != nil {
		return stop, fmt.Errorf("replica %d: %w", i, err)
	}
	closers = append(closers, closeFn)
	if t.heartbeat > 0 {
		opts.Interceptors = append([]sdkinterceptor.WorkerInterceptor{&heartbeatTimeout{d: t.heartbeat}}, opts.Interceptors...)
	}
	acts, err := activities.New(activitiesConfig(t.pool, t.model, t.simURL, transport))
	if err != nil {
		return stop, fmt.Errorf("replica %d: activities: %w", i, err)
	}
	w := worker.New(c, t.taskQueue, opts)
	activities.Register(w, acts)
	workflows.Register(w)
	w.RegisterActivityWithOptions(listSteps, activity.RegisterOptions{Name: stepsTool.Name})
	if err := w.Start(); err != nil {
		return stop, fmt.Errorf("replica %d: start worker: %w", i, err)
	}
	closers = append(closers, w.Stop)
	return stop, nil
}

// A fault run's victim is a replica in a process of its own, so that it can
// be killed without warning (SIGKILL): no worker stop, no settle, its
// connections to Temporal, Redis and llmsim cut by the kernel. The benchmark
// starts its own executable (the test binary, in tests) with replicaEnv set;
// main (or TestMain) sees it and runs the replica instead.

// replicaEnv names the environment variable that makes the program a
// replica process; its value is a replicaSpec in JSON.
const replicaEnv = "FLEET_REPLICA"

// replicaSpec is what a replica process needs to join a setup.
type replicaSpec struct {
	Temporal  string        `json:"temporal"`
	Namespace string        `json:"namespace"`
	Setup     string        `json:"setup"`
	Index     int           `json:"index"`
	Model     string        `json:"model"`
	TaskQueue string        `json:"task_queue"`
	SimURL    string        `json:"sim_url"`
	RedisAddr string        `json:"redis_addr"`
	Limits    limits        `json:"limits"`
	Heartbeat time.Duration `json:"heartbeat"`
}

// What a replica process writes to its standard output, one byte an event:
// slotEvents, and these.
const (
	replicaReady slotEvent = 'r' // the worker has started
	callSent     slotEvent = '>' // an HTTP call to the provider is under way
	callAnswered slotEvent = '<' // it has its answer's headers, or failed
)

// runReplicaProcess is the program of a replica process: it joins the setup
// spec names and runs until its standard input closes (the benchmark ends
// it that way, or by killing it), reporting events on standard output. It
// returns the exit code.
func runReplicaProcess(spec string) int {
	var sp replicaSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		fmt.Fprintf(os.Stderr, "fleet replica: %s is not a replica spec: %v\n", replicaEnv, err)
		return 2
	}
	var s setup
	for _, c := range setups(sp.Limits, sp.RedisAddr) {
		if c.name == sp.Setup {
			s = c
		}
	}
	if s.replica == nil {
		fmt.Fprintf(os.Stderr, "fleet replica: no setup %q\n", sp.Setup)
		return 2
	}
	var mu sync.Mutex
	report := func(e slotEvent) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = os.Stdout.Write([]byte{byte(e)}) // unbuffered: a kill loses nothing written
	}
	t := replicaTarget{
		dial: func(o client.Options) (client.Client, error) {
			o.HostPort, o.Namespace = sp.Temporal, sp.Namespace
			return client.Dial(o)
		},
		simURL: sp.SimURL, model: sp.Model, taskQueue: sp.TaskQueue, heartbeat: sp.Heartbeat, pool: sp.Limits.Pool,
	}
	stop, err := startReplica(s, sp.Index, t, &slots{report: report}, reportingTransport{next: pooledTransport(), report: report})
	if err != nil {
		stop()
		fmt.Fprintf(os.Stderr, "fleet replica: %v\n", err)
		return 1
	}
	report(replicaReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return 0
}

// reportingTransport reports each call to the provider while it is under
// way, so the benchmark knows when a replica has calls in flight.
type reportingTransport struct {
	next   http.RoundTripper
	report func(slotEvent)
}

func (t reportingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.report(callSent)
	defer t.report(callAnswered)
	return t.next.RoundTrip(r)
}

// replicaProcess is a running replica process, seen from the benchmark.
type replicaProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// calls is the provider calls the replica has under way.
	calls atomic.Int64
	// exited is closed once the process has ended and its events are read.
	exited chan struct{}
	stderr lockedBuffer
}

// startReplicaProcess starts the replica sp in a process of its own and
// waits until its worker has started. Its slot events go to counter; an
// execution still open when the process dies counts as failed then.
func startReplicaProcess(ctx context.Context, sp replicaSpec, counter *slots) (*replicaProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("replica %d: find this program to start it again: %w", sp.Index, err)
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	p := &replicaProcess{exited: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), replicaEnv+"="+string(spec))
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("replica %d: start its process: %w", sp.Index, err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(p.exited)
		open := 0
		r := bufio.NewReader(stdout)
		for {
			b, err := r.ReadByte()
			if err != nil {
				break
			}
			switch slotEvent(b) {
			case execBegan, toolBegan:
				open++
				counter.begin(slotEvent(b) == execBegan)
			case execSucceeded, execFailed, toolEnded:
				open--
				counter.end(slotEvent(b) == execSucceeded, slotEvent(b) != toolEnded)
			case callSent:
				p.calls.Add(1)
			case callAnswered:
				p.calls.Add(-1)
			case replicaReady:
				close(ready)
			}
		}
		for range open {
			counter.end(false, false) // only the slot: its attempt was counted when it began
		}
		p.calls.Store(0)
		_ = p.cmd.Wait()
	}()
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("replica %d: its process exited at start: %s", sp.Index, p.stderr.tail())
	case <-timer.C:
		err = fmt.Errorf("replica %d: its process did not start its worker within a minute: %s", sp.Index, p.stderr.tail())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// killWithCallsInFlight waits, up to within, until the replica has a
// provider call under way, then kills it without warning (SIGKILL) and
// returns how many calls it had under way (0 if it had none by then).
func (p *replicaProcess) killWithCallsInFlight(ctx context.Context, within time.Duration) int64 {
	deadline := time.Now().Add(within)
	for p.calls.Load() == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	n := p.calls.Load()
	p.kill()
	return n
}

// kill ends the process at once (SIGKILL) and waits until it has.
func (p *replicaProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop asks the process to stop its worker and exit (by closing its
// standard input), and kills it if it has not within 30 s. Stopping a
// killed process does nothing.
func (p *replicaProcess) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// lockedBuffer keeps what a process writes to standard error.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

// tail returns the last lines written, or a note that there were none.
func (l *lockedBuffer) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(l.b.String()), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return "(nothing on stderr)"
	}
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
