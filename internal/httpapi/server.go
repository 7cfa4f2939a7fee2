// Package httpapi is takeout's HTTP surface: NewServer builds the one
// handler of the service, routes.go lists every route, and the middleware
// here gives every request an id, a request-scoped logger, a body limit,
// panic recovery and a latency histogram.
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/aftersales"
	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/bill"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/ledger"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderstream"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/sharing"
	"github.com/takeout/takeout/internal/shipping"
	"github.com/takeout/takeout/internal/staff"
	"github.com/takeout/takeout/internal/subscribemsg"
	"github.com/takeout/takeout/internal/voucher"
)

// Deps are what the HTTP layer needs; cmd/api builds them.
type Deps struct {
	Logger      *slog.Logger
	Pool        *pgxpool.Pool
	Redis       *redisconn.Conn
	Migrator    *db.Migrator
	Tokens      *auth.Tokens
	Revocations *auth.Revocations
	WeChat      *auth.WeChat
	Catalog     *catalog.Service
	Orders      *order.Service
	Idempotency *idempotency.Store
	Jobs        *jobs.Client
	// Payments is nil when WeChat Pay is not configured.
	Payments   *payment.Service
	Staff      *staff.Service
	Stream     *orderstream.Hub
	Messages   *subscribemsg.Sender
	Vouchers   *voucher.Service
	Promotions *promotion.Service
	Printing   *printing.Service
	// Couriers hands orders to courier providers (none configured: no
	// deliveries).
	Couriers   *courier.Service
	Shipping   *shipping.Service
	Ledger     *ledger.Service
	AfterSales *aftersales.Service
	// Bills is nil when WeChat Pay is not configured.
	Bills *bill.Service
	// Sharing is nil unless payments are taken in the service-provider
	// mode.
	Sharing      *sharing.Service
	Registry     *prometheus.Registry
	MaxBodyBytes int64
	// RequestTimeout ends each request's context (0: no deadline).
	RequestTimeout time.Duration
	// Rate limits per minute (0: off) and the client address header.
	RateLimitIP    int
	RateLimitUser  int
	ClientIPHeader string
}

// NewServer returns the service's HTTP handler.
func NewServer(d Deps) (http.Handler, error) {
	m, err := newHTTPMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	return routes(d, m), nil
}
