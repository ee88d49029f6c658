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
// second (llmsim's per-minute bucket compressed to a one-second period),
// and Tollgate's policy says the same.
const burstLimit = 5

func burstSim(model string) llmsim.Config {
	return llmsim.Config{
		Models:  []llmsim.Model{{Provider: llmsim.OpenAI, Name: model, RequestsPerMinute: burstLimit, Period: time.Second}},
		Latency: llmsim.Latency{Fixed: 50 * time.Millisecond},
	}
}

func burstPolicy() quota.Policy {
	return quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, burstLimit, time.Second)}}
}

// burst starts n one-turn workflows at once and waits for them all, while
// sampling the activity slots held on the workers after the first wave is
// admitted. It returns the most slots seen held at once while calls waited.
func (e *env) burst(prefix, model string, n int, sl ...*slots) (peakWhileWaiting int64) {
	e.t.Helper()
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		runs[i] = e.start(fmt.Sprintf("%s-%d", prefix, i), agent(model))
	}
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

// A burst eight times the provider's limit, governed through a real Redis:
// every workflow completes, the provider never refuses a call, each call
// is refused by Tollgate at most once (it keeps its place in line), every
// attempt past a call's first is such a refusal, and waiting calls hold no
// worker slot.
func TestBurstAgainstATightLimit(t *testing.T) {
	const n = 8 * burstLimit
	e := newEnv(t, burstSim("gpt-burst"))
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-burst"): burstPolicy()})
	require.NoError(t, err)
	store, err := redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	ic, sl := e.startWorker(interceptor.Options{Store: store})

	peak := e.burst("burst", "gpt-burst", n, sl)

	st := e.sim.Stats("gpt-burst")
	e.explain429s("burst", "gpt-burst", n)
	require.Zero(t, st.TooManyRequests, "the provider never saw more than its limit")
	require.EqualValues(t, n, st.Accepted)
	require.EqualValues(t, n, st.Received, "one provider call per call")
	stats := ic.Stats()
	require.EqualValues(t, n, stats.Admitted)
	require.Positive(t, stats.Queued, "the burst made calls wait")

	// Read from history: attempts are one per call plus one per refusal.
	total, most := e.attempts("burst", n)
	require.LessOrEqual(t, most, int32(2), "a call is refused at most once: it keeps its place in line")
	require.EqualValues(t, n+stats.Queued+stats.Refused, total, "every extra attempt is one of Tollgate's refusals")
	// While calls wait, only admitted calls hold a slot: the refill rate
	// times the provider's latency (5/s × 50 ms), plus refusals that end
	// within a millisecond.
	require.LessOrEqual(t, peak, int64(4), "slots held while calls waited")
	t.Logf("burst of %d against %d/s: attempts per call %.2f (%d of %d calls waited, each refused once), provider calls per call %.2f, peak slots while waiting %d",
		n, burstLimit, float64(total)/n, stats.Queued+stats.Refused, n, float64(st.Received)/n, peak)
}

// The same burst with Options.WaitInWorkflow: each call takes its place in
// line from its workflow and waits on a durable timer, so its activity runs
// once. The provider still never refuses a call and no worker slot is held
// while calls wait.
func TestBurstWaitingInTheWorkflow(t *testing.T) {
	const n = 8 * burstLimit
	e := newEnv(t, burstSim("gpt-wait"))
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey("gpt-wait"): burstPolicy()})
	require.NoError(t, err)
	store, err := redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	ic, sl := e.startWorker(interceptor.Options{Store: store, WaitInWorkflow: true})

	peak := e.burst("wait", "gpt-wait", n, sl)

	st := e.sim.Stats("gpt-wait")
	e.explain429s("wait", "gpt-wait", n)
	require.Zero(t, st.TooManyRequests, "the provider never saw more than its limit")
	require.EqualValues(t, n, st.Accepted)
	require.EqualValues(t, n, st.Received, "one provider call per call")
	stats := ic.Stats()
	require.EqualValues(t, n, stats.Admitted)
	require.Positive(t, stats.WaitedInWorkflow, "the burst made calls wait")

	total, most := e.attempts("wait", n)
	perCall := float64(total) / n
	require.LessOrEqual(t, perCall, 1.2, "attempts per admitted call, read from history")
	require.EqualValues(t, n+stats.Queued+stats.Refused, total, "every extra attempt is one of Tollgate's refusals")
	timers := 0
	for i := range n {
		timers += timersStarted(e.history(fmt.Sprintf("wait-%d", i)))
	}
	require.EqualValues(t, stats.WaitedInWorkflow, timers, "each wait is a durable timer in its workflow's history")
	require.LessOrEqual(t, peak, int64(4), "slots held while calls waited")
	t.Logf("burst of %d against %d/s, waiting in the workflow: attempts per call %.2f (most %d), %d calls waited on a timer, provider calls per call %.2f, peak slots while waiting %d",
		n, burstLimit, perCall, most, stats.WaitedInWorkflow, float64(st.Received)/n, peak)
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
