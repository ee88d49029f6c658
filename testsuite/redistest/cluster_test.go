package redistest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestClusterSplitsSlotsAcrossMasters: StartCluster forms a real cluster
// whose masters each own slots, and its client follows keys to them.
func TestClusterSplitsSlotsAcrossMasters(t *testing.T) {
	c := StartCluster(t)
	require.Len(t, c.Addrs(), ClusterMasters)
	rdb := c.Client()
	ctx := context.Background()

	slots, err := rdb.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	owners := map[string]int{}
	for _, s := range slots {
		owners[s.Nodes[0].Addr] += s.End - s.Start + 1
	}
	require.Len(t, owners, ClusterMasters, "every master owns slots")
	total := 0
	for _, n := range owners {
		total += n
	}
	require.Equal(t, 16384, total, "every slot is assigned")

	for i := range 30 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	var holding atomic.Int32
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			holding.Add(1) // ForEachMaster calls masters concurrently
		}
		return err
	}))
	require.Greater(t, holding.Load(), int32(1), "keys spread over the masters")
	require.Equal(t, "redis+cluster://"+c.Addrs()[0]+","+c.Addrs()[1]+","+c.Addrs()[2], c.URL())
}
