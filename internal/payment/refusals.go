package payment

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// refusalLog logs refused callbacks at WARN at most once per interval:
// anyone can post forged callbacks, and a flood of them must not flood
// the logs. The next line logged says how many were left out; the
// callbacks metric counts every one.
type refusalLog struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	next       time.Time
	suppressed int
}

func (l *refusalLog) warn(ctx context.Context, logger *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := l.now()
	if now.Before(l.next) {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.next = now.Add(l.every)
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed_since_last", suppressed)
	}
	logger.WarnContext(ctx, msg, args...)
}
