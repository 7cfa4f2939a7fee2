package payment

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A flood of refusals logs one line per interval, and the next line says
// how many it left out.
func TestRefusalLogIsRateLimited(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	l := &refusalLog{every: time.Second, now: func() time.Time { return now }}
	for range 1000 {
		l.warn(context.Background(), logger, "payment notification refused")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("1000 refusals in one instant logged %d lines, want 1", n)
	}
	now = now.Add(time.Second)
	l.warn(context.Background(), logger, "payment notification refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"suppressed_since_last":999`) {
		t.Errorf("after the interval: %q, want a second line counting 999 left out", lines)
	}
}
