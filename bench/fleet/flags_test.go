package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

func validConfig() config {
	return config{replicas: 1, window: time.Second, rate: 1,
		limits: limits{Period: time.Second, Requests: 1, InputTokens: 1, OutputTokens: 1, Density: 1, Window: 1}}
}

func TestPickSetups(t *testing.T) {
	all := setups(limits{}, "")
	got, err := pick(all, "")
	require.NoError(t, err)
	require.Len(t, got, len(all), "no -setups runs every setup")

	got, err = pick(all, "tollgate-redis-wait, no-governor")
	require.NoError(t, err)
	require.Equal(t, []string{"no-governor", "tollgate-redis-wait"}, []string{got[0].name, got[1].name}, "in the order they run")

	_, err = pick(all, "tollgate-redis,tollgate")
	require.ErrorContains(t, err, `-setups: "tollgate" is not a setup`)
	require.ErrorContains(t, err, "tollgate-redis-wait", "the error lists the names")
}

func TestConfigValidatesDensity(t *testing.T) {
	require.NoError(t, validConfig().validate())
	for _, d := range []float64{0, -1, 9} {
		c := validConfig()
		c.limits.Density = d
		require.ErrorContains(t, c.validate(), "-density")
	}
	c := validConfig()
	c.only = "nope"
	require.ErrorContains(t, c.validate(), "-setups")
}

func TestConfigValidatesWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window float64
		want   string // "" when valid
	}{
		{"the whole period", 1, ""},
		{"per second of a minute", 0.0167, ""},
		{"per 10 s of a minute", 1.0 / 6, ""},
		{"zero", 0, "-window 0 is out of range: use a fraction of -period in (0, 1]"},
		{"negative", -0.5, "-window -0.5 is out of range"},
		{"over the period", 1.5, "-window 1.5 is out of range"},
		{"under a nanosecond", 1e-10, "-window 1e-10 of -period 1s is less than a nanosecond: use a larger fraction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			c.limits.Window = tc.window
			tenants := tenantConfig{config: c, burst: 1, trickle: 1}
			if tc.want == "" {
				require.NoError(t, c.validate())
				require.NoError(t, tenants.validate())
				return
			}
			require.ErrorContains(t, c.validate(), tc.want)
			require.ErrorContains(t, tenants.validate(), tc.want, "-tenants checks it too")
		})
	}
	c := validConfig()
	c.limits.Window, c.faults, c.replicas, c.concurrency = 0.0167, true, 2, 3
	require.NoError(t, c.validate(), "-window works with -faults")
}

// TestShapeReachesTheSimModel checks -shape is validated and becomes
// llmsim's window shape, named in the header, while the policy stays blind.
func TestShapeReachesTheSimModel(t *testing.T) {
	c := validConfig()
	c.limits.Window, c.limits.Shape = 0.0167, "sliding-log"
	require.ErrorContains(t, c.validate(), `-shape "sliding-log" is not a window shape: use bucket, fixed or sliding`)
	for _, shape := range []string{llmsim.ShapeFixed, llmsim.ShapeSliding} {
		c.limits.Shape = shape
		require.NoError(t, c.validate())
		m := c.limits.simModel("m")
		require.Equal(t, shape, m.WindowShape)
		_, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{m}})
		require.NoError(t, err)
		require.Contains(t, c.limits.windowNote(), shape+" window")
		plain := c.limits
		plain.Shape = ""
		require.Equal(t, plain.policy(), c.limits.policy(), "the governor is not told the shape")
	}
}

// TestWindowReachesTheSimModel checks -window becomes llmsim's enforcement
// window on the model every setup calls, and that the policy Tollgate is
// given stays the whole per-period limit.
func TestWindowReachesTheSimModel(t *testing.T) {
	l := limits{Period: time.Second, Requests: 10, InputTokens: 5000, OutputTokens: 2000, Density: 1.5, Window: 1.0 / 60}
	m := l.simModel("fleet-no-governor")
	require.Equal(t, time.Second/60, m.Window)
	require.Equal(t, time.Second, m.Period)
	_, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{m}})
	require.NoError(t, err, "llmsim accepts the window")
	require.Equal(t, "provider enforces each limit over 1/60 of its period (16.7ms, bucket window)", l.windowNote())
	require.Contains(t, l.String(), "1/60 of its period")

	plain := l
	plain.Window = 1
	require.Equal(t, plain.policy(), l.policy(), "the governor is not told the provider's shape")
	require.Zero(t, plain.simModel("m").Window, "1 is the whole period")
	require.Empty(t, plain.windowNote())
	require.NotContains(t, plain.String(), "enforces")

	other := l
	other.Window = 0.1667
	require.Equal(t, "provider enforces each limit over 1/6 of its period (166.7ms, bucket window)", other.windowNote())
	other.Window = 0.3
	require.Equal(t, "provider enforces each limit over 0.3 of its period (300ms, bucket window)", other.windowNote())
}

