// Package ha runs the highly available stack on one machine, for the
// soak, the quick HA check and `make ha`: a Redis Cluster of redis-server
// processes, and PostgreSQL members managed by Patroni on an etcd
// cluster, all from Debian's packages. Each server is a child process in
// a directory of the caller's, so that faults can SIGKILL it as a host
// crash would, and bring it back.
package ha

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/lab"
)

// RedisCluster is a Redis Cluster of masters with their replicas.
type RedisCluster struct {
	dir      string
	replicas int // per master
	nodes    []*redisNode
}

type redisNode struct {
	dir  string
	port int
	// public is the address the node announces to clients and to the
	// other nodes' replication (a proxy in front of it); empty when that
	// is its own.
	public string
	mu     sync.Mutex
	proc   *lab.Process
}

func (n *redisNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// pub is the address clients reach the node at.
func (n *redisNode) pub() string { return cmp.Or(n.public, n.addr()) }

// RedisFront puts something (a proxy) in front of a node: it is given the
// node's own address and returns the address clients are to use instead.
type RedisFront func(upstream string) (string, error)

// StartRedisCluster starts masters x (1+replicas) cluster-enabled
// redis-servers under dir, creates the cluster and waits until every
// node says the cluster is ok. A node keeps nothing but its cluster
// configuration on disk: a killed master comes back empty and rejoins as
// the replica of the node that took over its slots.
func StartRedisCluster(ctx context.Context, dir string, masters, replicas int) (*RedisCluster, error) {
	return StartRedisClusterBehind(ctx, dir, masters, replicas, nil)
}

// StartRedisClusterBehind is StartRedisCluster with each node behind what
// front puts there (nil: nothing): the nodes announce the front's address
// (cluster-announce-port), so that clients, following the cluster's
// redirections, and replicas, following their masters, all go through
// it, while the cluster bus stays direct.
func StartRedisClusterBehind(ctx context.Context, dir string, masters, replicas int, front RedisFront) (*RedisCluster, error) {
	for _, tool := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: run `make ha` once (it installs redis-server and redis-tools)", tool)
		}
	}
	c := &RedisCluster{dir: dir, replicas: replicas}
	for range masters * (1 + replicas) {
		port, err := freeNodePort()
		if err != nil {
			return c, err
		}
		n := &redisNode{dir: filepath.Join(dir, "redis-"+strconv.Itoa(port)), port: port}
		if err := os.MkdirAll(n.dir, 0o750); err != nil {
			return c, err
		}
		if front != nil {
			if n.public, err = front(n.addr()); err != nil {
				return c, err
			}
		}
		c.nodes = append(c.nodes, n)
		if err := n.start(ctx); err != nil {
			return c, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil { //nolint:gosec // G204: our own nodes
		return c, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	return c, c.WaitHealthy(ctx, 60*time.Second)
}

// clusterBusOffset is how far above a node's port Redis puts its
// cluster bus.
const clusterBusOffset = 10000

// freeNodePort is a free port whose cluster bus port is free too: a node
// whose bus cannot bind exits after its client port answered, and one
// above 55535 has no bus port at all.
func freeNodePort() (int, error) {
	for range 100 {
		port, err := lab.FreePort()
		if err != nil {
			return 0, err
		}
		if port+clusterBusOffset > 65535 {
			continue
		}
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(port+clusterBusOffset))
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, errors.New("no free port with a free cluster bus port in 100 tries")
}

func (n *redisNode) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	// A node that was a replica kept the snapshot of its last full sync
	// (a replica loads one from disk); loaded at a restart, it would bring
	// back keys of slots the node no longer serves (left importing) and
	// stale ones of those it does. A node comes back empty.
	if err := os.Remove(filepath.Join(n.dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	args := []string{"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--dir", n.dir}
	if n.public != "" {
		host, port, _ := strings.Cut(n.public, ":")
		args = append(args, "--cluster-announce-ip", host, "--cluster-announce-port", port,
			"--cluster-announce-bus-port", strconv.Itoa(n.port+clusterBusOffset))
	}
	p, err := lab.Start(ctx, filepath.Join(n.dir, "redis.log"), "redis-server", nil, append(args,
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		// A master is failed over 2 s after it stops answering.
		"--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
		// A replica of a dead master takes over however long it has been
		// apart from it: the service never waits for a human.
		"--cluster-replica-validity-factor", "0",
		// Slots whose master is gone fail alone; the rest keep serving
		// (the default stops the whole cluster), which is what takeout's
		// per-shard fallback to PostgreSQL expects.
		"--cluster-require-full-coverage", "no")...)
	if err != nil {
		return err
	}
	n.proc = p
	return lab.WaitTCP(ctx, n.addr(), 10*time.Second)
}

func (n *redisNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil
}

func (n *redisNode) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.proc.Kill()
		n.proc = nil
	}
}

// URL is TAKEOUT_REDIS_URL for the cluster: every node as a seed.
func (c *RedisCluster) URL() string {
	u := "redis://" + c.nodes[0].pub()
	for i, n := range c.nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.pub()
	}
	return u
}

