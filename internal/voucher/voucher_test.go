package voucher

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpread(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n      int32
		shards int
		want   []int32
	}{
		{100, 8, []int32{13, 13, 13, 13, 12, 12, 12, 12}},
		{3, 8, []int32{1, 1, 1, 0, 0, 0, 0, 0}},
		{1, 1, []int32{1}},
		{16, 8, []int32{2, 2, 2, 2, 2, 2, 2, 2}},
		{10_000_000, 8, []int32{1_250_000, 1_250_000, 1_250_000, 1_250_000, 1_250_000, 1_250_000, 1_250_000, 1_250_000}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, spread(tc.n, tc.shards)); diff != "" {
			t.Errorf("spread(%d, %d) (-want +got):\n%s", tc.n, tc.shards, diff)
		}
	}
	// Every budget: the shares sum to it and differ by at most one.
	for n := int32(1); n <= 200; n++ {
		for shards := 1; shards <= 16; shards++ {
			got := spread(n, shards)
			var sum int32
			for _, u := range got {
				sum += u
			}
			if sum != n || slices.Max(got)-slices.Min(got) > 1 {
				t.Fatalf("spread(%d, %d) = %v", n, shards, got)
			}
		}
	}
}
