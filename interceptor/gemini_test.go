package interceptor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// geminiKey is the quota key of a Gemini model on the default account.
func geminiKey(model string) quota.Key { return quota.Key{Provider: activities.Gemini, Model: model} }

// geminiModels are the Gemini models of the unit tests: one with a
// requests-per-day quota of one, one with two requests a minute, one
// roomy, and one whose tokenizer counts 1.6 times characters/4.
var geminiModels = []llmsim.Model{
	{Provider: llmsim.Gemini, Name: "gemini-rpd1", RequestsPerDay: 1},
	{Provider: llmsim.Gemini, Name: "gemini-rpm2", RequestsPerMinute: 2},
	{Provider: llmsim.Gemini, Name: "gemini-roomy", RequestsPerMinute: 10_000, TokensPerMinute: 10_000_000},
	{Provider: llmsim.Gemini, Name: "gemini-dense", Density: 1.6},
}

// geminiUnit is the SDK's test activity environment with Tollgate's
// interceptor over a memory store, and real activities talking to llmsim
// through the genai SDK; the store, the interceptor and llmsim all read one
// instant, start.
type geminiUnit struct {
	env   *testsuite.TestActivityEnvironment
	store quota.Store
	clock *quotatest.Clock
	sim   *llmsim.Sim
}

func newGeminiUnit(t *testing.T, start time.Time, accounts []llmsim.Account, opts interceptor.Options) *geminiUnit {
	t.Helper()
	u := &geminiUnit{clock: quotatest.NewClock(start)}
	policies := map[quota.Key]quota.Policy{openaiKey("gpt-backup"): generous()}
	for _, m := range geminiModels {
		policies[geminiKey(m.Name)] = generous()
	}
	for _, a := range accounts {
		policies[quota.Key{Provider: activities.Gemini, Account: a.Name, Model: "gemini-roomy"}] = generous()
	}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	u.store, err = memory.New(ps, memory.Options{Clock: u.clock})
	require.NoError(t, err)
	opts.Store, opts.Clock = u.store, u.clock
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ic, err := interceptor.New(opts)
	require.NoError(t, err)

	u.sim, err = llmsim.New(llmsim.Config{Models: append(simModels("gpt-backup"), geminiModels...), Accounts: accounts},
		llmsim.WithClock(llmsim.NewManualClock(start)))
	require.NoError(t, err)
	srv := httptest.NewServer(u.sim)
	t.Cleanup(srv.Close)
	key := apiKey
	if len(accounts) > 0 {
		key = accounts[0].APIKey
	}
	acts, err := activities.New(activities.Config{
		OpenAI: activities.ProviderConfig{APIKey: key, BaseURL: srv.URL + "/v1/"},
		Gemini: activities.ProviderConfig{APIKey: key, BaseURL: srv.URL},
	})
	require.NoError(t, err)

	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(quietLogger())
	u.env = ts.NewTestActivityEnvironment()
	u.env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	activities.Register(u.env, acts)
	return u
}

func geminiRequest(model string) activities.Request {
	return activities.Request{Provider: activities.Gemini, Model: model, MaxOutputTokens: 100,
		Messages: []activities.Message{{Role: activities.RoleUser, Content: "Summarise the quarterly report."}}}
}

func (u *geminiUnit) complete(t *testing.T, req activities.Request) (activities.Response, error) {
	t.Helper()
	val, err := u.env.ExecuteActivity(activities.CompleteActivity, req)
	if err != nil {
		return activities.Response{}, err
	}
	var resp activities.Response
	require.NoError(t, val.Get(&resp))
	return resp, nil
}

// nextMidnightLA is the next midnight in America/Los_Angeles after t, from
// the IANA database: the reference classify's own reckoning must match.
func nextMidnightLA(t *testing.T, at time.Time) time.Time {
	t.Helper()
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err, "the test needs the IANA time zone database")
	y, m, d := at.In(la).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, la)
}

// A per-day 429 closes the key until the next midnight in Los Angeles, for
// every replica, and the calls after it fail at once without asking
// Gemini: on an ordinary winter day, on the day clocks spring forward (a
// 23-hour day) and in summer time.
func TestGeminiDailyQuotaClosesTheKeyUntilMidnightPacific(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"winter evening", time.Date(2026, 1, 15, 7, 30, 0, 0, time.UTC), time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC)},     // 23:30 PST
		{"spring forward", time.Date(2026, 3, 8, 9, 30, 0, 0, time.UTC), time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC)},       // 01:30 PST, 23 h to go
		{"summer morning", time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 7, 2, 7, 0, 0, 0, time.UTC)},       // 05:00 PDT
		{"UTC has rolled over", time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)}, // 19:00 PST on the 1st
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, nextMidnightLA(t, tc.at).Equal(tc.want), "the case's own arithmetic: %s", nextMidnightLA(t, tc.at))
			u := newGeminiUnit(t, tc.at, nil, interceptor.Options{})
			_, err := u.complete(t, geminiRequest("gemini-rpd1"))
			require.NoError(t, err)

			_, err = u.complete(t, geminiRequest("gemini-rpd1"))
			appErr := appError(t, err)
			require.Equal(t, tollgate.DailyQuotaExhausted, appErr.Type())
			require.True(t, appErr.NonRetryable(), "Gemini's 22 s retryDelay is not believed")
			require.ErrorContains(t, err, tc.want.Format(time.RFC3339))

			snap, err := u.store.Snapshot(context.Background(), geminiKey("gemini-rpd1"))
			require.NoError(t, err)
			require.Equal(t, quota.PauseDailyQuota, snap.PauseReason)
			require.True(t, snap.PausedUntil.Equal(tc.want), "paused until %s, want %s", snap.PausedUntil, tc.want)

			_, err = u.complete(t, geminiRequest("gemini-rpd1"))
			require.Equal(t, tollgate.DailyQuotaExhausted, appError(t, err).Type())
			require.EqualValues(t, 2, u.sim.Stats("gemini-rpd1").Received, "the closed key did not ask Gemini again")
		})
	}
}

