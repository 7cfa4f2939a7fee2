package testenv

import (
	"context"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/redisconn"
)

// Redis is a test's view of Redis: the server URL and a key prefix no
// other test uses.
type Redis struct {
	URL    string
	Prefix string
}

// NewRedis returns this test's Redis and deletes its keys when the test
// ends.
func NewRedis(t testing.TB) Redis {
	t.Helper()
	u, err := redisURL()
	if err != nil {
		t.Fatalf("test redis: %v", err)
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("test redis url: %v", err)
	}
	c := redis.NewClient(opts)
	if err := c.Ping(context.Background()).Err(); err != nil {
		c.Close()
		t.Fatalf("test redis at %s: %v (%s)", u, err, howToRun)
	}
	r := Redis{URL: u, Prefix: "test:" + randomHex(6) + ":"}
	t.Cleanup(func() {
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, r.Prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return r
}

// Conn returns a redisconn.Conn on this test's prefix, closed at the end.
func (r Redis) Conn(t testing.TB) *redisconn.Conn {
	t.Helper()
	c, err := redisconn.New(redisconn.Options{URL: r.URL, Prefix: r.Prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("redis conn: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
