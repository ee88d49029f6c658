package main

import (
	"bytes"
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func validTenantConfig() tenantConfig {
	return tenantConfig{config: validConfig(), burst: 20, trickle: 1}
}

func TestTenantFlagsAndConfig(t *testing.T) {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	tf := newTenantFlags(fs)
	require.NoError(t, fs.Parse([]string{"-tenants", "-tenant-burst", "40", "-tenant-trickle", "2.5"}))
	require.True(t, *tf.on)
	require.Equal(t, 40, *tf.burst)
	require.Equal(t, 2.5, *tf.trickle)

	c := validTenantConfig()
	require.NoError(t, c.validate())
	c.limits.Requests = 10
	require.Equal(t, 2*time.Second, c.trickleFor(), "20 calls at 10 a second")
	for _, tc := range []struct {
		name string
		edit func(*tenantConfig)
		want string
	}{
		{"no burst", func(c *tenantConfig) { c.burst = 0 }, "-tenant-burst 0"},
		{"no trickle", func(c *tenantConfig) { c.trickle = 0 }, "-tenant-trickle 0"},
		{"no replicas", func(c *tenantConfig) { c.replicas = 0 }, "-replicas"},
		{"no limit", func(c *tenantConfig) { c.limits.Requests = 0 }, "limits must be positive"},
		{"with -faults", func(c *tenantConfig) { c.faults = true }, "-tenants and -faults are separate runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTenantConfig()
			tc.edit(&c)
			require.ErrorContains(t, c.validate(), tc.want)
		})
	}
}

// The gate holds the burst's first attempts until all have arrived; other
// calls pass; a call's wait runs from passing the gate to the start of the
// attempt that completed it.
func TestCallClockGathersTheBurst(t *testing.T) {
	c := newCallClock("fair-burst-", 3)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); c.pass(context.Background()) }()
	}
	select {
	case <-c.open:
		t.Fatal("the gate opened before the burst gathered")
	case <-time.After(20 * time.Millisecond):
	}
	c.pass(context.Background())
	wg.Wait()
	<-c.open
	c.pass(context.Background()) // past the burst: not held

	t0 := time.Now()
	c.arrivedAt.Store("a", t0)
	c.admittedAt.Store("a", t0.Add(1500*time.Millisecond))
	c.arrivedAt.Store("b", t0) // never completed
	require.Equal(t, []time.Duration{1500 * time.Millisecond}, c.waits([]string{"a", "b", "c"}))
}

func TestTenantTableAndNote(t *testing.T) {
	results := []TenantResult{
		{Setup: "tenants-fair", Tenant: burstTenant, Calls: 150, Completed: 150, P50WaitMs: 8000, P99WaitMs: 16000, MaxWaitMs: 16100},
		{Setup: "tenants-fair", Tenant: trickleTenant, Calls: 14, Completed: 14, P50WaitMs: 0, P99WaitMs: 300, MaxWaitMs: 300},
		{Setup: "tenants-first-come", Tenant: burstTenant, Calls: 150, Completed: 150, P50WaitMs: 7000, P99WaitMs: 14000, MaxWaitMs: 14100},
		{Setup: "tenants-first-come", Tenant: trickleTenant, Calls: 14, Completed: 13, P50WaitMs: 7000, P99WaitMs: 12600, MaxWaitMs: 12600},
	}
	var out bytes.Buffer
	require.NoError(t, printTenantTable(&out, results))
	require.Regexp(t, `tenants-first-come\s+trickle\s+7000\s+12600\s+12600\s+0\s+13/14`, out.String())
	require.Equal(t, "tenants: the trickle tenant waited p50 0 ms / p99 300 ms under fair share, p50 7000 ms / p99 12600 ms first-come; "+
		"the burst tenant p50 8000 / p99 16000 ms fair, p50 7000 / p99 14000 ms first-come; provider 429s 0 fair, 0 first-come",
		tenantNote(results))
	require.Equal(t, "tenants: a setup's results are missing", tenantNote(results[:3]))
}
