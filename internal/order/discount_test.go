package order

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestSpreadDiscount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lines    []int64
		discount int64
		want     []int64
	}{
		{"none", []int64{1000, 2000}, 0, []int64{0, 0}},
		{"even", []int64{1000, 1000}, 500, []int64{250, 250}},
		{"proportional", []int64{1000, 3000}, 400, []int64{100, 300}},
		// 500 over 3 equal lines: 166.67 each; the one fen left goes to
		// the first of the tied fractions.
		{"remainder to the first tie", []int64{100, 100, 100}, 200, []int64{67, 67, 66}},
		// 10 over 700, 200, 100: 7, 2, 1 exactly.
		{"exact", []int64{700, 200, 100}, 10, []int64{7, 2, 1}},
		// 5 over 3300, 3300, 3400: 1.65, 1.65, 1.7 -> 1, 1, 1 and two left:
		// to the largest fractions, 1.7 then the first 1.65.
		{"largest fraction first", []int64{3300, 3300, 3400}, 5, []int64{2, 1, 2}},
		{"held to the lines", []int64{300, 200}, 900, []int64{300, 200}},
		{"one line", []int64{4200}, 1234, []int64{1234}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, spreadDiscount(tc.lines, tc.discount)); diff != "" {
				t.Errorf("spreadDiscount(%v, %d) (-want +got):\n%s", tc.lines, tc.discount, diff)
			}
		})
	}
}

// Any discount over any lines: the shares sum to the discount (held to
// the lines' sum), none is negative or above its line, and each is within
// a fen of the line's exact proportion.
func TestSpreadDiscountProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lines := rapid.SliceOfN(rapid.Int64Range(1, 99*1_000_000), 1, maxItems).Draw(rt, "lines")
		var sum int64
		for _, l := range lines {
			sum += l
		}
		discount := rapid.Int64Range(0, sum+1000).Draw(rt, "discount")
		shares := spreadDiscount(lines, discount)
		var got int64
		for i, s := range shares {
			if s < 0 || s > lines[i] {
				rt.Fatalf("line %d of %d fen got %d", i, lines[i], s)
			}
			// |s - discount*line/sum| < 1, as rationals: |s*sum - discount*line| < sum.
			exact := float64(min(discount, sum)) * float64(lines[i]) / float64(sum)
			if d := float64(s) - exact; d <= -1 || d >= 1 {
				rt.Fatalf("line %d: share %d, exact %.3f", i, s, exact)
			}
			got += s
		}
		if want := min(discount, sum); got != want {
			rt.Fatalf("shares sum to %d, want %d", got, want)
		}
	})
}

// The money of an order's lines to the fen: whatever sequence of partial
// refunds of a discounted order's lines, each refund gives back at most
// what its units were sold for, the refunds never sum to more than the
// lines were sold for, and to exactly that when every unit is refunded.
func TestRefundOfUnitsProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		type line struct {
			unit, packaging, qty, discount int64
			refunded                       int32
		}
		n := rapid.IntRange(1, 6).Draw(rt, "lines")
		lines := make([]line, n)
		totals := make([]int64, n)
		var sold int64
		for i := range lines {
			l := line{
				unit:      rapid.Int64Range(0, 100_000).Draw(rt, "unit"),
				packaging: rapid.Int64Range(0, 500).Draw(rt, "packaging"),
				qty:       int64(rapid.IntRange(1, maxQty).Draw(rt, "qty")),
			}
			lines[i], totals[i] = l, l.unit*l.qty
		}
		var items int64
		for _, t := range totals {
			items += t
		}
		shares := spreadDiscount(totals, rapid.Int64Range(0, items).Draw(rt, "discount"))
		for i := range lines {
			lines[i].discount = shares[i]
			sold += lines[i].qty*(lines[i].unit+lines[i].packaging) - shares[i]
		}
		var refunded int64
		for left := true; left; {
			i := rapid.IntRange(0, n-1).Draw(rt, "line")
			l := &lines[i]
			if rest := int32(l.qty) - l.refunded; rest > 0 { //nolint:gosec // G115: qty <= maxQty
				k := rapid.Int32Range(1, rest).Draw(rt, "units")
				got := refundOfUnits(l.unit, l.packaging, l.discount, int32(l.qty), l.refunded, k) //nolint:gosec // G115: qty <= maxQty
				if got < 0 || got > int64(k)*(l.unit+l.packaging) {
					rt.Fatalf("%d units of line %d (%d fen each, %d off the line) refund %d", k, i, l.unit+l.packaging, l.discount, got)
				}
				l.refunded += k
				refunded += got
			}
			if refunded > sold {
				rt.Fatalf("refunds came to %d, more than the %d the lines were sold for", refunded, sold)
			}
			left = false
			for _, l := range lines {
				left = left || int64(l.refunded) < l.qty
			}
		}
		if refunded != sold {
			rt.Fatalf("every unit refunded gave back %d, want the %d the lines were sold for", refunded, sold)
		}
	})
}
