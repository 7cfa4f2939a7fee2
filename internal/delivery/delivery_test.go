package delivery_test

import (
	"math"
	"testing"

	"github.com/takeout/takeout/internal/delivery"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		lat1, lng1, lat2, lng2 float64
		want, tolerance        float64 // metres
	}{
		{"same point", 22.5431, 113.9348, 22.5431, 113.9348, 0, 0.001},
		{"one degree of latitude", 0, 0, 1, 0, 111_195, 5},
		{"one degree of longitude on the equator", 0, 0, 0, 1, 111_195, 5},
		{"Shenzhen Bay to Futian, about 13 km", 22.5167, 113.9383, 22.5431, 114.0579, 12_622, 50},
		{"antipodes", 0, 0, 0, 180, math.Pi * 6_371_008.8, 1},
	}
	for _, tt := range tests {
		if got := delivery.Distance(tt.lat1, tt.lng1, tt.lat2, tt.lng2); math.Abs(got-tt.want) > tt.tolerance {
			t.Errorf("%s: %.1f m, want %.1f ± %.1f", tt.name, got, tt.want, tt.tolerance)
		}
	}
}

func TestFeeAndCheck(t *testing.T) {
	t.Parallel()
	bands := []delivery.Band{{UpToM: 3000, FeeFen: 300}, {UpToM: 5000, FeeFen: 600}}
	for _, tt := range []struct {
		metres float64
		fee    int64
		ok     bool
	}{{0, 300, true}, {3000, 300, true}, {3000.5, 600, true}, {5000, 600, true}, {5001, 0, false}} {
		if fee, ok := delivery.Fee(bands, tt.metres); fee != tt.fee || ok != tt.ok {
			t.Errorf("Fee(%v m) = %d %v, want %d %v", tt.metres, fee, ok, tt.fee, tt.ok)
		}
	}
	if err := delivery.Check(bands); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]delivery.Band{
		{{UpToM: 5000, FeeFen: 1}, {UpToM: 3000, FeeFen: 1}},
		{{UpToM: 0, FeeFen: 1}},
		{{UpToM: 100, FeeFen: -1}},
		{{UpToM: 200_000, FeeFen: 1}},
	} {
		if delivery.Check(bad) == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
