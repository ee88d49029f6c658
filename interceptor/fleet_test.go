package interceptor_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// burstLimit is the provider's limit in the burst tests: 5 requests a
// second (llmsim's per-minute bucket compressed to a one-second period).
// Tollgate's policy states the same limit with burstHeadroom: the slack the
// README advises for the time between a grant and the call reaching the
// provider, which a loaded machine stretches unevenly (a burst gathered at
// once takes longer to dispatch its first wave than the calls after it).
const (
	burstLimit    = 5
	burstHeadroom = 0.2
)

func burstSim(model string) llmsim.Config {
	return llmsim.Config{
		Models:  []llmsim.Model{{Provider: llmsim.OpenAI, Name: model, RequestsPerMinute: burstLimit, Period: time.Second}},
		Latency: llmsim.Latency{Fixed: 50 * time.Millisecond},
	}
}

func burstPolicy() quota.Policy {
	return quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, burstLimit, time.Second)}, Headroom: burstHeadroom}
}

// burst starts n one-turn workflows at once and waits for them all. Their
// first executions (the calls, or with WaitInWorkflow the places) are held
// at a gate until all n have arrived, so the burst reaches Tollgate at once
// however slowly this machine starts workflows. After the first wave is
// admitted, it samples the activity slots held on the workers, and returns
// the most seen held at once while calls waited.
func (e *env) burst(prefix, model string, n int, sl ...*slots) (peakWhileWaiting int64) {
	e.t.Helper()
	g := newGate(n)
	for _, s := range sl {
		s.gate.Store(g)
	}
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		runs[i] = e.start(fmt.Sprintf("%s-%d", prefix, i), agent(model))
	}
	require.True(e.t, g.wait(time.Minute), "all %d calls of the burst reached the workers (%d did)", n, g.arrived.Load())
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond) // past the first wave
		for !done.Load() {
			var held int64
			for _, s := range sl {
				held += s.now.Load()
			}
			peakWhileWaiting = max(peakWhileWaiting, held)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for i, run := range runs {
		_, err := e.result(run)
		require.NoError(e.t, err, "workflow %d", i)
	}
	done.Store(true)
	wg.Wait()
	return peakWhileWaiting
}

// attempts reads every call's attempt count from history.
func (e *env) attempts(prefix string, n int) (total, most int32) {
	for i := range n {
		for _, r := range activityRuns(e.history(fmt.Sprintf("%s-%d", prefix, i))) {
			total += r.attempt
			most = max(most, r.attempt)
		}
	}
	return total, most
}

// burstRun is what runBurst saw: the interceptor's counts, the provider's,
// the attempts read from history and the slots held while calls waited.
type burstRun struct {
	stats       interceptor.Stats
	sim         llmsim.Stats
	total, most int32
	peak        int64
}

// runBurst runs a burst eight times the provider's limit on one worker
// governed through a real Redis, with opts, and checks what holds whatever
// the options: every workflow completes, the provider never refuses a call
// and sees one call per workflow, every attempt past a call's first is one
// of Tollgate's refusals, and waiting calls hold no worker slot.
func runBurst(t *testing.T, model string, opts interceptor.Options) (e *env, r burstRun) {
	t.Helper()
	const n = 8 * burstLimit
	e = newEnv(t, burstSim(model))
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey(model): burstPolicy()})
	require.NoError(t, err)
	opts.Store, err = redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	ic, sl := e.startWorker(opts)

	r.peak = e.burst(model, model, n, sl)

	r.sim = e.sim.Stats(model)
	e.explain429s(model, model, n)
	require.Zero(t, r.sim.TooManyRequests, "the provider never saw more than its limit")
	require.EqualValues(t, n, r.sim.Accepted)
	require.EqualValues(t, n, r.sim.Received, "one provider call per call")
	r.stats = ic.Stats()
	require.EqualValues(t, n, r.stats.Admitted)
	// Read from history: attempts are one per call plus one per refusal.
	r.total, r.most = e.attempts(model, n)
	require.EqualValues(t, n+r.stats.Queued+r.stats.Refused, r.total, "every extra attempt is one of Tollgate's refusals")
	// While calls wait, only admitted calls hold a slot: the refill rate
	// times the provider's latency (4/s × 50 ms), plus refusals that end
	// within a millisecond.
	require.LessOrEqual(t, r.peak, int64(4), "slots held while calls waited")
	return e, r
}

