// Package delivery prices delivery by distance: a shop sets bands (up to
// so many metres, so many fen), and an address is priced by its
// great-circle distance from the shop. A leaf package: the catalog checks
// a shop's bands, the order capability prices a cart with them.
package delivery

import (
	"fmt"
	"math"
)

// Band is one distance band: addresses up to UpToM metres away pay
// FeeFen.
type Band struct {
	UpToM  int32 `json:"up_to_m"`
	FeeFen int64 `json:"fee_fen"`
}

// Limits of a shop's bands.
const (
	MaxBands    = 10
	MaxDistance = 100_000 // metres
	MaxFeeFen   = 100_000_000
)

// Check reports bands that are not ascending, or out of range.
func Check(bands []Band) error {
	if len(bands) > MaxBands {
		return fmt.Errorf("at most %d bands", MaxBands)
	}
	for i, b := range bands {
		switch {
		case b.UpToM < 1 || b.UpToM > MaxDistance:
			return fmt.Errorf("[%d].up_to_m: must be between 1 and %d metres", i, MaxDistance)
		case i > 0 && b.UpToM <= bands[i-1].UpToM:
			return fmt.Errorf("[%d].up_to_m: bands must grow (%d after %d)", i, b.UpToM, bands[i-1].UpToM)
		case b.FeeFen < 0 || b.FeeFen > MaxFeeFen:
			return fmt.Errorf("[%d].fee_fen: must be between 0 and %d", i, MaxFeeFen)
		}
	}
	return nil
}

// Fee is the fee of the first band that reaches metres; false beyond the
// last.
func Fee(bands []Band, metres float64) (int64, bool) {
	for _, b := range bands {
		if metres <= float64(b.UpToM) {
			return b.FeeFen, true
		}
	}
	return 0, false
}

// earthRadius is the mean radius of the Earth (IUGG), in metres.
const earthRadius = 6_371_008.8

// Distance is the great-circle (haversine) distance in metres between
// two points given in degrees.
func Distance(lat1, lng1, lat2, lng2 float64) float64 {
	rad := math.Pi / 180
	dLat, dLng := (lat2-lat1)*rad, (lng2-lng1)*rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLng/2)*math.Sin(dLng/2)
	return 2 * earthRadius * math.Asin(math.Min(1, math.Sqrt(h)))
}
