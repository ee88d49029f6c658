package worker

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/failover"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/redis"
)

// MetricStoreDegraded counts the shared store turning unreachable (state
// "degraded") and recovering ("recovered").
const MetricStoreDegraded = "tollgate.store.transitions"

// openStore builds the configured store: Redis behind the failover policy
// when REDIS_URL is set, else process memory. close releases the Redis
// client (a no-op for memory).
func openStore(cfg Config, ps quota.Policies, meter metric.Meter, logger *slog.Logger) (s quota.Store, close func() error, err error) {
	if cfg.RedisURL == "" {
		m, err := memory.New(ps, memory.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("worker: memory store: %w", err)
		}
		logger.Info("quota store: process memory (embedded; budgets are this process's only — set REDIS_URL to share them across a fleet)")
		return m, func() error { return nil }, nil
	}
	primary, rdb, err := openRedis(cfg, ps)
	if err != nil {
		return nil, nil, err
	}
	mode, _ := failover.ParseMode(cfg.StoreFailure) // Validate checked it
	transitions, err := meter.Int64Counter(MetricStoreDegraded,
		metric.WithDescription("The shared quota store turning unreachable (degraded) or reachable again (recovered)."))
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("worker: metrics: %w", err)
	}
	fs, err := failover.New(primary, ps, failover.Options{
		Mode:       mode,
		LocalShare: cfg.StoreLocalShare,
		OnStateChange: func(degraded bool, cause error) {
			state := "recovered"
			if degraded {
				state = "degraded"
				logger.Warn("quota store: Redis unreachable; applying STORE_FAILURE", "policy", mode.String(), "error", cause)
			} else {
				logger.Info("quota store: Redis reachable again")
			}
			transitions.Add(context.Background(), 1, metric.WithAttributes(
				attribute.String("state", state), attribute.String("policy", mode.String())))
		},
	})
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("worker: failover store: %w", err)
	}
	target, _ := parseRedisURL(cfg.RedisURL) // openRedis parsed it
	logger.Info("quota store: Redis (real; budgets shared by every worker using it)", append(target.logAttrs(),
		"store_failure", mode.String(), "store_local_share", cfg.StoreLocalShare)...)
	warnIfEvicting(context.Background(), rdb, logger)
	return fs, rdb.Close, nil
}

// openRedis builds the Redis store of cfg.RedisURL (one server or a
// cluster) on a new client, without contacting Redis. The caller closes the
// client.
func openRedis(cfg Config, ps quota.Policies) (*redis.Store, goredis.UniversalClient, error) {
	target, err := parseRedisURL(cfg.RedisURL)
	if err != nil { // Validate checks this; a Config used without it lands here
		return nil, nil, err
	}
	rdb := target.client()
	s, err := redis.New(rdb, ps, redis.Options{})
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("worker: redis store: %w", err)
	}
	return s, rdb, nil
}
