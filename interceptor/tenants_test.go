package interceptor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

func tenantKey(model, tenant string) quota.Key {
	k := openaiKey(model)
	k.Tenant = tenant
	return k
}

func tenantRequest(model, tenant string) activities.Request {
	r := request(model)
	r.Tenant = tenant
	return r
}

// A provider limits and caps an account, not the tenants a product splits
// it into: a 429 or spend cap on one tenant's call stops every tenant
// nested in the account. With no account policy, the signal pauses the
// tenant's own budget, the one budget there is to pause.
func TestProviderSignalOnATenantsCallStopsItsAccount(t *testing.T) {
	const model = "gpt-u"
	for _, tc := range []struct {
		name    string
		account bool // the account has a policy of its own
		fault   llmsim.Fault
		// wantB is the error type of tenant beta's call after alpha's
		// call met the fault ("" when it runs).
		wantB string
	}{
		{"429 pauses the account", true,
			llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: model, Times: 1, RetryAfter: 7 * time.Second}, tollgate.QuotaRefused},
		{"spend cap closes the account", true,
			llmsim.Fault{Kind: llmsim.FaultSpendCap, Model: model, Times: 1}, tollgate.SpendCapReached},
		{"429 pauses a tenant standing alone", false,
			llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: model, Times: 1, RetryAfter: 7 * time.Second}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policies := map[quota.Key]quota.Policy{
				tenantKey(model, "alpha"): generous(),
				tenantKey(model, "beta"):  generous(),
			}
			if tc.account {
				policies[openaiKey(model)] = generous()
			}
			u := newUnit(t, policies, interceptor.Options{})
			require.NoError(t, u.sim.Inject(tc.fault))

			_, err := u.complete(tenantRequest(model, "alpha"))
			require.Error(t, err, "alpha's call met the fault")

			// alpha's own budget stops either way.
			d, err := u.store.Reserve(context.Background(), quota.Reservation{Key: tenantKey(model, "alpha"), Ticket: "alpha-next", Cost: quota.Cost{Requests: 1}})
			require.NoError(t, err)
			require.Equal(t, quota.Paused, d.Reason)

			_, err = u.complete(tenantRequest(model, "beta"))
			if tc.wantB == "" {
				require.NoError(t, err, "no account budget: beta's own budget was not paused")
				require.EqualValues(t, 2, u.sim.Stats(model).Received)
				return
			}
			appErr := appError(t, err)
			require.Equal(t, tc.wantB, appErr.Type(), "beta's call stops on its account's pause: %v", err)
			if tc.wantB == tollgate.QuotaRefused {
				require.Equal(t, 7*time.Second+interceptor.DefaultRetryMargin, appErr.NextRetryDelay(), "beta waits out the provider's Retry-After")
			}
			require.EqualValues(t, 1, u.sim.Stats(model).Received, "beta's call never reached the provider")
			snap, err := u.store.Snapshot(context.Background(), openaiKey(model))
			require.NoError(t, err)
			require.True(t, snap.PausedUntil.After(snap.At), "the account's budget is paused")
		})
	}
}

