package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func validConfig() config {
	return config{replicas: 1, window: time.Second, rate: 1,
		limits: limits{Period: time.Second, Requests: 1, InputTokens: 1, OutputTokens: 1, Density: 1}}
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
