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
// resubscribes after connection failures with a backoff. ready, if not
// nil, is closed after the first subscription (at once when Redis is
// disabled).
func (c *Conn) Subscribe(ctx context.Context, channel string, sub Subscription, ready chan<- struct{}) {
	if c.Client == nil {
		if ready != nil {
			close(ready)
		}
		return
	}
	ps := c.Client.Subscribe(ctx, channel)
	// Receive blocks in a read that ignores ctx; closing ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		stop()
		_ = ps.Close()
	}()
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.logger.Debug("subscription interrupted", "channel", channel, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				sub.OnSubscribe()
				if ready != nil {
					close(ready)
					ready = nil
				}
			}
		case *redis.Message:
			sub.OnMessage(m.Payload)
		}
	}
}