func TestFaultsConfig(t *testing.T) {
	c := validConfig()
	c.faults, c.replicas, c.concurrency = true, 2, 3
	require.NoError(t, c.validate())
	got, err := c.pick(setups(limits{}, ""))
	require.NoError(t, err)
	require.Equal(t, []string{"tollgate-redis", "tollgate-redis-wait"}, []string{got[0].name, got[1].name}, "-faults runs the Redis setups")

	one := c
	one.replicas = 1
	require.ErrorContains(t, one.validate(), "-replicas 1 with -faults: use at least 2")

	noLimit := c
	noLimit.concurrency = 0
	require.ErrorContains(t, noLimit.validate(), "-concurrency 0")

	local := c
	local.only = "tollgate-redis,local-buckets"
	require.ErrorContains(t, local.validate(), `-setups: "local-buckets" has no Redis to restart`)

	wait := c
	wait.only = "tollgate-redis-wait"
	got, err = wait.pick(setups(limits{}, ""))
	require.NoError(t, err)
	require.Len(t, got, 1)
}

func TestFaultPlanOrdersItsFaults(t *testing.T) {
	p := faultsAt(30*time.Second, func() error { return nil })
	require.Equal(t, 10*time.Second, p.killAt)
	require.Equal(t, 20*time.Second, p.restartAt)
	faults, err := p.schedule(&replicaProcess{}, &faultLog{}, func() int64 { return 0 }, 3)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second}, []time.Duration{faults[0].at, faults[1].at})

	p.killAt, p.restartAt = 5*time.Second, time.Second
	faults, err = p.schedule(&replicaProcess{}, &faultLog{}, func() int64 { return 0 }, 3)
	require.NoError(t, err)
	require.Equal(t, time.Second, faults[0].at, "due first, runs first")

	_, err = p.schedule(nil, &faultLog{}, func() int64 { return 0 }, 3)
	require.ErrorIs(t, err, errNoVictim)
	p.restartRedis = nil
	_, err = p.schedule(&replicaProcess{}, &faultLog{}, func() int64 { return 0 }, 3)
	require.ErrorContains(t, err, "restart Redis")
}

func TestPolicyAddsTheFaultRunsLimits(t *testing.T) {
	l := limits{Period: time.Second, Requests: 10, InputTokens: 100, OutputTokens: 100}
	_, ok := l.policy().Limit(quota.Concurrency)
	require.False(t, ok, "no concurrency limit unless asked")
	l.Concurrency, l.LeaseTTL = 3, 15*time.Second
	p := l.policy()
	lim, ok := p.Limit(quota.Concurrency)
	require.True(t, ok)
	require.EqualValues(t, 3, lim.Capacity)
	require.Equal(t, 15*time.Second, p.LeaseTTL)
	require.NoError(t, p.Validate())
}

func TestPoolConfig(t *testing.T) {
	c := validConfig()
	c.limits.Pool = 3
	require.NoError(t, c.validate())
	got, err := c.pick(setups(limits{}, ""))
	require.NoError(t, err)
	require.Equal(t, []string{"tollgate-redis", "tollgate-redis-wait"}, []string{got[0].name, got[1].name}, "-pool runs the Redis setups")

	plain := c
	plain.only = "no-governor"
	require.ErrorContains(t, plain.validate(), `-setups: "no-governor" is not a fleet-wide Tollgate setup, so -pool cannot run it`)
	one := c
	one.limits.Pool = 1
	require.ErrorContains(t, one.validate(), "-pool 1: use at least 2 members")
	faults := c
	faults.faults, faults.replicas, faults.concurrency = true, 2, 3
	require.ErrorContains(t, faults.validate(), "-pool and -faults are separate runs")

	ps, pools, err := budgets(c.limits, "m")
	require.NoError(t, err)
	members, ok := pools.Members(quota.Key{Provider: "anthropic", Model: "m"})
	require.True(t, ok)
	require.Len(t, members, 3)
	for _, k := range members {
		_, _, ok := ps.Lookup(k)
		require.True(t, ok, "%s has the limit", k)
	}
	require.Len(t, activitiesConfig(3, "m", "http://127.0.0.1:1", nil).Accounts, 3)
	require.Len(t, simAccounts(3, []string{"m"}), 4, "the benchmark's own key and one per member")
}

// A pool run's goodput counts the capped member's limit only while it was
// open.
func TestPoolAllowances(t *testing.T) {
	l := limits{Period: time.Second, Pool: 3}
	p := poolLog{capAt: 15 * time.Second, window: 30 * time.Second}
	require.InDelta(t, 2+16.0/31, p.allowances(l), 1e-9)
}
