package printing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Provider is a cloud printer service: it takes a ticket for one of its
// printers, says later whether it came out (a query, and a signed
// callback), and, when IdempotencyWindow is more than zero, takes a
// repeat of a ticket id within that window as the same ticket.
type Provider interface {
	// Name is the provider's name in printers.provider.
	Name() string
	// IdempotencyWindow is how long the provider answers a repeat of a
	// ticket id with its earlier result instead of printing again; 0
	// when it has no such id.
	IdempotencyWindow() time.Duration
	// Print sends a ticket to the printer device, returning the
	// provider's id of it. An error is a *RefusedError when the provider
	// answered that it did not take it, ErrNotSent when the request never
	// left; any other error leaves the outcome unknown.
	Print(ctx context.Context, device, ticketID, content string) (ref string, err error)
	// Query reports whether the ticket ref came out.
	Query(ctx context.Context, device, ref string) (printed bool, err error)
	// Callback verifies and reads a print callback; an error means the
	// request is not the provider's.
	Callback(r *http.Request) (Callback, error)
	// Acknowledge answers a callback the way the provider expects, ok
	// false asking it to send the callback again later.
	Acknowledge(w http.ResponseWriter, ok bool)
}

// Callback is what a provider's print callback says.
type Callback struct {
	Device string
	// Ref is the provider's id of the ticket.
	Ref string
	// TicketID is our id of it, when the provider echoes it.
	TicketID string
	Printed  bool
	At       time.Time
}

// RefusedError is a provider's answer that it did not take a ticket:
// nothing was printed, so the same ticket may be sent again.
type RefusedError struct {
	Code    string
	Message string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("refused: %s %s", e.Code, e.Message) }

// ErrNotSent is a print request that never reached the provider (it could
// not connect): nothing was printed.
var ErrNotSent = errors.New("not sent")

// ErrBadCallback is a callback whose signature or fields do not check.
var ErrBadCallback = errors.New("bad callback")

// classify turns a transport error into ErrNotSent when the request
// cannot have reached the provider, and leaves the rest unknown.
func classify(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// unavailable reports whether an HTTP status says the provider did not
// take the request at all (its gateway refused it: overloaded, down for
// maintenance, rate limited), so nothing was printed.
func unavailable(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// notPrinted reports whether err says for sure that nothing came out.
func notPrinted(err error) bool {
	var refused *RefusedError
	return errors.As(err, &refused) || errors.Is(err, ErrNotSent)
}
