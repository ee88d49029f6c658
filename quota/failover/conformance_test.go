package failover_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/failover"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestConformance runs the conformance suite on failover stores over a real
// Redis (the primary) with the memory store as the Local fallback, in each
// mode while Redis answers.
func TestConformance(t *testing.T) {
	for _, mode := range []failover.Mode{failover.Closed, failover.Open, failover.Local} {
		t.Run(mode.String(), func(t *testing.T) {
			quotatest.Run(t, func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
				rs, err := redis.New(redistest.Start(t), ps, redis.Options{Clock: clock})
				require.NoError(t, err)
				s, err := failover.New(rs, ps, failover.Options{Mode: mode, Clock: clock})
				require.NoError(t, err)
				return s
			})
		})
	}
}

// TestConformanceWhileRedisIsDown runs the conformance suite on a Local
// failover store whose Redis has stopped: from the first call on, the
// memory store decides.
//
// Closed and Open are not run degraded: by design Closed refuses every
// reservation and Open grants every one past every limit, so the suite's
// cases cannot hold for them; failover_test.go tests what they do instead.
func TestConformanceWhileRedisIsDown(t *testing.T) {
	quotatest.Run(t, func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
		if why, ok := degradedExclusions[strings.TrimPrefix(t.Name(), "TestConformanceWhileRedisIsDown/")]; ok {
			t.Skip("cannot hold while the primary is down: " + why)
		}
		srv := redistest.StartServer(t)
		opts := srv.Options()
		opts.MaxRetries = -1 // fail fast: the server is gone
		opts.DialerRetries = 1
		opts.DialTimeout = 250 * time.Millisecond
		rs, err := redis.New(goredisClient(t, opts), ps, redis.Options{Clock: clock})
		require.NoError(t, err)
		srv.Stop()
		s, err := failover.New(rs, ps, failover.Options{Mode: failover.Local, Clock: clock})
		require.NoError(t, err)
		return s
	})
}

// degradedExclusions are the conformance cases a degraded Local store
// cannot pass, with the reason. Each settles, cancels or renews a ticket
// that was never reserved, and expects quota.ErrUnknownTicket (or, for
// Cancel, nil). A degraded store cannot know that: a ticket its Local
// store never admitted may be one the unreachable primary granted before
// the outage, which only the primary can settle, so it answers
// quota.ErrUnavailable (TestLocalAdmitsAShareWhileRedisIsDown).
var degradedExclusions = map[string]string{
	"unknown_ticket":                        "Settle of a never-reserved ticket",
	"cancel":                                "Cancel of a never-reserved ticket",
	"renew":                                 "Renew of a never-reserved ticket",
	"settle_expired":                        "Settle of a never-reserved ticket",
	"calibration/learns_without_the_ticket": "Settle of never-reserved tickets",
}
