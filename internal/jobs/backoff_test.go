package jobs

import (
	"testing"
	"time"
)

// The backoff doubles from one second and stops growing at Max; jitter
// adds at most a tenth.
func TestCappedBackoff(t *testing.T) {
	t.Parallel()
	b := CappedBackoff{Max: time.Minute}
	for _, tc := range []struct {
		attempt int
		base    time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second},
		{7, time.Minute}, {25, time.Minute}, {1000, time.Minute}, {0, time.Minute},
	} {
		for range 50 {
			d := b.delay(tc.attempt)
			if d < tc.base || d > tc.base+tc.base/10 {
				t.Fatalf("attempt %d: delay %s, want %s to %s", tc.attempt, d, tc.base, tc.base+tc.base/10)
			}
		}
	}
}
