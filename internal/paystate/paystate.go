// Package paystate names the statuses of takeout's payment attempts and
// refunds, as the payments and refunds tables store them (their CHECK
// constraints list the same words). It is a leaf, so that the generated
// queries can carry these types and no status is a bare string.
package paystate

// Payment is a payment attempt's status.
type Payment string

// The statuses of a payment attempt.
const (
	// Created: prepaid (or about to be), not paid yet.
	Created Payment = "CREATED"
	// Paid: the platform reported the money taken.
	Paid Payment = "SUCCESS"
	// Closed: closed at the platform; it can no longer be paid.
	Closed Payment = "CLOSED"
	// Refunded: paid, then given back whole.
	Refunded Payment = "REFUNDED"
)

// Refund is a refund's status.
type Refund string

// The statuses of a refund.
const (
	// Pending: recorded, not yet accepted by the platform.
	Pending Refund = "PENDING"
	// Processing: the platform accepted it and has not finished.
	Processing Refund = "PROCESSING"
	// Succeeded: the money went back.
	Succeeded Refund = "SUCCESS"
	// Failed: the platform ended it ABNORMAL or CLOSED; an operator
	// retries or settles it.
	Failed Refund = "FAILED"
	// Retried: replaced by a new refund of the same money.
	Retried Refund = "RETRIED"
	// Settled: an operator gave the money back outside WeChat.
	Settled Refund = "SETTLED"
)

// RefundStatuses lists every refund status.
func RefundStatuses() []Refund {
	return []Refund{Failed, Pending, Processing, Succeeded, Retried, Settled}
}