// Tenants' fair share of a saturated account, end to end: tenant loud
// starts loudCalls calls at once on one key, many times what the account
// allows a second; once they are all in line, tenant quiet's quietCalls
// calls arrive (held back until then, so that they arrive at that moment
// however slowly this machine starts workflows). The account's line serves the two tenants in turn, so quiet's
// calls all complete before loud's hundredth, where a first-come line would
// run them after loud's last; the account's budget holds throughout, and
// the provider refuses no call.
func TestQuietTenantIsNotStarved(t *testing.T) {
	const (
		model      = "gpt-fair"
		limit      = 20 // requests a second, the provider's and the account's (less its headroom)
		loudCalls  = 200
		quietCalls = 10
	)
	e := newEnv(t, llmsim.Config{
		Models:  []llmsim.Model{{Provider: llmsim.OpenAI, Name: model, RequestsPerMinute: limit, Period: time.Second}},
		Latency: llmsim.Latency{Fixed: 20 * time.Millisecond},
	})
	// One policy, the account's: both tenants are charged to it and weigh
	// 1 each, the default. Its headroom keeps a tenth of the provider's
	// limit unused, as a fleet should: on a machine short of CPU, a call
	// granted on time can reach the provider late and meet the next one
	// there.
	account := quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, limit, time.Second)}, Headroom: 0.1}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey(model): account})
	require.NoError(t, err)
	store := redisStore(t, ps)
	granted := &grantClock{}
	held := &holdBack{prefix: "quiet-", release: make(chan struct{})}
	ic, sl, _ := e.startWorkerWith(interceptor.Options{Store: store}, workerSetup{outer: []sdkinterceptor.WorkerInterceptor{held}, inner: []sdkinterceptor.WorkerInterceptor{granted}})

	// loud's burst reaches the store at once, however slowly this machine
	// starts workflows; quiet's calls are held back until it has, then
	// reach the store together.
	g := newGate(loudCalls)
	sl.gate.Store(g)
	var runs []client.WorkflowRun
	start := func(tenant string, n int) {
		for i := range n {
			in := agent(model)
			in.Tenant = tenant
			runs = append(runs, e.start(fmt.Sprintf("%s-%d", tenant, i), in))
		}
	}
	start("quiet", quietCalls)
	start("loud", loudCalls)
	require.True(t, g.wait(time.Minute), "all %d of loud's calls reached the worker (%d did)", loudCalls, g.arrived.Load())
	require.Eventually(t, func() bool {
		st := ic.Stats()
		return st.Admitted+st.Queued >= loudCalls
	}, 30*time.Second, 5*time.Millisecond, "every call of loud's burst was admitted or took its place in line")
	require.Eventually(t, func() bool { return held.arrived.Load() == quietCalls }, 30*time.Second, 5*time.Millisecond,
		"quiet's calls reached the worker")
	before := ic.Stats()
	require.Less(t, before.Admitted, int64(loudCalls/2), "quiet's calls arrive while most of loud's burst waits in line")
	close(held.release)
	for i, run := range runs {
		_, err := e.result(run)
		require.NoError(t, err, "workflow %d", i)
	}

	loud := completions(t, e, "loud", loudCalls)
	quiet := completions(t, e, "quiet", quietCalls)
	slices.SortFunc(loud, time.Time.Compare)
	slices.SortFunc(quiet, time.Time.Compare)
	hundredth, lastQuiet := loud[99], quiet[len(quiet)-1]
	t.Logf("quiet's calls arrived after loud's %d admitted calls; quiet's last call completed %s after the burst's first, loud's 100th %s after, loud's last %s after",
		before.Admitted, lastQuiet.Sub(loud[0]).Round(time.Millisecond), hundredth.Sub(loud[0]).Round(time.Millisecond),
		loud[len(loud)-1].Sub(loud[0]).Round(time.Millisecond))
	if !lastQuiet.Before(hundredth) {
		for i := range quietCalls {
			id := fmt.Sprintf("quiet-%d", i)
			events := e.history(id)
			done, _ := activityCompleted(events)
			for _, r := range activityRuns(events) {
				t.Logf("%s: scheduled %s, attempt %d started %s after %s (%s), completed %s (loud's %dth)", id,
					r.scheduled.Sub(loud[0]).Round(time.Millisecond), r.attempt, r.started.Sub(loud[0]).Round(time.Millisecond),
					r.lastFailure, r.lastRetryDelay, done.Sub(loud[0]).Round(time.Millisecond), rank(loud, done))
			}
		}
	}
	require.True(t, lastQuiet.Before(hundredth),
		"quiet's last call completed at loud's %dth of %d: the quiet tenant waited behind the loud one's burst",
		rank(loud, lastQuiet), loudCalls)

	st := e.sim.Stats(model)
	e.explain429s("loud", model, loudCalls)
	require.Zero(t, st.TooManyRequests, "the provider never refused a call")
	require.EqualValues(t, loudCalls+quietCalls, st.Accepted)
	require.EqualValues(t, loudCalls+quietCalls, ic.Stats().Admitted)
	// The account's budget held throughout: in every stretch of time, no
	// more calls were granted than its bucket holds and earns meanwhile.
	// A grant is seen a moment after the store made it, later on a busy
	// machine: one call more, and what the bucket earns in 100 ms, allow
	// for that, and an overrun of a tenth over the run still shows.
	budget := float64(account.Effective(limit))
	times := granted.sorted()
	require.Len(t, times, loudCalls+quietCalls)
	for i := range times {
		for j := i; j < len(times); j++ {
			most := budget + budget*(times[j].Sub(times[i]).Seconds()+0.1) + 1
			require.LessOrEqual(t, float64(j-i+1), most, "calls granted from %s to %s", times[i].Format("05.000"), times[j].Format("05.000"))
		}
	}
}

// grantClock is a worker interceptor placed inside Tollgate's: it sees
// only the attempts Tollgate granted, and records when each began.
type grantClock struct {
	sdkinterceptor.WorkerInterceptorBase
	mu    sync.Mutex
	times []time.Time
}

// InterceptActivity implements sdkinterceptor.WorkerInterceptor.
func (g *grantClock) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	return hook(next, g.execute)
}

func (g *grantClock) execute(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput, next sdkinterceptor.ActivityInboundInterceptor) (any, error) {
	now := time.Now()
	g.mu.Lock()
	g.times = append(g.times, now)
	g.mu.Unlock()
	return next.ExecuteActivity(ctx, in)
}

func (g *grantClock) sorted() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.times)
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// holdBack is a worker interceptor placed outside Tollgate's: it holds the
// first attempt of each call whose workflow id starts with prefix until
// release is closed, and counts those it holds.
type holdBack struct {
	sdkinterceptor.WorkerInterceptorBase
	prefix  string
	arrived atomic.Int64
	release chan struct{}
}

// InterceptActivity implements sdkinterceptor.WorkerInterceptor.
func (h *holdBack) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	return hook(next, h.execute)
}

func (h *holdBack) execute(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput, next sdkinterceptor.ActivityInboundInterceptor) (any, error) {
	info := activity.GetInfo(ctx)
	if info.Attempt == 1 && strings.HasPrefix(info.WorkflowExecution.ID, h.prefix) {
		h.arrived.Add(1)
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return next.ExecuteActivity(ctx, in)
}

// completions reads when each of n one-call workflows' activity completed,
// from history (the server's clock, the same for every workflow).
func completions(t *testing.T, e *env, prefix string, n int) []time.Time {
	t.Helper()
	out := make([]time.Time, 0, n)
	for i := range n {
		at, ok := activityCompleted(e.history(fmt.Sprintf("%s-%d", prefix, i)))
		require.True(t, ok, "%s-%d's activity completed", prefix, i)
		out = append(out, at)
	}
	return out
}

func activityCompleted(events []*historypb.HistoryEvent) (time.Time, bool) {
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			return ev.GetEventTime().AsTime(), true
		}
	}
	return time.Time{}, false
}

// rank returns how many of the sorted times are not after t.
func rank(sorted []time.Time, t time.Time) int {
	i, _ := slices.BinarySearchFunc(sorted, t, func(a, b time.Time) int {
		if a.After(b) {
			return 1
		}
		return -1
	})
	return i
}