// Addrs lists every node's address.
func (c *RedisCluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.pub()
	}
	return a
}

// node is the node at addr, its own or its public one (CLUSTER NODES
// names the public).
func (c *RedisCluster) node(addr string) *redisNode {
	for _, n := range c.nodes {
		if n.addr() == addr || n.pub() == addr {
			return n
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	master, failed     bool
	slots              int
}

// nodesView asks a live node for CLUSTER NODES.
func (c *RedisCluster) nodesView(ctx context.Context) ([]clusterNode, error) {
	var last error
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
		out, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err != nil {
			last = err
			continue
		}
		return parseClusterNodes(out), nil
	}
	return nil, fmt.Errorf("no redis node answered CLUSTER NODES: %w", last)
}

func parseClusterNodes(out string) []clusterNode {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		cn := clusterNode{id: f[0], addr: addr, masterID: f[3],
			master: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if ok {
				b, _ = strconv.Atoi(hi)
			}
			cn.slots += b - a + 1
		}
		nodes = append(nodes, cn)
	}
	return nodes
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// every slot is served by a master that is not failed.
func (c *RedisCluster) WaitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := c.healthy(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis cluster not healthy within %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *RedisCluster) healthy(ctx context.Context) error {
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := cl.ClusterInfo(ctx).Result()
		cl.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", n.addr())
		}
	}
	view, err := c.nodesView(ctx)
	if err != nil {
		return err
	}
	slots := 0
	replicasOf := map[string]int{}
	for _, n := range view {
		if n.master && !n.failed {
			slots += n.slots
		}
		if !n.master && !n.failed {
			replicasOf[n.masterID]++
		}
	}
	if slots != 16384 {
		return fmt.Errorf("%d of 16384 slots served", slots)
	}
	for _, n := range view {
		if n.master && n.slots > 0 && replicasOf[n.id] < c.replicas {
			return fmt.Errorf("master %s has %d of %d replicas", n.addr, replicasOf[n.id], c.replicas)
		}
	}
	return nil
}

// KillMaster SIGKILLs a random master, waits until its replica has taken
// over its slots, then starts the killed node again, which rejoins as a
// replica. It returns the killed address and how long the slots had no
// master.
func (c *RedisCluster) KillMaster(ctx context.Context) (string, time.Duration, error) {
	view, err := c.nodesView(ctx)
	if err != nil {
		return "", 0, err
	}
	victim, err := randomMaster(view)
	if err != nil {
		return "", 0, err
	}
	n := c.node(victim.addr)
	if n == nil {
		return "", 0, fmt.Errorf("master %s is not one of ours", victim.addr)
	}
	killed := time.Now()
	n.kill()
	werr := c.waitTakenOver(ctx, view, victim.id)
	gap := time.Since(killed)
	if err := n.start(context.WithoutCancel(ctx)); err != nil {
		return victim.addr, gap, err
	}
	if werr != nil {
		return victim.addr, gap, werr
	}
	return victim.addr, gap, c.waitRejoined(ctx, victim.id)
}

