// Package problem is takeout's error vocabulary: every error a client can
// see is one of the Types below, rendered as an RFC 9457 problem document.
// Domain packages return *Error values; the HTTP layer renders them in one
// place. The list of Types is also what api/openapi.yaml must document.
package problem

import (
	"errors"
	"fmt"
	"net/http"
)

// Type is one kind of problem: a stable slug (the document's "type"), its
// HTTP status and a short human title.
type Type struct {
	Slug   string
	Status int
	Title  string
}

// The problem types of the API. Slugs are part of the contract: never
// rename one.
var (
	InvalidRequest       = Type{"invalid-request", http.StatusBadRequest, "The request is invalid"}
	UnsupportedMediaType = Type{"unsupported-media-type", http.StatusUnsupportedMediaType, "Unsupported media type"}
	BodyTooLarge         = Type{"body-too-large", http.StatusRequestEntityTooLarge, "Request body too large"}
	Unauthorized         = Type{"unauthorized", http.StatusUnauthorized, "Authentication required"}
	LoginFailed          = Type{"login-failed", http.StatusUnauthorized, "WeChat login failed"}
	Forbidden            = Type{"forbidden", http.StatusForbidden, "Not allowed"}
	NotFound             = Type{"not-found", http.StatusNotFound, "Not found"}
	MethodNotAllowed     = Type{"method-not-allowed", http.StatusMethodNotAllowed, "Method not allowed"}
	VersionConflict      = Type{"version-conflict", http.StatusConflict, "The resource was changed by someone else"}
	AlreadyExists        = Type{"already-exists", http.StatusConflict, "The resource already exists"}
	UpstreamUnavailable  = Type{"upstream-unavailable", http.StatusBadGateway, "An upstream service failed"}
	Unavailable          = Type{"service-unavailable", http.StatusServiceUnavailable, "Service unavailable"}
	Internal             = Type{"internal-error", http.StatusInternalServerError, "Internal server error"}

	IdempotencyKeyMissing  = Type{"idempotency-key-missing", http.StatusBadRequest, "Idempotency-Key header required"}
	IdempotencyKeyMismatch = Type{"idempotency-key-mismatch", http.StatusUnprocessableEntity, "Idempotency-Key reused for another request"}
	RequestInProgress      = Type{"request-in-progress", http.StatusConflict, "A request with this Idempotency-Key is in progress"}
	OutOfStock             = Type{"out-of-stock", http.StatusConflict, "Not enough stock"}
	StockChanged           = Type{"stock-changed", http.StatusConflict, "The stock changed since you read it"}
	StockHeld              = Type{"stock-held", http.StatusConflict, "Open orders hold more stock than that"}
	QuoteChanged           = Type{"quote-changed", http.StatusConflict, "The menu changed since confirm: confirm again"}
	DishUnavailable        = Type{"dish-unavailable", http.StatusConflict, "A dish is not for sale"}
	MerchantClosed         = Type{"merchant-closed", http.StatusConflict, "The merchant is closed"}
	BelowMinimum           = Type{"below-minimum", http.StatusConflict, "The order is below the merchant's minimum"}
	AboveMaximum           = Type{"above-maximum", http.StatusConflict, "The order's total is above what one payment may take"}
	OutOfRange             = Type{"out-of-range", http.StatusConflict, "The address is beyond the merchant's delivery range"}
	TokenInvalid           = Type{"confirm-token-invalid", http.StatusUnauthorized, "The confirm token is invalid"}
	TokenExpired           = Type{"confirm-token-expired", http.StatusGone, "The confirm token expired: confirm again"}
	TokenNotYours          = Type{"confirm-token-forbidden", http.StatusForbidden, "The confirm token belongs to another user"}
	OrderStatusConflict    = Type{"order-status-conflict", http.StatusConflict, "The order's status does not allow this"}
	RefundStatusConflict   = Type{"refund-status-conflict", http.StatusConflict, "The refund's status does not allow this"}
	RefundExceedsPaid      = Type{"refund-exceeds-paid", http.StatusConflict, "That is more than is left to refund"}
	RefundLimitReached     = Type{"refund-limit-reached", http.StatusConflict, "The payment has had as many refunds as WeChat Pay takes"}
	AfterSaleConflict      = Type{"after-sale-status-conflict", http.StatusConflict, "The after-sales request's status does not allow this"}
	BillNotReady           = Type{"bill-not-ready", http.StatusConflict, "WeChat Pay's bill of that day is not out yet"}
	MerchantNotOnboarded   = Type{"merchant-not-onboarded", http.StatusConflict, "The shop has no WeChat Pay sub-merchant account yet"}
	SharingStatusConflict  = Type{"sharing-status-conflict", http.StatusConflict, "The profit-sharing request's status does not allow this"}
	RateLimited            = Type{"rate-limited", http.StatusTooManyRequests, "Too many requests"}
	StaffLoginFailed       = Type{"staff-login-failed", http.StatusUnauthorized, "Wrong username or password"}
	VoucherNotClaimable    = Type{"voucher-not-claimable", http.StatusConflict, "The voucher cannot be claimed now"}
	VoucherLimitReached    = Type{"voucher-limit-reached", http.StatusConflict, "You hold as many of this voucher as one customer may"}
	VoucherBudgetSpent     = Type{"voucher-budget-spent", http.StatusConflict, "Every voucher of this kind has been claimed"}
	VoucherUnavailable     = Type{"voucher-unavailable", http.StatusConflict, "The voucher cannot be spent on this order"}
	PromotionUnavailable   = Type{"promotion-unavailable", http.StatusConflict, "A promotion the cart was quoted with no longer applies"}
	FulfilmentUnavailable  = Type{"fulfilment-unavailable", http.StatusConflict, "The merchant does not fulfil orders that way"}
	SlotUnavailable        = Type{"slot-unavailable", http.StatusConflict, "The time slot cannot be ordered"}
	SlotFull               = Type{"slot-full", http.StatusConflict, "The time slot is fully booked"}
)

