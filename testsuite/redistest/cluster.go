package redistest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterMasters is how many masters StartCluster starts.
const ClusterMasters = 3

// clusterTimeout bounds forming the cluster: redis-cli --cluster create,
// then every node agreeing the cluster is ok.
const clusterTimeout = 30 * time.Second

// Cluster is a real Redis Cluster owned by a test: ClusterMasters
// redis-server processes with cluster mode on, the 16384 slots split between
// them, no replicas. Its methods must be called from the test's goroutine;
// the clients it returns are safe for concurrent use.
type Cluster struct {
	t     testing.TB
	bin   string // redis-server
	cli   string // redis-cli
	dir   string
	nodes []clusterNode
}

// clusterNode is one master's process.
type clusterNode struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartCluster starts a Redis Cluster of ClusterMasters masters on free
// loopback ports, persistence off, their files in t.TempDir(); forms it with
// redis-cli --cluster create; waits until every node reports cluster_state:ok
// and knows every other; and stops it at t.Cleanup.
//
// A cluster needs redis-server (see EnvServer) and redis-cli, found beside
// it or on PATH (Debian's redis-server package brings both), and is always
// started by the test, TOLLGATE_TEST_REDIS_URL or not. When either is
// missing the test is skipped with one line, or fails if
// TOLLGATE_TEST_REQUIRE_REDIS=1.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := needBinary(t, os.Getenv, exec.LookPath, "a Redis Cluster")
	cli, err := findCLI(bin, exec.LookPath)
	if err != nil {
		msg := fmt.Sprintf("redistest: a Redis Cluster needs redis-cli, which is neither beside %s nor on PATH (%s)", bin, installHint)
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s; %s=1", msg, EnvRequire)
		}
		t.Skip(msg)
	}
	c := &Cluster{t: t, bin: bin, cli: cli, dir: t.TempDir()}
	t.Cleanup(c.stop)
	for i := range ClusterMasters {
		n, err := c.startNode()
		if err != nil {
			t.Fatalf("redistest: start cluster node %d of %d: %v", i+1, ClusterMasters, err)
		}
		c.nodes = append(c.nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.create(ctx); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if err := c.waitOK(ctx); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// startNode launches one cluster-enabled redis-server on a free port with a
// free cluster bus port of its own (not port+10000, which may be taken or
// past 65535), trying a few pairs in case another process takes one first.
func (c *Cluster) startNode() (clusterNode, error) {
	var err error
	for range 3 {
		var port, bus int
		if port, err = freePort(); err != nil {
			continue
		}
		if bus, err = freePort(); err != nil || bus == port {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd, exited, lerr := runRedis(c.bin, addr, c.dir,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000")
		if err = lerr; err == nil {
			return clusterNode{addr: addr, cmd: cmd, exited: exited}, nil
		}
	}
	return clusterNode{}, err
}

// create assigns the slots across the nodes with redis-cli.
func (c *Cluster) create(ctx context.Context) error {
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.cli, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("redis-cli %s: %w: %s", strings.Join(args, " "), err, lastLines(out.Bytes(), 8))
	}
	return nil
}

// findCLI finds redis-cli beside the redis-server binary bin, else on PATH.
func findCLI(bin string, lookPath func(string) (string, error)) (string, error) {
	if filepath.IsAbs(bin) || strings.ContainsRune(bin, filepath.Separator) {
		beside := filepath.Join(filepath.Dir(bin), "redis-cli")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	return lookPath("redis-cli")
}

// waitOK waits until every node reports cluster_state:ok and knows all the
// others, so a client's first CLUSTER SLOTS sees the whole cluster.
func (c *Cluster) waitOK(ctx context.Context) error {
	want := "cluster_known_nodes:" + strconv.Itoa(len(c.nodes))
	for _, n := range c.nodes {
		rdb := goredis.NewClient(&goredis.Options{Addr: n.addr, MaxRetries: -1})
		var info string
		var err error
		for {
			info, err = rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			if ctx.Err() != nil {
				rdb.Close()
				return fmt.Errorf("cluster node %s not ready within %s: %v %s", n.addr, clusterTimeout, err, oneLine(info))
			}
			time.Sleep(20 * time.Millisecond)
		}
		rdb.Close()
	}
	return nil
}

// Addrs returns the masters' host:port addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// URL returns the cluster in the form of the worker's REDIS_URL,
// redis+cluster://host:port,host:port,host:port.
func (c *Cluster) URL() string {
	return "redis+cluster://" + strings.Join(c.Addrs(), ",")
}

// Options returns fresh cluster client options seeded with every master,
// for callers that want to change timeouts or pool sizes before building a
// client.
func (c *Cluster) Options() *goredis.ClusterOptions {
	return &goredis.ClusterOptions{Addrs: c.Addrs()}
}

// Client returns a new cluster client, closed when the test ends.
func (c *Cluster) Client() *goredis.ClusterClient {
	c.t.Helper()
	rdb := goredis.NewClusterClient(c.Options())
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func (c *Cluster) stop() {
	for _, n := range c.nodes {
		stopRedis(n.cmd, n.exited)
	}
	c.nodes = nil
}

// oneLine shortens a CLUSTER INFO reply for an error message.
func oneLine(info string) string {
	return strings.Join(strings.Fields(info), " ")
}
