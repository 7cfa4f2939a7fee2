package courier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Provider is a courier provider: it prices a delivery, takes it under
// our number (out_no), reports its progress by callback and by query,
// and cancels it, perhaps for a fee.
type Provider interface {
	// Name is the provider's name in deliveries.provider.
	Name() string
	// Quote prices a delivery. A quote's Token, when the provider gives
	// one, is what Place takes, until it expires.
	Quote(ctx context.Context, r Request) (Quote, error)
	// Place asks the provider to carry r, on q when it has a token. A
	// repeat of an out_no it took answers ErrAlreadyPlaced; a refusal is
	// a *RefusedError; any other error leaves the outcome unknown.
	Place(ctx context.Context, r Request, q Quote) (Placement, error)
	// Query reports where the delivery out_no is.
	Query(ctx context.Context, outNo string) (Update, error)
	// Cancel cancels the delivery out_no, returning the fee the provider
	// deducts for it (a rider had taken it).
	Cancel(ctx context.Context, outNo, reason string) (feeFen int64, err error)
	// TakesTips reports whether the provider takes tips.
	TakesTips() bool
	// Tip adds to what the rider is paid, to find one.
	Tip(ctx context.Context, outNo string, fen int64) error
	// Callback verifies and reads a status callback; an error means it is
	// not the provider's.
	Callback(r *http.Request) (Callback, error)
	// Acknowledge answers a callback the way the provider expects; ok
	// false asks it to send the callback again.
	Acknowledge(w http.ResponseWriter, ok bool)
}

// Request is what a placement tells the provider.
type Request struct {
	OutNo       string
	ShopName    string
	ShopLat     float64
	ShopLng     float64
	Name        string
	Phone       string
	Address     string
	Lat, Lng    float64 // the customer's; zero when the address has none
	ValueFen    int64
	Remark      string
	CallbackURL string
}

// Quote is a provider's price of a delivery.
type Quote struct {
	Provider string    `json:"provider"`
	Token    string    `json:"token,omitempty"`
	FeeFen   int64     `json:"fee_fen"`
	Expires  time.Time `json:"expires"`
}

// Placement is a provider's acceptance of a placement.
type Placement struct {
	Ref    string
	FeeFen int64
}

// Update is where a delivery is, by a callback or a query.
type Update struct {
	Status     Status
	RiderID    string
	RiderName  string
	RiderPhone string
	Lat, Lng   *float64
	// At is the provider's time of the update.
	At time.Time
	// CancelFeeFen is what the provider deducts for a cancelled delivery.
	CancelFeeFen int64
	// TipFen is the tip the provider holds, when it says (a query).
	TipFen *int64
	Reason string
}

// Callback is a provider's status callback.
type Callback struct {
	OutNo string
	// Update is what the callback says. Trusted is false when the
	// provider's signature does not cover it (Dada signs only the order
	// and the time): then the provider is asked instead.
	Update  Update
	Trusted bool
}

// RefusedError is a provider's answer that it did not take a placement:
// the order may be placed elsewhere.
type RefusedError struct {
	Code    string
	Message string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("refused: %s %s", e.Code, e.Message) }

// Errors a provider's client returns.
var (
	// ErrAlreadyPlaced is a placement of an out_no the provider has: an
	// earlier try whose answer was lost took it.
	ErrAlreadyPlaced = errors.New("already placed")
	// ErrUnsupported is an operation the provider does not offer.
	ErrUnsupported = errors.New("not offered by the provider")
	// ErrQuoteExpired is a placement on a quote the provider no longer
	// honours: quote again.
	ErrQuoteExpired = errors.New("quote expired")
	// ErrUnknownOrder is a query of an out_no the provider never took.
	ErrUnknownOrder = errors.New("no such order at the provider")
)

// fenOfYuan converts a provider's amount in yuan to fen.
func fenOfYuan(y float64) int64 { return int64(math.Round(y * 100)) }

// yuanOfFen writes fen as the yuan amount providers take.
func yuanOfFen(f int64) float64 { return float64(f) / 100 }
