package redisconn

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Subscription handlers: OnMessage gets each payload; OnSubscribe runs on
// every (re)subscription, when messages sent while disconnected may have
// been lost, so callers flush what those messages would have invalidated.
type Subscription struct {
	OnMessage   func(payload string)
	OnSubscribe func()
}

// Subscribe delivers channel's messages to sub until ctx ends, and
// resubscribes after connection failures with a backoff. On a cluster it
// uses sharded pub/sub (SSUBSCRIBE), which Publish matches, and
// resubscribes when the channel's slot moves to another master (Redis
// then unsubscribes its clients). ready, if not nil, is closed after the
// first subscription (at once when Redis is disabled).
func (c *Conn) Subscribe(ctx context.Context, channel string, sub Subscription, ready chan<- struct{}) {
	if c.Client == nil {
		if ready != nil {
			close(ready)
		}
		return
	}
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for ctx.Err() == nil {
		moved := c.receive(ctx, channel, sub, &ready, &backoff)
		if !moved && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// receive runs one PubSub until it fails (false) or the server
// unsubscribed it because the slot moved (true).
func (c *Conn) receive(ctx context.Context, channel string, sub Subscription, ready *chan<- struct{}, backoff *time.Duration) bool {
	var ps *redis.PubSub
	if c.mode == ModeCluster {
		ps = c.Client.SSubscribe(ctx, channel)
	} else {
		ps = c.Client.Subscribe(ctx, channel)
	}
	// Receive blocks in a read that ignores ctx; closing ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		stop()
		_ = ps.Close()
	}()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.logger.Debug("subscription interrupted", "channel", channel, "err", err)
			}
			return false
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				*backoff = 100 * time.Millisecond
				sub.OnSubscribe()
				if *ready != nil {
					close(*ready)
					*ready = nil
				}
			case "sunsubscribe":
				c.logger.Info("sharded channel moved to another master: resubscribing", "channel", channel)
				return true
			}
		case *redis.Message:
			sub.OnMessage(m.Payload)
		}
	}
}
