package worker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Schemes of a REDIS_URL naming a Redis Cluster: the seed nodes separated by
// commas, e.g. redis+cluster://10.0.0.1:6379,10.0.0.2:6379. The client
// learns the rest of the cluster from them.
const (
	clusterScheme    = "redis+cluster"
	clusterTLSScheme = "rediss+cluster"
)

// redisTarget is the Redis a REDIS_URL names: one server (single) or a
// cluster (cluster).
type redisTarget struct {
	single  *goredis.Options
	cluster *goredis.ClusterOptions
}

// parseRedisURL reads a REDIS_URL: redis://, rediss:// or unix:// for one
// server, redis+cluster:// or rediss+cluster:// for a cluster. It returns a
// *ConfigError naming REDIS_URL (never its password) when the URL does not
// parse or the client would not accept it.
func parseRedisURL(raw string) (redisTarget, error) {
	target, err := parseRedisTarget(raw)
	if err != nil && reservedInUserinfo(raw) {
		// The URL was split at a '/', '?' or '#' of its password, so what
		// the error would say of the host, path or query holds parts of it.
		return redisTarget{}, &ConfigError{Env: "REDIS_URL", Value: redactUserinfo(raw),
			Problem: "does not parse: a '/', '?' or '#' comes before its last '@', as in a password that holds them unencoded",
			Fix:     `percent-encode them in the password (/ as %2F, ? as %3F, # as %23), e.g. "redis://user:a%2Fb@host:6379/0"`}
	}
	return target, err
}

// reservedInUserinfo reports whether raw has a '/', '?' or '#' between its
// "://" and its last '@': the user information of a URL whose password
// holds them unencoded, or (rarely) an '@' in a path or query.
func reservedInUserinfo(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndex(rest, "@")
	return ok && at >= 0 && strings.ContainsAny(rest[:at], "/?#")
}

// redactUserinfo returns raw with everything between its "://" and its
// last '@' replaced by "xxxxx", for a URL that does not parse.
func redactUserinfo(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return raw
	}
	return scheme + "://xxxxx" + rest[at:]
}

// parseRedisTarget is parseRedisURL for a URL whose user information, if
// any, holds no '/', '?' or '#'.
func parseRedisTarget(raw string) (redisTarget, error) {
	if strings.HasPrefix(raw, clusterScheme+"://") || strings.HasPrefix(raw, clusterTLSScheme+"://") {
		return parseClusterURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") || (u.Scheme != "unix" && u.Host == "") {
		return redisTarget{}, &ConfigError{Env: "REDIS_URL", Value: redactURL(raw), Problem: "is not a Redis URL",
			Fix: `use e.g. "redis://localhost:6379/0" (rediss:// for TLS, redis+cluster://host:port,host:port for a Redis Cluster), or leave it empty for the memory store`,
			Err: withoutURL(err)}
	}
	// What the client will make of it: the database number, the query's
	// options. Its messages name no password.
	opts, err := goredis.ParseURL(raw)
	if err != nil {
		return redisTarget{}, &ConfigError{Env: "REDIS_URL", Value: redactURL(raw),
			Problem: "is not a usable Redis URL (" + strings.TrimPrefix(err.Error(), "redis: ") + ")",
			Fix:     `use redis://[user:password@]host:port/DB, DB a database number, e.g. "redis://localhost:6379/0"`, Err: err}
	}
	return redisTarget{single: opts}, nil
}

// parseClusterURL reads redis+cluster://[user:password@]host:port[,host:port…][/0][?options]
// into cluster options: the first node and the others as go-redis's own
// cluster URL (redis://…?addr=…) takes them, so the query accepts the same
// options as for one server. The node list is split by hand: net/url takes
// "host:port,host" for a host with a bad port.
func parseClusterURL(raw string) (redisTarget, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hosts := "", authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
	}
	// The URL without its node list, for net/url to read the user, path and
	// query from.
	u, err := url.Parse(scheme + "://" + userinfo + "seed" + tail)
	redacted := scheme + "://" + hosts + tail
	if err == nil {
		u.Host = hosts
		redacted = u.Redacted()
	}
	fail := func(problem, fix string, err error) (redisTarget, error) {
		return redisTarget{}, &ConfigError{Env: "REDIS_URL", Value: redacted, Problem: problem, Fix: fix, Err: err}
	}
	const form = "use redis+cluster://[user:password@]host:port,host:port,… (rediss+cluster:// for TLS), e.g. \"redis+cluster://redis-1:6379,redis-2:6379,redis-3:6379\""
	if err != nil {
		return fail("is not a Redis Cluster URL", form, withoutURL(err))
	}
	if u.Path != "" && u.Path != "/" && u.Path != "/0" {
		return fail("names database "+strings.TrimPrefix(u.Path, "/")+", but a Redis Cluster has only database 0",
			"drop the path: "+form, nil)
	}
	var addrs []string
	for _, a := range strings.Split(hosts, ",") {
		if h, port, err := net.SplitHostPort(a); err != nil || h == "" || port == "" {
			return fail("lists node "+strconv.Quote(a)+", which is not host:port", form, err)
		}
		addrs = append(addrs, a)
	}
	q := u.Query()
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	std := url.URL{Scheme: "redis", User: u.User, Host: addrs[0], RawQuery: q.Encode()}
	if scheme == clusterTLSScheme {
		std.Scheme = "rediss"
	}
	opts, err := goredis.ParseClusterURL(std.String())
	if err != nil {
		return fail("is not a usable Redis Cluster URL ("+strings.TrimPrefix(err.Error(), "redis: ")+")", form, err)
	}
	return redisTarget{cluster: opts}, nil
}