// A burst eight times the provider's limit: each call that must wait is
// refused by Tollgate once (it keeps its place in line) and admitted on
// its next attempt.
func TestBurstAgainstATightLimit(t *testing.T) {
	const n = 8 * burstLimit
	_, r := runBurst(t, "gpt-burst", interceptor.Options{})
	require.Positive(t, r.stats.Queued, "the burst made calls wait")
	// A call is refused once for its place in line (it keeps it), and on a
	// loaded machine at most once more: when its retry comes back late
	// and its start, taken anew from the gate, is further off than
	// PaceWithin.
	require.LessOrEqual(t, r.most, int32(3), "a call is refused at most twice: it keeps its place in line")
	t.Logf("burst of %d against %d/s: attempts per call %.2f (%d of %d calls waited, each refused once), peak slots while waiting %d",
		n, burstLimit, float64(r.total)/n, r.stats.Queued+r.stats.Refused, n, r.peak)
}

// The same burst with Options.WaitInWorkflow: each call takes its place in
// line from its workflow and waits on a durable timer, so its activity runs
// once.
func TestBurstWaitingInTheWorkflow(t *testing.T) {
	const n = 8 * burstLimit
	e, r := runBurst(t, "gpt-wait", interceptor.Options{WaitInWorkflow: true})
	require.Positive(t, r.stats.WaitedInWorkflow, "the burst made calls wait")
	perCall := float64(r.total) / n
	// About 1 on a quiet machine; a start further off than PaceWithin
	// (an activity dispatched late on a loaded one) costs an attempt.
	require.LessOrEqual(t, perCall, 2.0, "attempts per admitted call, read from history")
	timers := 0
	for i := range n {
		timers += timersStarted(e.history(fmt.Sprintf("gpt-wait-%d", i)))
	}
	require.EqualValues(t, r.stats.WaitedInWorkflow, timers, "each wait is a durable timer in its workflow's history")
	t.Logf("burst of %d against %d/s, waiting in the workflow: attempts per call %.2f (most %d), %d calls waited on a timer, peak slots while waiting %d",
		n, burstLimit, perCall, r.most, r.stats.WaitedInWorkflow, r.peak)
}

// Two workers with their own Store instances on one Redis share one budget.
func TestTwoWorkersShareOneBudgetInRedis(t *testing.T) {
	const n = 6 * burstLimit
	e := newEnv(t, burstSim("gpt-shared"))
	srv := redistest.StartServer(t)
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-shared"): burstPolicy()})
	require.NoError(t, err)
	var ics []*interceptor.WorkerInterceptor
	var sls []*slots
	for range 2 {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		store, err := redis.New(rdb, ps, redis.Options{})
		require.NoError(t, err)
		ic, sl := e.startWorker(interceptor.Options{Store: store})
		ics, sls = append(ics, ic), append(sls, sl)
	}

	e.burst("shared", "gpt-shared", n, sls...)

	st := e.sim.Stats("gpt-shared")
	e.explain429s("shared", "gpt-shared", n)
	require.Zero(t, st.TooManyRequests)
	require.EqualValues(t, n, st.Accepted)
	a, b := ics[0].Stats(), ics[1].Stats()
	require.EqualValues(t, n, a.Admitted+b.Admitted)
	require.Positive(t, a.Admitted, "both workers ran calls")
	require.Positive(t, b.Admitted, "both workers ran calls")
	t.Logf("worker A admitted %d (queued %d), worker B admitted %d (queued %d)", a.Admitted, a.Queued, b.Admitted, b.Queued)
}

// explain429s logs every call's attempts and the provider's per-second
// counts when the provider refused any call, to show which one and when.
func (e *env) explain429s(prefix, model string, n int) {
	if e.sim.Stats(model).TooManyRequests == 0 {
		return
	}
	for i := range n {
		for _, r := range activityRuns(e.history(fmt.Sprintf("%s-%d", prefix, i))) {
			e.t.Logf("%s-%d: scheduled %s, attempt %d started %s after %s (%s)", prefix, i,
				r.scheduled.Format("05.000"), r.attempt, r.started.Format("05.000"), r.lastFailure, r.lastRetryDelay)
		}
	}
	for _, sec := range e.sim.Series(model) {
		e.t.Logf("second %s: accepted %d, 429 %d", sec.Start.Format("05"), sec.Accepted, sec.TooManyRequests)
	}
}