// With a backup configured, a call on a key its daily quota closed escalates
// across providers, naming the reason.
func TestGeminiDailyQuotaEscalatesToAnotherProvider(t *testing.T) {
	u := newGeminiUnit(t, time.Date(2026, 1, 15, 20, 0, 0, 0, time.UTC), nil,
		interceptor.Options{Fallbacks: map[string][]string{"gemini/gemini-rpd1": {"openai/gpt-backup"}}})
	_, err := u.complete(t, geminiRequest("gemini-rpd1"))
	require.NoError(t, err)
	for range 2 { // the answer that closes the key, then the closed key
		_, err = u.complete(t, geminiRequest("gemini-rpd1"))
		appErr := appError(t, err)
		require.Equal(t, tollgate.RateLimitEscalation, appErr.Type())
		esc, ok := tollgate.Escalation(err)
		require.True(t, ok)
		require.Equal(t, tollgate.EscalationDetails{From: "gemini/gemini-rpd1", Backups: []string{"openai/gpt-backup"}, Reason: "daily_quota"}, esc)
	}
	require.EqualValues(t, 2, u.sim.Stats("gemini-rpd1").Received)
}

// A per-minute 429 is retried after the body's RetryInfo.retryDelay, and
// the key pauses that long for everyone.
func TestGeminiPerMinute429RetriesAfterRetryDelay(t *testing.T) {
	u := newGeminiUnit(t, time.Date(2026, 1, 15, 20, 0, 0, 0, time.UTC), nil, interceptor.Options{})
	for range 2 {
		_, err := u.complete(t, geminiRequest("gemini-rpm2"))
		require.NoError(t, err)
	}
	_, err := u.complete(t, geminiRequest("gemini-rpm2"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.RateLimited, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Equal(t, 30*time.Second, appErr.NextRetryDelay(), "2 RPM: Gemini says retry in 30s")

	d, err := u.store.Reserve(context.Background(), quota.Reservation{Key: geminiKey("gemini-rpm2"), Ticket: "other", Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
	require.Equal(t, quota.Paused, d.Reason)
	require.Equal(t, 30*time.Second, d.Wait)
}

// A spent prepaid balance (a 429 RESOURCE_EXHAUSTED that says so) closes
// the key as a spend cap, not a rate limit; a success settles usageMetadata.
func TestGeminiSpendCapAndUsage(t *testing.T) {
	const prepaidKey = "AIza-prepaid-41c2"
	u := newGeminiUnit(t, time.Date(2026, 1, 15, 20, 0, 0, 0, time.UTC),
		[]llmsim.Account{{Name: "prepaid", APIKey: prepaidKey, SpendCapTokens: 1}}, interceptor.Options{})
	req := geminiRequest("gemini-roomy")
	req.Account = "prepaid"
	resp, err := u.complete(t, req)
	require.NoError(t, err)
	key := quota.Key{Provider: activities.Gemini, Account: "prepaid", Model: "gemini-roomy"}
	snap, err := u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.InDelta(t, 10_000_000-resp.Usage.InputTokens, snap.Axes[1].Available, 1e-6, "the tokens axis settled the prompt's tokens")

	_, err = u.complete(t, req)
	appErr := appError(t, err)
	require.Equal(t, tollgate.SpendCapReached, appErr.Type())
	require.True(t, appErr.NonRetryable())
	snap, err = u.store.Snapshot(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, quota.PauseSpendCap, snap.PauseReason)
	require.Equal(t, u.clock.Now().Add(interceptor.DefaultSpendCapPause), snap.PausedUntil, "no reset time: someone must top the balance up")
}

// The store learns from usageMetadata what Gemini's tokenizer counts per
// estimated prompt token, and charges later Gemini prompts at that ratio.
func TestGeminiEstimatesLearnGeminisTokenCount(t *testing.T) {
	u := newGeminiUnit(t, time.Date(2026, 1, 15, 20, 0, 0, 0, time.UTC), nil, interceptor.Options{})
	req := geminiRequest("gemini-dense") // 31 characters: 8 tokens estimated, 13 counted
	for range 3 {
		resp, err := u.complete(t, req)
		require.NoError(t, err)
		require.EqualValues(t, 13, resp.Usage.InputTokens)
	}
	snap, err := u.store.Snapshot(context.Background(), geminiKey("gemini-dense"))
	require.NoError(t, err)
	require.InDelta(t, 13.0/8, snap.EstimateRatio, 1e-9)
}

// On the embedded server, a Gemini 429 whose RetryInfo says 2s is retried
// by the server 2 s later. Three calls, on three models, each answered 429
// once.
func TestGeminiRetryInfoIsTheServersRetryDelay(t *testing.T) {
	const n = 3
	models := make([]llmsim.Model, n)
	policies := map[quota.Key]quota.Policy{}
	var faults []llmsim.Fault
	for i := range models {
		name := fmt.Sprintf("gemini-a%d", i)
		models[i] = llmsim.Model{Provider: llmsim.Gemini, Name: name}
		policies[geminiKey(name)] = generous()
		faults = append(faults, llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: name, Times: 1, RetryAfter: 2 * time.Second})
	}
	e := newEnv(t, llmsim.Config{Models: models, Faults: faults})
	ic, sl := e.startWorker(interceptor.Options{Store: memoryStore(t, policies)})

	runs := make([]client.WorkflowRun, n)
	for i, m := range models {
		runs[i] = e.start("gemini-retry-"+m.Name, workflows.AgentInput{Provider: activities.Gemini, Model: m.Name, Task: "Plan a trip to Lisbon.", MaxOutputTokens: 64})
	}
	var samples []retrySample
	for i, m := range models {
		out, err := e.result(runs[i])
		require.NoError(t, err)
		require.Equal(t, m.Name, out.Turns[0].Model)
		id := "gemini-retry-" + m.Name
		acts := activityRuns(e.history(id))
		require.Len(t, acts, 1)
		r := acts[0]
		require.Equal(t, int32(2), r.attempt)
		require.Equal(t, tollgate.RateLimited, r.lastFailure)
		require.Equal(t, 2*time.Second, r.lastRetryDelay, "the body's retryDelay; Gemini sends no Retry-After")
		samples = append(samples, retrySample{id: id, asked: r.lastRetryDelay, took: r.started.Sub(sl.endOf(t, id, 1))})
	}
	requireRetriedAfter(t, samples)
	require.EqualValues(t, n, ic.Stats().ProviderRateLimited)
}

// On the embedded server, an agent whose Gemini key runs out of its daily
// quota mid-conversation (after a tool call) finishes on its OpenAI backup,
// with the conversation's tool call and result, and the API key is
// nowhere in either workflow's history.
func TestGeminiDailyQuotaFallsBackToOpenAIAndTheKeyIsNotInHistory(t *testing.T) {
	e := newEnv(t, llmsim.Config{Models: append(simModels("gpt-backup"),
		llmsim.Model{Provider: llmsim.Gemini, Name: "gemini-daily", RequestsPerDay: 1})})
	ic, _ := e.startWorker(interceptor.Options{
		Store:     memoryStore(t, map[quota.Key]quota.Policy{geminiKey("gemini-daily"): generous(), openaiKey("gpt-backup"): generous()}),
		Fallbacks: map[string][]string{"gemini/gemini-daily": {"openai/gpt-backup"}},
	})
	const id = "gemini-daily-fallback"
	out, err := e.result(e.start(id, workflows.AgentInput{Provider: activities.Gemini, Model: "gemini-daily", Task: "Plan a trip to Lisbon.", Tools: agentTools[:1], MaxOutputTokens: 64}))
	require.NoError(t, err)
	require.Len(t, out.Turns, 2)
	require.Equal(t, 1, out.ToolCalls, "Gemini's tool call ran, and its result went to the backup")
	require.Equal(t, "gemini-daily", out.Turns[0].Model)
	require.Equal(t, "gpt-backup", out.Turns[1].Model, "the second turn fell back across providers")
	require.EqualValues(t, 1, e.sim.Stats("gemini-daily").TooManyRequests)
	require.EqualValues(t, 1, ic.Stats().SpendCapped, "counted as a key closed until its reset")
	require.EqualValues(t, 1, ic.Stats().Fallbacks)

	events := e.history(id)
	children := childWorkflowTypes(events)
	require.Equal(t, []string{tollgate.FallbackWorkflowName}, children)
	var childID string
	for _, ev := range events {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			childID = a.GetWorkflowId()
		}
	}
	events = append(events, e.history(childID)...)
	var all strings.Builder
	for _, ev := range events {
		require.NotContains(t, ev.String(), apiKey, "event %d (%s)", ev.GetEventId(), ev.GetEventType())
		all.WriteString(ev.String())
	}
	require.Contains(t, all.String(), "Plan a trip to Lisbon.", "the scan reads the payloads: the inputs are there")
	require.Contains(t, all.String(), `\"provider\":\"gemini\"`, "and so is the Gemini request")
}
