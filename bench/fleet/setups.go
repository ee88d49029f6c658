package main

import (
	"fmt"
	"io"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/quota/redis"
)

// setup is one way to run the fleet. replica returns the worker options of
// replica i, with what to close when the replica stops.
type setup struct {
	name    string
	about   string
	replica func(i int, model string, counter *slots) (worker.Options, func(), error)
}

// setups returns the setups compared, in order: the four alternatives, then
// Tollgate on Redis with WaitInWorkflow.
func setups(l limits, redisAddr string) []setup {
	return []setup{
		{
			name:  "no-governor",
			about: "plain workers, no interceptor: provider 429s are retried by Temporal's retry policy (1 s, ×2)",
			replica: func(_ int, _ string, counter *slots) (worker.Options, func(), error) {
				return worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{counter}}, func() {}, nil
			},
		},
		{
			name:  "local-buckets",
			about: "Tollgate with a memory store per replica, each sized to the full limit (N× the intended rate)",
			replica: func(_ int, model string, counter *slots) (worker.Options, func(), error) {
				ps, pools, err := budgets(l, model)
				if err != nil {
					return worker.Options{}, nil, err
				}
				store, err := memory.New(ps, memory.Options{})
				if err != nil {
					return worker.Options{}, nil, err
				}
				return governed(store, pools, counter, func() {}, false)
			},
		},
		{
			name:  "tq-activities-per-sec",
			about: fmt.Sprintf("plain workers with TaskQueueActivitiesPerSecond = %g (the request limit), no interceptor", l.perSecond()),
			replica: func(_ int, _ string, counter *slots) (worker.Options, func(), error) {
				return worker.Options{
					Interceptors:                 []sdkinterceptor.WorkerInterceptor{counter},
					TaskQueueActivitiesPerSecond: l.perSecond(),
				}, func() {}, nil
			},
		},
		{
			name:    "tollgate-redis",
			about:   "Tollgate with a redis.Store per replica (own client) on one shared redis-server",
			replica: sharedRedis(l, redisAddr, false),
		},
		{
			name:    "tollgate-redis-wait",
			about:   "tollgate-redis with WaitInWorkflow: calls wait for their place on a timer in their workflow",
			replica: sharedRedis(l, redisAddr, true),
		},
	}
}

// sharedRedis returns the replicas of a Tollgate setup on one redis-server,
// each with its own client and store.
func sharedRedis(l limits, redisAddr string, wait bool) func(int, string, *slots) (worker.Options, func(), error) {
	return func(_ int, model string, counter *slots) (worker.Options, func(), error) {
		ps, pools, err := budgets(l, model)
		if err != nil {
			return worker.Options{}, nil, err
		}
		rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr})
		store, err := redis.New(rdb, ps, redis.Options{Prefix: "fleet"})
		if err != nil {
			rdb.Close()
			return worker.Options{}, nil, err
		}
		return governed(store, pools, counter, func() { rdb.Close() }, wait)
	}
}

// perSecond is the request limit in calls per second.
func (l limits) perSecond() float64 { return float64(l.Requests) / l.Period.Seconds() }

// governed returns worker options with the slot counter outermost and
// Tollgate's interceptor on store (and pools) inside it.
func governed(store quota.Store, pools pool.Set, counter *slots, closeFn func(), wait bool) (worker.Options, func(), error) {
	ic, err := interceptor.New(interceptor.Options{
		Store:          store,
		Pools:          pools,
		WaitInWorkflow: wait,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		closeFn()
		return worker.Options{}, nil, err
	}
	return worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{counter, ic}}, closeFn, nil
}