// withoutURL returns err, a *url.Error, without the URL it quotes (which
// holds the password), keeping what is wrong with it.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: "(REDIS_URL)", Err: ue.Err}
	}
	return err
}

// client returns a new client for the target. The caller closes it.
func (t redisTarget) client() goredis.UniversalClient {
	if t.cluster != nil {
		return goredis.NewClusterClient(t.cluster)
	}
	return goredis.NewClient(t.single)
}

// RedisClient returns a new client for c.RedisURL, one server or a Redis
// Cluster as the worker reads it (see Config.RedisURL), without contacting
// Redis, and a description of it for messages that holds no password:
// "Redis redis://host:6379/0" or "Redis Cluster host:port,host:port". The
// caller closes the client. It returns a *ConfigError naming REDIS_URL when
// the URL is empty or does not parse.
func (c Config) RedisClient() (rdb goredis.UniversalClient, desc string, err error) {
	if c.RedisURL == "" {
		return nil, "", &ConfigError{Env: "REDIS_URL", Problem: "is empty", Fix: `set it to the fleet's Redis, e.g. "redis://localhost:6379/0"`}
	}
	target, err := parseRedisURL(c.RedisURL)
	if err != nil {
		return nil, "", err
	}
	if target.cluster != nil {
		return target.client(), "Redis Cluster " + strings.Join(target.cluster.Addrs, ","), nil
	}
	return target.client(), "Redis " + redactURL(c.RedisURL), nil
}

// logAttrs describes the target for the start-up log: the addresses and,
// for one server, the database.
func (t redisTarget) logAttrs() []any {
	if t.cluster != nil {
		return []any{"cluster", strings.Join(t.cluster.Addrs, ",")}
	}
	return []any{"addr", t.single.Addr, "db", t.single.DB}
}

// evictionCheckTimeout bounds the start-up look at Redis's eviction policy,
// so an unreachable Redis does not hold up the worker (STORE_FAILURE covers
// that).
const evictionCheckTimeout = 2 * time.Second

// warnIfEvicting logs a warning for every Redis node whose maxmemory-policy
// may evict Tollgate's keys: allkeys-* policies evict any key once memory is
// full, the state hashes and lease sets (kept without a TTL) included, and
// the budgets restart from what the store can recover (see quota/redis).
// noeviction and volatile-* evict none of them: Tollgate sets a TTL only on
// ticket records. A node whose CONFIG is disabled or renamed (managed Redis
// services do this) or that cannot be reached is logged at debug level and
// otherwise ignored.
func warnIfEvicting(ctx context.Context, rdb goredis.UniversalClient, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, evictionCheckTimeout)
	defer cancel()
	check := func(ctx context.Context, node string, c *goredis.Client) {
		policy, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			logger.Debug("quota store: could not read Redis maxmemory-policy (CONFIG may be disabled); make sure it does not evict keys without a TTL",
				"node", node, "error", err)
			return
		}
		if p := policy["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") {
			logger.Warn("quota store: Redis may evict Tollgate's budgets: maxmemory-policy is "+p+
				"; set it to noeviction (or a volatile-* policy) so a full Redis refuses writes instead of forgetting levels and leases",
				"node", node, "maxmemory_policy", p)
		}
	}
	switch c := rdb.(type) {
	case *goredis.Client:
		check(ctx, c.Options().Addr, c)
	case *goredis.ClusterClient:
		var mu sync.Mutex // ForEachMaster calls masters concurrently
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			check(ctx, m.Options().Addr, m)
			return nil
		})
		if err != nil {
			logger.Debug("quota store: could not reach the Redis Cluster's masters to read maxmemory-policy", "error", err)
		}
	}
}