// All lists every Type, for documentation checks.
func All() []Type {
	return []Type{
		InvalidRequest, UnsupportedMediaType, BodyTooLarge, Unauthorized, LoginFailed,
		Forbidden, NotFound, MethodNotAllowed, VersionConflict, AlreadyExists,
		UpstreamUnavailable, Unavailable, Internal,
		IdempotencyKeyMissing, IdempotencyKeyMismatch, RequestInProgress, OutOfStock, StockChanged, StockHeld, QuoteChanged,
		DishUnavailable, MerchantClosed, BelowMinimum, AboveMaximum, OutOfRange, TokenInvalid, TokenExpired, TokenNotYours, OrderStatusConflict, RefundStatusConflict, RefundExceedsPaid,
		RateLimited, StaffLoginFailed, VoucherNotClaimable, VoucherLimitReached, VoucherBudgetSpent,
		VoucherUnavailable, PromotionUnavailable, FulfilmentUnavailable, SlotUnavailable, SlotFull, RefundLimitReached, AfterSaleConflict, BillNotReady,
		MerchantNotOnboarded, SharingStatusConflict,
	}
}

// Error is a problem occurrence: its Type, a detail for this occurrence and
// optional extension members (e.g. "field", "current_version").
type Error struct {
	Type   Type
	Detail string
	Extra  map[string]any
	// cause is kept for logs and errors.Is, never shown to clients.
	cause error
}

// New returns a problem of type t with a detail.
func New(t Type, format string, args ...any) *Error {
	return &Error{Type: t, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns a problem of type t that keeps cause for logs and errors.Is.
func Wrap(t Type, cause error, format string, args ...any) *Error {
	return &Error{Type: t, Detail: fmt.Sprintf(format, args...), cause: cause}
}

// With returns a copy of e with an extension member added.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Extra = make(map[string]any, len(e.Extra)+1)
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra[key] = value
	return &c
}

// Error implements error.
func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Type.Slug, e.Detail, e.cause)
	}
	return e.Type.Slug + ": " + e.Detail
}

// Unwrap exposes the cause.
func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, problem.NotFound-typed target) match by type, so
// sentinel problems declared by domain packages compare by their Type.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Type == e.Type && t.Detail == e.Detail
}

// As returns the problem in err's chain, if any.
func As(err error) (*Error, bool) {
	var p *Error
	ok := errors.As(err, &p)
	return p, ok
}

// Field returns an invalid-request problem naming the offending field.
func Field(field, format string, args ...any) *Error {
	return New(InvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}
