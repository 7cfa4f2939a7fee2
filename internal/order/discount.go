package order

// An order's discount to the fen: spread over its lines as sold, and what
// a refund of some of a line's units gives back.

import (
	"math/big"
	"slices"
)

// spreadDiscount divides discount over lines whose totals are lineTotals
// in proportion to them, by largest remainder: each line gets the whole
// fen of its share, and the fen left over go one each to the lines with
// the largest fractions (the earlier line on a tie), so that the shares
// sum to the discount exactly. A discount above the lines' sum is held to
// it; no share exceeds its line.
func spreadDiscount(lineTotals []int64, discount int64) []int64 {
	shares := make([]int64, len(lineTotals))
	var sum int64
	for _, t := range lineTotals {
		sum += t
	}
	discount = min(discount, sum)
	if discount <= 0 || sum <= 0 {
		return shares
	}
	type frac struct {
		line int
		rem  *big.Int
	}
	fracs := make([]frac, len(lineTotals))
	total, d := big.NewInt(sum), big.NewInt(discount)
	left := discount
	for i, t := range lineTotals {
		// discount * t can exceed an int64: fen of large orders.
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(d, big.NewInt(t)), total, new(big.Int))
		shares[i] = q.Int64()
		left -= shares[i]
		fracs[i] = frac{i, r}
	}
	slices.SortStableFunc(fracs, func(a, b frac) int { return -a.rem.Cmp(b.rem) })
	for _, f := range fracs[:left] { // left < len(lines): each fraction is under one fen
		shares[f.line]++
	}
	return shares
}

// refundOfUnits is what a refund of k units of a line gives back when
// refunded of its qty units were refunded before: the units' price and
// packaging, less their part of the line's discount. The discount's part
// of the first n units is floor(discount * n / qty), so the parts of any
// sequence of refunds of a line sum to exactly its discount when every
// unit is refunded, and each refund gives back at most what its units
// cost.
func refundOfUnits(unitPriceFen, packagingFeeFen, discountFen int64, qty, refunded, k int32) int64 {
	part := func(n int32) int64 { return discountFen * int64(n) / int64(max(qty, 1)) }
	return int64(k)*(unitPriceFen+packagingFeeFen) - (part(refunded+k) - part(refunded))
}
