package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestMain runs the test binary as a replica process when the fault test
// starts one (see replicaEnv), and as the tests otherwise.
func TestMain(m *testing.M) {
	if spec := os.Getenv(replicaEnv); spec != "" {
		os.Exit(runReplicaProcess(spec))
	}
	os.Exit(m.Run())
}

// Two replicas of tollgate-redis share a real redis-server and a policy of 3
// calls in flight. Mid-run, replica 0 (a process of its own) is killed
// without warning while it has calls at the provider, and later Redis is
// restarted empty. Every workflow must still complete, the provider must
// never hold more calls at once than the limit, and the faults may cost at
// most 1 provider 429 per 100 calls.
func TestFleetSurvivesRedisRestartAndReplicaLoss(t *testing.T) {
	rds := redistest.StartServer(t)
	if rds.Backend() == redistest.External {
		t.Skipf("%s points at a server this test cannot restart; unset it to run the fault test", redistest.EnvURL)
	}
	server, err := devserver.Start(devserver.Options{})
	require.NoError(t, err)
	t.Cleanup(server.Stop)

	// The load, 2.5 calls a second each held 1–2 s by the provider, wants
	// more than the 3 calls in flight the policy allows, so the concurrency
	// limit binds all along and calls admitted after the restart meet
	// calls admitted before it still in flight. The provider's rate limits
	// are far above the load: a call that waits for a slot has been
	// charged already and may reach the provider after calls charged later,
	// which costs 429s when a rate limit binds too, faults or not.
	l := limits{Period: time.Second, Requests: 10, InputTokens: 10000, OutputTokens: 2000, Density: 1,
		Concurrency: 3, LeaseTTL: faultLeaseTTL}
	s := setupNamed(t, l, rds.Addr(), "tollgate-redis")
	requireServes(t, rds, l)
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{l.simModel("fleet-" + s.name)}, Latency: faultLatency, Seed: 1})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = sim.Serve(ctx, ln) }()

	const window = 12 * time.Second
	b := &bench{
		server: server, sim: sim, simURL: "http://" + ln.Addr().String(), limits: l,
		replicas: 2, rate: 1.25, window: window, drain: 40 * time.Second, seed: 1,
		faults: faultsAt(window, func() error {
			rds.Restart()
			return nil
		}),
		redisAddr: rds.Addr(), heartbeat: faultHeartbeat,
	}
	r, err := b.runSetup(ctx, s)
	require.NoError(t, err)
	res := summarize(s.name, r.result)
	var table bytes.Buffer
	require.NoError(t, printTable(&table, []Result{res}, true))
	t.Logf("%s\n%s\nprovider: %d calls, %d answered 429, peak %d in flight; %d activity attempts; not completed, by cause: %v",
		r.faults, table.String(), r.result.ProviderCalls, r.result.Provider429, res.ProviderPeakInFlight, r.result.ActivityAttempts, r.failures)

	require.Positive(t, r.faults.KilledCalls, "replica 0 was killed while it had calls at the provider")
	require.Positive(t, r.faults.Restarted, "Redis was restarted")
	require.Positive(t, r.faults.RestartedCalls, "Redis was restarted while calls were in flight")
	require.Equal(t, res.Total, res.Completed, "every workflow completes: %d lost", res.Lost)
	require.LessOrEqual(t, res.ProviderPeakInFlight, l.Concurrency,
		"the provider never holds more calls at once than the policy's concurrency limit")
	require.LessOrEqual(t, res.Provider429Per100, 1.0, "provider 429s per 100 calls")
}

// setupNamed returns the setup called name.
func setupNamed(t *testing.T, l limits, redisAddr, name string) setup {
	t.Helper()
	for _, s := range setups(l, redisAddr) {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no setup %q", name)
	return setup{}
}

// requireServes fails the test at once when a store of l's policy cannot
// serve on rds (a script its Redis cannot run), instead of after the run's
// window and drain with every workflow lost. It reads under a prefix of its
// own, leaving the run's keys alone.
func requireServes(t *testing.T, rds *redistest.Server, l limits) {
	t.Helper()
	ps, _, err := budgets(l, "probe")
	require.NoError(t, err)
	store, err := redis.New(rds.Client(), ps, redis.Options{Prefix: "fleet-probe"})
	require.NoError(t, err)
	for _, k := range ps.Keys() {
		_, err := store.Snapshot(context.Background(), k)
		require.NoError(t, err, "the store cannot serve %s", k)
	}
}