// KillShard SIGKILLs a random master and every replica of it together,
// as a shard whose hosts all crashed, leaves them down for down, and
// starts them again: they come back empty (nodes keep nothing but their
// cluster configuration), the master with its slots, so whatever the
// shard held is gone. It returns the master's address and how long the
// shard's slots went unserved, until the cluster is healthy again.
func (c *RedisCluster) KillShard(ctx context.Context, down time.Duration) (string, time.Duration, error) {
	view, err := c.nodesView(ctx)
	if err != nil {
		return "", 0, err
	}
	victim, err := randomMaster(view)
	if err != nil {
		return "", 0, err
	}
	var shard []*redisNode
	for _, n := range view {
		if n.id == victim.id || n.masterID == victim.id {
			node := c.node(n.addr)
			if node == nil {
				return "", 0, fmt.Errorf("node %s is not one of ours", n.addr)
			}
			shard = append(shard, node)
		}
	}
	killed := time.Now()
	for _, n := range shard {
		n.kill()
	}
	sleep(ctx, down)
	for _, n := range shard {
		if err := n.start(context.WithoutCancel(ctx)); err != nil {
			return victim.addr, time.Since(killed), err
		}
	}
	err = c.WaitHealthy(ctx, 60*time.Second)
	return victim.addr, time.Since(killed), err
}

// servingMasters are the masters of view that serve slots and are not
// failed.
func servingMasters(view []clusterNode) []clusterNode {
	var masters []clusterNode
	for _, n := range view {
		if n.master && !n.failed && n.slots > 0 {
			masters = append(masters, n)
		}
	}
	return masters
}

// randomMaster picks one of view's serving masters, a fault's victim.
func randomMaster(view []clusterNode) (clusterNode, error) {
	masters := servingMasters(view)
	if len(masters) == 0 {
		return clusterNode{}, errors.New("no healthy master to kill")
	}
	return masters[rand.IntN(len(masters))], nil //nolint:gosec // G404: picks a victim, guards nothing
}

// waitTakenOver waits until one of the replicas that id had in before
// is a master serving slots.
func (c *RedisCluster) waitTakenOver(ctx context.Context, before []clusterNode, id string) error {
	replicas := map[string]bool{}
	for _, n := range before {
		if n.masterID == id {
			replicas[n.id] = true
		}
	}
	if len(replicas) == 0 {
		return fmt.Errorf("master %s has no replica to take over", id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if view, err := c.nodesView(ctx); err == nil {
			for _, n := range view {
				if replicas[n.id] && n.master && n.slots > 0 {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no replica of %s took over within 60s", id)
}

// waitRejoined waits until the node id is a replica again, in sync.
func (c *RedisCluster) waitRejoined(ctx context.Context, id string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		view, err := c.nodesView(ctx)
		if err == nil {
			for _, n := range view {
				if n.id == id && !n.master && !n.failed {
					return c.WaitHealthy(ctx, 30*time.Second)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s did not rejoin as a replica within 60s", id)
}

// MigrateSlots moves count slots, keys and all, from one master to
// another with redis-cli --cluster reshard, while clients keep using
// them (MOVED and ASK redirect them). It returns a description.
func (c *RedisCluster) MigrateSlots(ctx context.Context, count int) (string, error) {
	view, err := c.nodesView(ctx)
	if err != nil {
		return "", err
	}
	masters := servingMasters(view)
	if len(masters) < 2 {
		return "", errors.New("need two masters to migrate slots")
	}
	perm := rand.Perm(len(masters)) //nolint:gosec // G404: picks masters, guards nothing
	from, to := masters[perm[0]], masters[perm[1]]
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", from.addr, //nolint:gosec // G204: our own nodes
		"--cluster-from", from.id, "--cluster-to", to.id, "--cluster-slots", strconv.Itoa(count),
		"--cluster-yes", "--cluster-timeout", "5000", "--cluster-pipeline", "100").CombinedOutput()
	desc := fmt.Sprintf("%d slots %s -> %s", count, from.addr, to.addr)
	if err != nil {
		return desc, fmt.Errorf("redis-cli --cluster reshard: %w: %s", err, lastLines(string(out), 5))
	}
	return desc, c.WaitHealthy(ctx, 30*time.Second)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// KillNode SIGKILLs the node at addr and leaves it down (tests).
func (c *RedisCluster) KillNode(addr string) error {
	n := c.node(addr)
	if n == nil {
		return fmt.Errorf("no node %s", addr)
	}
	n.kill()
	return nil
}

// FlushAll empties every master (tests).
func (c *RedisCluster) FlushAll(ctx context.Context) error {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
}

// Stop kills every node.
func (c *RedisCluster) Stop() {
	for _, n := range c.nodes {
		n.kill()
	}
}
