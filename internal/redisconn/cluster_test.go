package redisconn_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/lab/ha"
	"github.com/takeout/takeout/internal/redisconn"
)

func TestNewClientModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		mode    redisconn.Mode
		wantErr bool
	}{
		{"redis://127.0.0.1:6379/0", redisconn.ModeStandalone, false},
		{"redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", redisconn.ModeCluster, false},
		{"redis://127.0.0.1:7000?mode=cluster", redisconn.ModeCluster, false},
		{"redis://127.0.0.1:26379?master_name=takeout&addr=127.0.0.1:26380", redisconn.ModeSentinel, false},
		{"redis://127.0.0.1:6379/0?mode=standalone&read_timeout=2s", redisconn.ModeStandalone, false},
		{"redis://127.0.0.1:6379?mode=ring", "", true},
		{"redis://127.0.0.1:6379?no_such_option=1", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, mode, err := redisconn.NewClient(tt.url)
			if tt.wantErr {
				if err == nil {
					c.Close()
					t.Fatalf("NewClient(%q) accepted a bad URL", tt.url)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if mode != tt.mode {
				t.Errorf("mode %s, want %s", mode, tt.mode)
			}
			switch cl := c.(type) {
			case *redis.ClusterClient:
				if mode != redisconn.ModeCluster {
					t.Errorf("a cluster client for mode %s", mode)
				}
				if o := cl.Options(); o.ReadTimeout != 500*time.Millisecond || o.DialerRetries != 1 || o.MaxRetries != 1 {
					t.Errorf("cluster not fail-fast: read %s, dials %d, retries %d", o.ReadTimeout, o.DialerRetries, o.MaxRetries)
				}
			case *redis.Client:
				want := 500 * time.Millisecond
				if slices.Contains([]string{"redis://127.0.0.1:6379/0?mode=standalone&read_timeout=2s"}, tt.url) {
					want = 2 * time.Second // the URL's own setting wins
				}
				if o := cl.Options(); o.ReadTimeout != want || o.DialTimeout != 500*time.Millisecond {
					t.Errorf("read timeout %s (want %s), dial %s", o.ReadTimeout, want, o.DialTimeout)
				}
			default:
				t.Errorf("client %T", c)
			}
		})
	}
}

// TestCluster runs against a real Redis Cluster of three masters: health
// per master (one down is partial, not down), sharded pub/sub, and keys
// named by their shard.
func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc, err := ha.StartRedisCluster(ctx, t.TempDir(), 3, 0)
	if rc != nil {
		t.Cleanup(rc.Stop)
	}
	if err != nil {
		t.Fatalf("start a redis cluster (make ha-packages installs redis-server): %v", err)
	}
	open := func() *redisconn.Conn {
		c, err := redisconn.New(redisconn.Options{URL: rc.URL(), Prefix: "t:", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	sub, pub := open(), open()
	sub.Check(ctx)
	if sub.State() != redisconn.StateUp || sub.Mode() != redisconn.ModeCluster || sub.MastersDown() != 0 {
		t.Fatalf("state %s mode %s down %d, want up cluster 0", sub.State(), sub.Mode(), sub.MastersDown())
	}

	// Sharded pub/sub: what one Conn publishes, another receives.
	got := make(chan string, 1)
	ready := make(chan struct{})
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	channel := sub.Key("invalidate")
	go sub.Subscribe(sctx, channel, redisconn.Subscription{OnMessage: func(p string) { got <- p }, OnSubscribe: func() {}}, ready)
	<-ready
	if err := pub.Publish(ctx, channel, "merchant 7"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "merchant 7" {
			t.Errorf("received %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sharded message never arrived")
	}

	// Keys of one hash tag live on one shard, a cluster master.
	a, b := sub.Shard(ctx, "t:idem:{user:1:k}"), sub.Shard(ctx, "t:idem:{user:1:k}x")
	if a != b || !slices.Contains(rc.Addrs(), a) {
		t.Errorf("shards %q and %q, want one node of %v", a, b, rc.Addrs())
	}

	// One master down: partial, still available for the other slots.
	if err := rc.KillNode(a); err != nil {
		t.Fatal(err)
	}
	sub.Check(ctx)
	if sub.State() != redisconn.StatePartial || sub.MastersDown() != 1 || !sub.Available() {
		t.Errorf("one master down: state %s down %d available %v, want partial 1 true", sub.State(), sub.MastersDown(), sub.Available())
	}
}
