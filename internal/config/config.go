// Package config loads takeout's configuration from TAKEOUT_* environment
// variables. It is the only package that reads the environment; everything
// else receives a Config.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is the API server's configuration. Each field's env tag names its
// variable and envDefault its default; the README lists them all.
type Config struct {
	// Env is "development" (the default: the simulator's URLs and keys
	// are fine) or "production", which refuses to start on them.
	Env               string        `env:"TAKEOUT_ENV" envDefault:"development"`
	HTTPAddr          string        `env:"TAKEOUT_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	ReadHeaderTimeout time.Duration `env:"TAKEOUT_HTTP_READ_HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout       time.Duration `env:"TAKEOUT_HTTP_READ_TIMEOUT" envDefault:"15s"`
	WriteTimeout      time.Duration `env:"TAKEOUT_HTTP_WRITE_TIMEOUT" envDefault:"30s"`
	IdleTimeout       time.Duration `env:"TAKEOUT_HTTP_IDLE_TIMEOUT" envDefault:"120s"`
	ShutdownTimeout   time.Duration `env:"TAKEOUT_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// RequestTimeout bounds the work of one request: its context ends
	// then, so its statements are cancelled and its transaction rolls back.
	RequestTimeout time.Duration `env:"TAKEOUT_HTTP_REQUEST_TIMEOUT" envDefault:"10s"`
	MaxBodyBytes   int64         `env:"TAKEOUT_MAX_BODY_BYTES" envDefault:"65536"`
	LogLevel       string        `env:"TAKEOUT_LOG_LEVEL" envDefault:"info"`
	// OpsAddr is the operations listener: /metrics and pprof, never on
	// the public one. Keep it on loopback or a private network; empty
	// serves none.
	OpsAddr string `env:"TAKEOUT_OPS_ADDR" envDefault:"127.0.0.1:6060"` // Prometheus itself defaults to 9090
	// Rate limits, requests per minute per instance; 0 turns one off.
	RateLimitIP   int `env:"TAKEOUT_RATE_LIMIT_IP" envDefault:"600"`
	RateLimitUser int `env:"TAKEOUT_RATE_LIMIT_USER" envDefault:"300"`
	// ClientIPHeader names the header a trusted load balancer puts the
	// client's address in (e.g. X-Real-IP); empty uses the connection's.
	ClientIPHeader string `env:"TAKEOUT_CLIENT_IP_HEADER"`
	// Tracing, by OpenTelemetry's own variables: OTEL_TRACES_EXPORTER is
	// none (the default: nothing is traced or installed), otlp (the
	// exporter reads its OTEL_EXPORTER_OTLP_* variables itself) or
	// console (JSON spans on standard output).
	TracesExporter string `env:"OTEL_TRACES_EXPORTER" envDefault:"none"`
	ServiceName    string `env:"OTEL_SERVICE_NAME" envDefault:"takeout"`
	// TraceBatchDelayMS is how long finished spans wait to be exported
	// together (milliseconds, as OpenTelemetry's variable has it).
	TraceBatchDelayMS int `env:"OTEL_BSP_SCHEDULE_DELAY" envDefault:"5000"`
	// TraceTrustedNets lists the callers (CIDR prefixes or addresses)
	// whose traceparent a request continues; anyone else's request starts
	// a trace of its own, linked to theirs.
	TraceTrustedNets string `env:"TAKEOUT_TRACE_TRUSTED_NETS"`

	DatabaseURL      string `env:"TAKEOUT_DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/takeout?sslmode=disable"`
	DatabaseMaxConns int32  `env:"TAKEOUT_DATABASE_MAX_CONNS" envDefault:"20"`
	MigrateOnStart   bool   `env:"TAKEOUT_MIGRATE_ON_START" envDefault:"true"`
	// Limits on every pooled connection (migrations run without them):
	// no statement, lock wait or idle transaction holds a connection
	// longer than these.
	DatabaseStatementTimeout time.Duration `env:"TAKEOUT_DATABASE_STATEMENT_TIMEOUT" envDefault:"10s"`
	// DatabaseGroupCommitMax is the most placements (or payment
	// successes) committed together (1: each in its own transaction);
	// DatabaseGroupCommitSlots how many groups of placements an instance
	// sends at once, DatabasePaymentGroupSlots how many of payments. A
	// payment group is one backend settling its payments one after the
	// other, light on the database's CPU, so a second group in flight
	// takes the second core (docs/performance.md).
	DatabaseGroupCommitMax    int           `env:"TAKEOUT_DATABASE_GROUP_COMMIT_MAX" envDefault:"32"`
	DatabaseGroupCommitSlots  int           `env:"TAKEOUT_DATABASE_GROUP_COMMIT_SLOTS" envDefault:"1"`
	DatabasePaymentGroupSlots int           `env:"TAKEOUT_DATABASE_PAYMENT_GROUP_SLOTS" envDefault:"2"`
	DatabaseLockTimeout       time.Duration `env:"TAKEOUT_DATABASE_LOCK_TIMEOUT" envDefault:"5s"`
	DatabaseIdleInTxTimeout   time.Duration `env:"TAKEOUT_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT" envDefault:"30s"`

	// RedisURL empty means: run without Redis (a supported, degraded mode).
	RedisURL    string `env:"TAKEOUT_REDIS_URL"`
	RedisPrefix string `env:"TAKEOUT_REDIS_PREFIX" envDefault:"takeout:"`

	SessionSecret Secret        `env:"TAKEOUT_SESSION_SECRET"`
	SessionTTL    time.Duration `env:"TAKEOUT_SESSION_TTL" envDefault:"24h"`
	// RevocationReload is how often each instance reloads the revoked
	// tokens (Redis pub/sub tells it at once; this covers Redis down).
	RevocationReload time.Duration `env:"TAKEOUT_REVOCATION_RELOAD_INTERVAL" envDefault:"30s"`
	StaffSecret      Secret        `env:"TAKEOUT_STAFF_SECRET"`

	WeChatAPIBase   string        `env:"TAKEOUT_WECHAT_API_BASE" envDefault:"http://127.0.0.1:8090"`
	WeChatAppID     string        `env:"TAKEOUT_WECHAT_APPID" envDefault:"wxd0000000000000sim"`
	WeChatAppSecret Secret        `env:"TAKEOUT_WECHAT_APP_SECRET"`
	WeChatTimeout   time.Duration `env:"TAKEOUT_WECHAT_TIMEOUT" envDefault:"5s"`

	CatalogCacheTTL  time.Duration `env:"TAKEOUT_CATALOG_CACHE_TTL" envDefault:"60s"`
	CatalogCacheSize int           `env:"TAKEOUT_CATALOG_CACHE_SIZE" envDefault:"10000"`

	ConfirmSecret    Secret        `env:"TAKEOUT_CONFIRM_SECRET"`
	ConfirmTokenTTL  time.Duration `env:"TAKEOUT_CONFIRM_TOKEN_TTL" envDefault:"15m"`
	OrderDedupWindow time.Duration `env:"TAKEOUT_ORDER_DEDUP_WINDOW" envDefault:"10m"`
	OrderPayWindow   time.Duration `env:"TAKEOUT_ORDER_PAY_WINDOW" envDefault:"15m"`
	// OrderMaxTotalFen is the most one order may come to: by default the
	// most one WeChat Pay JSAPI payment takes (10 million yuan).
	OrderMaxTotalFen int64 `env:"TAKEOUT_ORDER_MAX_TOTAL_FEN" envDefault:"1000000000"`
	// OrderTimeoutSweepInterval is how often orders past their pay
	// deadline get their payment-timeout job: an unpaid order is
	// cancelled up to this long after its deadline.
	OrderTimeoutSweepInterval time.Duration `env:"TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL" envDefault:"5s"`
	// OrderAcceptSweepInterval is how often paid orders past their
	// merchant's accept deadline are accepted or rejected by the system:
	// an order is moved on up to this long after its deadline.
	OrderAcceptSweepInterval time.Duration `env:"TAKEOUT_ORDER_ACCEPT_SWEEP_INTERVAL" envDefault:"5s"`
	WorkerLeaseTTL           time.Duration `env:"TAKEOUT_WORKER_LEASE_TTL" envDefault:"30s"`
	IdemRetention            time.Duration `env:"TAKEOUT_IDEMPOTENCY_RETENTION" envDefault:"72h"`
	IdemInflightTTL          time.Duration `env:"TAKEOUT_IDEMPOTENCY_INFLIGHT_TTL" envDefault:"60s"`
	IdemCoalesceWait         time.Duration `env:"TAKEOUT_IDEMPOTENCY_COALESCE_WAIT" envDefault:"2s"`
	IdemL1Bytes              uint64        `env:"TAKEOUT_IDEMPOTENCY_L1_BYTES" envDefault:"134217728"`
	IdemL1TTL                time.Duration `env:"TAKEOUT_IDEMPOTENCY_L1_TTL" envDefault:"10m"`
	IdemPruneInterval        time.Duration `env:"TAKEOUT_IDEMPOTENCY_PRUNE_INTERVAL" envDefault:"10m"`

	// GCPercent is the garbage collector's GOGC for `api serve`: a heap
	// of small live size (the L1 not yet full) is then collected a
	// quarter as often, its growth bounded by MemoryLimit. GOGC in the
	// environment wins.
	GCPercent int `env:"TAKEOUT_GC_PERCENT" envDefault:"400"`
	// MemoryLimit is the soft memory limit (GOMEMLIMIT) in bytes; 0
	// means the L1 budget plus 128 MiB plus what TAKEOUT_STREAM_MAX
	// streams hold, below 0 none. GOMEMLIMIT in the environment wins.
	MemoryLimit int64 `env:"TAKEOUT_MEMORY_LIMIT" envDefault:"0"`

	AutoCompleteAfter time.Duration `env:"TAKEOUT_ORDER_AUTO_COMPLETE_AFTER" envDefault:"3h"`
	UrgeInterval      time.Duration `env:"TAKEOUT_ORDER_URGE_INTERVAL" envDefault:"5m"`
	// AfterSalesRespondWithin is how long a merchant has to answer an
	// after-sales request before it is agreed for it; AfterSalesWindow is
	// how long after completion (or a rejection) a customer may ask (or
	// escalate).
	AfterSalesRespondWithin time.Duration `env:"TAKEOUT_AFTER_SALES_RESPOND_WITHIN" envDefault:"24h"`
	AfterSalesWindow        time.Duration `env:"TAKEOUT_AFTER_SALES_WINDOW" envDefault:"168h"`
	JobWorkers              int           `env:"TAKEOUT_JOB_WORKERS" envDefault:"20"`
	JobMaxAttempts          int           `env:"TAKEOUT_JOB_MAX_ATTEMPTS" envDefault:"25"`
	JobPollInterval         time.Duration `env:"TAKEOUT_JOB_POLL_INTERVAL" envDefault:"1s"`
	JobRetryMaxDelay        time.Duration `env:"TAKEOUT_JOB_RETRY_MAX_DELAY" envDefault:"5m"`
	JobRescueAfter          time.Duration `env:"TAKEOUT_JOB_RESCUE_AFTER" envDefault:"2m"`
	WebhookURL              string        `env:"TAKEOUT_WEBHOOK_URL"`
	WebhookSecret           Secret        `env:"TAKEOUT_WEBHOOK_SECRET"`
	WebhookMaxAttempts      int           `env:"TAKEOUT_WEBHOOK_MAX_ATTEMPTS" envDefault:"12"`
	WebhookRetryBase        time.Duration `env:"TAKEOUT_WEBHOOK_RETRY_BASE" envDefault:"10s"`
	WebhookTimeout          time.Duration `env:"TAKEOUT_WEBHOOK_TIMEOUT" envDefault:"5s"`

	// Merchant staff logins: how long a login's token lives, and how many
	// failed logins an account may take per 15 minutes and attempts one
	// address may make per minute, across instances (0: no limit).
	StaffLoginTTL     time.Duration `env:"TAKEOUT_STAFF_LOGIN_TTL" envDefault:"12h"`
	LoginLimitAccount int           `env:"TAKEOUT_LOGIN_LIMIT_ACCOUNT" envDefault:"10"`
	LoginLimitAddress int           `env:"TAKEOUT_LOGIN_LIMIT_ADDRESS" envDefault:"30"`
	// Live order streams (boards): heartbeat, how often the outbox is
	// read without a hint, events a stream may have waiting, streams per
	// instance, and how long events are kept for reconnecting boards.
	StreamHeartbeat      time.Duration `env:"TAKEOUT_STREAM_HEARTBEAT" envDefault:"15s"`
	StreamPoll           time.Duration `env:"TAKEOUT_STREAM_POLL" envDefault:"250ms"`
	StreamBuffer         int           `env:"TAKEOUT_STREAM_BUFFER" envDefault:"256"`
	StreamMax            int           `env:"TAKEOUT_STREAM_MAX" envDefault:"2000"`
	StreamMaxPerMerchant int           `env:"TAKEOUT_STREAM_MAX_PER_MERCHANT" envDefault:"50"`
	StreamMaxPerToken    int           `env:"TAKEOUT_STREAM_MAX_PER_TOKEN" envDefault:"5"`
	OrderEventsRetention time.Duration `env:"TAKEOUT_ORDER_EVENTS_RETENTION" envDefault:"72h"`
	// SubscribeTemplates is "STATUS=template_id,...": the WeChat
	// subscribe message template of each status a customer is told of
	// (ACCEPTED, READY, DELIVERING, COMPLETED, CANCELLED, REFUNDED); empty
	// sends none. MiniProgramState is the version a message opens.
	SubscribeTemplates string `env:"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES"`
	MiniProgramState   string `env:"TAKEOUT_WECHAT_MINIPROGRAM_STATE" envDefault:"formal"`
	// ShippingUpload tells WeChat how each paid order went out
	// (upload_shipping_info), for mini-programs whose payments WeChat
	// holds until it knows; it needs payments.
	ShippingUpload bool `env:"TAKEOUT_WECHAT_SHIPPING_UPLOAD" envDefault:"false"`

	// WeChat Pay: payments are enabled when the merchant key is set.
	WxPayAPIBase        string `env:"TAKEOUT_WXPAY_API_BASE" envDefault:"http://127.0.0.1:8090"`
	WxPayMchID          string `env:"TAKEOUT_WXPAY_MCHID" envDefault:"1900000109"`
	WxPayMerchantSerial string `env:"TAKEOUT_WXPAY_MERCHANT_SERIAL"`
	WxPayMerchantKey    Secret `env:"TAKEOUT_WXPAY_MERCHANT_KEY"`
	// WxPayPlatformKeys is "SERIAL=path,SERIAL=path": platform
	// certificates or public keys (several during a rotation).
	WxPayPlatformKeys string `env:"TAKEOUT_WXPAY_PLATFORM_KEYS"`
	WxPayAPIv3Key     Secret `env:"TAKEOUT_WXPAY_APIV3_KEY"`
	// WxPayV2Key signs legacy v2 XML callbacks; empty refuses them.
	WxPayV2Key     Secret `env:"TAKEOUT_WXPAY_V2_KEY"`
	WxPayNotifyURL string `env:"TAKEOUT_WXPAY_NOTIFY_URL" envDefault:"http://127.0.0.1:8080/v1/payments/wechat/notify"`
	// Reconciliation: every interval, payments prepaid at least QueryAfter
	// ago whose order still waits are queried at the provider.
	WxPayReconcileInterval time.Duration `env:"TAKEOUT_WXPAY_RECONCILE_INTERVAL" envDefault:"1m"`
	WxPayQueryAfter        time.Duration `env:"TAKEOUT_WXPAY_QUERY_AFTER" envDefault:"2m"`
	// WxPayRefundGap is the least time between two refunds of one
	// payment sent to WeChat Pay: its rule is a minute, measured at its
	// end, so takeout waits a second more.
	WxPayRefundGap time.Duration `env:"TAKEOUT_WXPAY_REFUND_GAP" envDefault:"61s"`
	// WxPayFeeRateBps is the fee rate signed with WeChat Pay, in basis
	// points: the daily bill's fees are checked against it.
	WxPayFeeRateBps int64 `env:"TAKEOUT_WXPAY_FEE_RATE_BPS" envDefault:"60"`
	// BillSweepInterval is how often the days whose bills are out and not
	// reconciled are looked for.
	BillSweepInterval time.Duration `env:"TAKEOUT_BILL_SWEEP_INTERVAL" envDefault:"30m"`
	// WxPayMode is merchant (every payment into TAKEOUT_WXPAY_MCHID) or
	// partner (the service-provider mode: each payment into its
	// merchant's sub-merchant account, frozen, and the platform's
	// commission taken by profit sharing; TAKEOUT_WXPAY_MCHID and
	// TAKEOUT_WECHAT_APPID are then the service provider's).
	WxPayMode string `env:"TAKEOUT_WXPAY_MODE" envDefault:"merchant"`
	// SharingAfterPay is the least time after a payment before its
	// share is sent: WeChat Pay takes none in the first minute, and
	// paid_at (its success_time) is whole seconds, so a second more.
	SharingAfterPay time.Duration `env:"TAKEOUT_SHARING_AFTER_PAY" envDefault:"61s"`
	// SharingFinishAfter is how long after its payment an order nobody
	// completed is shared all the same (its commission to the platform,
	// the rest to the merchant), well inside WeChat Pay's 180 days.
	SharingFinishAfter time.Duration `env:"TAKEOUT_SHARING_FINISH_AFTER" envDefault:"720h"`
	// SharingSweepInterval is how often the payments due at that
	// deadline are looked for.
	SharingSweepInterval time.Duration `env:"TAKEOUT_SHARING_SWEEP_INTERVAL" envDefault:"10m"`
	// SharingPoll is how often a profit-sharing request whose result is
	// not out yet is asked about.
	SharingPoll time.Duration `env:"TAKEOUT_SHARING_POLL" envDefault:"5s"`

	// Cloud printers: a provider is on when its credentials are set.
	YilianyunAPIBase      string `env:"TAKEOUT_YILIANYUN_API_BASE" envDefault:"http://127.0.0.1:8090/yilianyun"`
	YilianyunClientID     string `env:"TAKEOUT_YILIANYUN_CLIENT_ID"`
	YilianyunClientSecret Secret `env:"TAKEOUT_YILIANYUN_CLIENT_SECRET"`
	FeieAPIBase           string `env:"TAKEOUT_FEIE_API_BASE" envDefault:"http://127.0.0.1:8090/feie"`
	FeieUser              string `env:"TAKEOUT_FEIE_USER"`
	FeieUKey              Secret `env:"TAKEOUT_FEIE_UKEY"`
	// FeiePublicKey is the path of the PEM public key Feie signs its
	// callbacks with; FeieCallbackURL is where they are sent (each
	// ticket's backurl).
	FeiePublicKey   string `env:"TAKEOUT_FEIE_PUBLIC_KEY"`
	FeieCallbackURL string `env:"TAKEOUT_FEIE_CALLBACK_URL" envDefault:"http://127.0.0.1:8080/v1/printers/feie/callback"`
	// PrintTimeout bounds one call to a printer provider.
	PrintTimeout time.Duration `env:"TAKEOUT_PRINT_TIMEOUT" envDefault:"5s"`
	// PrintSweepInterval is how often tickets due are picked up.
	PrintSweepInterval time.Duration `env:"TAKEOUT_PRINT_SWEEP_INTERVAL" envDefault:"1s"`
	// PrintWithin is how soon after the accept a ticket should be out;
	// later it is late (the board, GET /admin/v1/prints?status=late).
	PrintWithin time.Duration `env:"TAKEOUT_PRINT_WITHIN" envDefault:"2m"`
	// PrintConfirmAfter is how long a sent ticket waits for its callback
	// before the provider is asked; PrintGiveUpAfter how long a ticket is
	// tried before it fails for an operator to reprint.
	PrintConfirmAfter time.Duration `env:"TAKEOUT_PRINT_CONFIRM_AFTER" envDefault:"15s"`
	PrintGiveUpAfter  time.Duration `env:"TAKEOUT_PRINT_GIVE_UP_AFTER" envDefault:"1h"`

	// Courier providers: a provider is on when its credentials are set;
	// orders are placed with the first of TAKEOUT_COURIER_ORDER, and
	// placed again with the next.
	DadaAPIBase      string `env:"TAKEOUT_DADA_API_BASE" envDefault:"http://127.0.0.1:8090/dada"`
	DadaAppKey       string `env:"TAKEOUT_DADA_APP_KEY"`
	DadaAppSecret    Secret `env:"TAKEOUT_DADA_APP_SECRET"`
	DadaSourceID     string `env:"TAKEOUT_DADA_SOURCE_ID" envDefault:"73753"`
	DadaShopNo       string `env:"TAKEOUT_DADA_SHOP_NO" envDefault:"11047059"`
	MeituanAPIBase   string `env:"TAKEOUT_MEITUAN_API_BASE" envDefault:"http://127.0.0.1:8090/meituan"`
	MeituanAppKey    string `env:"TAKEOUT_MEITUAN_APP_KEY"`
	MeituanAppSecret Secret `env:"TAKEOUT_MEITUAN_APP_SECRET"`
	MeituanShopID    string `env:"TAKEOUT_MEITUAN_SHOP_ID" envDefault:"test_0001"`
	CourierOrder     string `env:"TAKEOUT_COURIER_ORDER" envDefault:"dada,meituan"`
	// CourierCallbackBase is the API's address as the providers reach it.
	CourierCallbackBase string `env:"TAKEOUT_COURIER_CALLBACK_BASE" envDefault:"http://127.0.0.1:8080"`
	// CourierTimeout bounds one call to a provider; CourierQuoteTimeout
	// the quote a confirm waits for.
	CourierTimeout      time.Duration `env:"TAKEOUT_COURIER_TIMEOUT" envDefault:"3s"`
	CourierQuoteTimeout time.Duration `env:"TAKEOUT_COURIER_QUOTE_TIMEOUT" envDefault:"800ms"`
	// CourierQuoteTTL caps how long a quote given at confirm is kept.
	CourierQuoteTTL time.Duration `env:"TAKEOUT_COURIER_QUOTE_TTL" envDefault:"2m"`
	// CourierAssignWithin is how long a placement waits for a rider
	// before it is tipped CourierTipFen (once, where the provider takes
	// tips), then placed with the next provider.
	CourierAssignWithin time.Duration `env:"TAKEOUT_COURIER_ASSIGN_WITHIN" envDefault:"10m"`
	CourierTipFen       int64         `env:"TAKEOUT_COURIER_TIP_FEN" envDefault:"300"`
	// CourierLateAfter is how long an active delivery goes unheard before
	// the provider is asked; CourierSweepInterval how often that is
	// looked for.
	CourierLateAfter     time.Duration `env:"TAKEOUT_COURIER_LATE_AFTER" envDefault:"2m"`
	CourierSweepInterval time.Duration `env:"TAKEOUT_COURIER_SWEEP_INTERVAL" envDefault:"30s"`
	// CourierMaxAttempts caps an order's placements.
	CourierMaxAttempts int `env:"TAKEOUT_COURIER_MAX_ATTEMPTS" envDefault:"4"`
}

// DadaEnabled reports whether the Dada-like courier is configured.
func (c Config) DadaEnabled() bool { return c.DadaAppKey != "" && c.DadaAppSecret != "" }

// MeituanEnabled reports whether the Meituan-like courier is configured.
func (c Config) MeituanEnabled() bool { return c.MeituanAppKey != "" && c.MeituanAppSecret != "" }

// YilianyunEnabled reports whether the Yilianyun-like printer provider
// is configured.
func (c Config) YilianyunEnabled() bool {
	return c.YilianyunClientID != "" && c.YilianyunClientSecret != ""
}

// FeieEnabled reports whether the Feie-like printer provider is
// configured.
func (c Config) FeieEnabled() bool { return c.FeieUser != "" && c.FeieUKey != "" }

// PaymentsEnabled reports whether WeChat Pay is configured.
func (c Config) PaymentsEnabled() bool { return c.WxPayMerchantKey != "" }

// PartnerMode reports whether payments are taken in WeChat Pay's
// service-provider mode, with profit sharing.
func (c Config) PartnerMode() bool { return c.PaymentsEnabled() && c.WxPayMode == "partner" }

// Secret is a configuration value that must never be printed or logged.
type Secret string

// String hides the value so that a Secret formatted by mistake leaks nothing.
func (Secret) String() string { return "[redacted]" }

// LogValue hides the value from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Bytes returns the secret's raw bytes.
func (s Secret) Bytes() []byte { return []byte(s) }

// minSecretBytes is the shortest signing key we accept: HMAC keys shorter
// than the hash output weaken it.
const minSecretBytes = 32

// MemoryLimitBytes is the soft memory limit MemoryLimit asks for, in
// bytes, or -1 for none.
func (c Config) MemoryLimitBytes() int64 {
	switch {
	case c.MemoryLimit < 0:
		return -1
	case c.MemoryLimit == 0:
		return int64(min(c.IdemL1Bytes, 1<<50)) + 128<<20 + c.StreamMemoryBytes() //nolint:gosec // G115: bounded above
	}
	return c.MemoryLimit
}

// streamBytes is what one open order stream may hold, its goroutines'
// stacks included: the bench measured 14 KB for one that took its
// connection over, 42 KB for one served through the response (HTTP/2).
const streamBytes = 48 << 10

// StreamMemoryBytes is what TAKEOUT_STREAM_MAX open streams may hold: the
// default memory limit leaves room for them, or a full instance's
// collector would run without end to stay under a limit its idle
// streams alone exceed (the bench saw 10,000 idle boards hold a core).
func (c Config) StreamMemoryBytes() int64 { return int64(c.StreamMax) * streamBytes }

// Load reads the configuration through getenv. A secret variable X may
// instead be given as X_FILE, the path of a file holding it. Every problem
// is reported at once, each naming its variable.
func Load(getenv func(string) string) (Config, error) {
	var cfg Config
	values, err := environment(&cfg, getenv)
	if err != nil {
		return Config{}, err
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: values}); err != nil {
		return Config{}, fmt.Errorf("config: %w", nameVariables(err))
	}
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// environment collects the values of the variables that cfg declares, so
// that the library sees exactly what getenv returns and nothing else. Unset
// and empty are the same here: an empty variable takes its default.
func environment(cfg any, getenv func(string) string) (map[string]string, error) {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	secrets := secretKeys(cfg)
	values := make(map[string]string, len(params))
	var errs []error
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			values[p.Key] = v
			continue
		}
		if !secrets[p.Key] {
			continue
		}
		path := getenv(p.Key + "_FILE")
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the secret's file
		if err != nil {
			errs = append(errs, fmt.Errorf("%s_FILE: %w", p.Key, err))
			continue
		}
		values[p.Key] = strings.TrimSpace(string(b))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return values, nil
}

func secretKeys(cfg any) map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeOf(cfg).Elem()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == reflect.TypeFor[Secret]() {
			keys[strings.Split(f.Tag.Get("env"), ",")[0]] = true
		}
	}
	return keys
}

// nameVariables rewrites the library's field-named parse errors so that
// each names the environment variable the operator has to fix.
func nameVariables(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	t := reflect.TypeFor[Config]()
	var errs []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				errs = append(errs, fmt.Errorf("%s: invalid %s value: %w", f.Tag.Get("env"), pe.Type, errors.Unwrap(pe.Err)))
				continue
			}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// checker collects configuration problems, one error each.
type checker struct{ errs []error }

func (k *checker) check(ok bool, format string, args ...any) {
	if !ok {
		k.errs = append(k.errs, fmt.Errorf(format, args...))
	}
}

// validate reports every problem of the configuration at once.
func (c Config) validate() error {
	k := &checker{}
	c.validateServer(k)
	c.validateIdentity(k)
	c.validateWork(k)
	c.validateLive(k)
	c.validateCouriers(k)
	k.check(c.Env == "development" || c.Env == "production", "TAKEOUT_ENV: want development or production, got %q", c.Env)
	if c.Env == "production" {
		k.errs = append(k.errs, c.productionProblems()...)
	}
	if len(k.errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(k.errs...))
	}
	return nil
}

// validateCouriers checks the courier settings.
func (c Config) validateCouriers(k *checker) {
	for _, name := range strings.Split(c.CourierOrder, ",") {
		k.check(name == "dada" || name == "meituan", "TAKEOUT_COURIER_ORDER: providers dada and meituan, comma-separated, got %q", c.CourierOrder)
	}
	k.check(c.CourierTimeout > 0 && c.CourierQuoteTimeout > 0 && c.CourierQuoteTTL > 0, "TAKEOUT_COURIER_TIMEOUT, TAKEOUT_COURIER_QUOTE_TIMEOUT, TAKEOUT_COURIER_QUOTE_TTL: want more than 0")
	k.check(c.CourierAssignWithin >= time.Second && c.CourierLateAfter >= time.Second && c.CourierSweepInterval >= 100*time.Millisecond,
		"TAKEOUT_COURIER_ASSIGN_WITHIN, TAKEOUT_COURIER_LATE_AFTER: want at least 1s; TAKEOUT_COURIER_SWEEP_INTERVAL at least 100ms")
	k.check(c.CourierTipFen >= 0 && c.CourierTipFen <= 10000, "TAKEOUT_COURIER_TIP_FEN: want 0 to 10000, got %d", c.CourierTipFen)
	k.check(c.CourierMaxAttempts >= 1 && c.CourierMaxAttempts <= 9, "TAKEOUT_COURIER_MAX_ATTEMPTS: want 1 to 9, got %d", c.CourierMaxAttempts)
}

// validateServer checks the listeners, limits, logs and connections.
func (c Config) validateServer(k *checker) {
	check := k.check
	_, _, err := net.SplitHostPort(c.HTTPAddr)
	check(err == nil, "TAKEOUT_HTTP_ADDR: want host:port, got %q", c.HTTPAddr)
	if c.OpsAddr != "" {
		_, port, err := net.SplitHostPort(c.OpsAddr)
		check(err == nil && (port == "0" || c.OpsAddr != c.HTTPAddr), "TAKEOUT_OPS_ADDR: want host:port apart from TAKEOUT_HTTP_ADDR, or empty for none, got %q", c.OpsAddr)
	}
	check(c.RateLimitIP >= 0 && c.RateLimitUser >= 0, "TAKEOUT_RATE_LIMIT_IP/_USER: want 0 (off) or a positive number per minute")
	check(c.MaxBodyBytes >= 1024, "TAKEOUT_MAX_BODY_BYTES: want at least 1024, got %d", c.MaxBodyBytes)
	check(c.ShutdownTimeout > 0, "TAKEOUT_SHUTDOWN_TIMEOUT: want a positive duration")
	check(c.RequestTimeout > 0 && c.RequestTimeout <= c.WriteTimeout, "TAKEOUT_HTTP_REQUEST_TIMEOUT: want a positive duration, at most TAKEOUT_HTTP_WRITE_TIMEOUT")
	check(c.DatabaseStatementTimeout >= time.Millisecond, "TAKEOUT_DATABASE_STATEMENT_TIMEOUT: want at least 1ms")
	check(c.DatabaseLockTimeout >= time.Millisecond, "TAKEOUT_DATABASE_LOCK_TIMEOUT: want at least 1ms")
	check(c.DatabaseIdleInTxTimeout >= time.Millisecond, "TAKEOUT_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT: want at least 1ms")
	check(c.ReadHeaderTimeout > 0 && c.ReadTimeout > 0 && c.WriteTimeout > 0 && c.IdleTimeout > 0,
		"TAKEOUT_HTTP_*_TIMEOUT: want positive durations")
	_, err = ParseLogLevel(c.LogLevel)
	check(err == nil, "TAKEOUT_LOG_LEVEL: %v", err)
	check(validURL(c.DatabaseURL, "postgres", "postgresql"), "TAKEOUT_DATABASE_URL: want a postgres:// URL")
	check(c.DatabaseMaxConns >= 2, "TAKEOUT_DATABASE_MAX_CONNS: want at least 2, got %d", c.DatabaseMaxConns)
	check(c.RedisURL == "" || validURL(c.RedisURL, "redis", "rediss", "unix"), "TAKEOUT_REDIS_URL: want a redis:// URL or empty for no Redis")
	check(c.RedisPrefix != "", "TAKEOUT_REDIS_PREFIX: must not be empty")
	check(slices.Contains([]string{"none", "otlp", "console"}, c.TracesExporter), "OTEL_TRACES_EXPORTER: want none, otlp or console, got %q", c.TracesExporter)
	check(c.TraceBatchDelayMS >= 1, "OTEL_BSP_SCHEDULE_DELAY: want at least 1 (milliseconds)")
	_, err = c.TrustedNets()
	check(err == nil, "TAKEOUT_TRACE_TRUSTED_NETS: %v", err)
}

// TrustedNets parses TAKEOUT_TRACE_TRUSTED_NETS: comma-separated CIDR
// prefixes or single addresses.
func (c Config) TrustedNets() ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, f := range strings.Split(c.TraceTrustedNets, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is neither a CIDR prefix nor an address", f))
			continue
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, errors.Join(errs...)
}

// validateIdentity checks the secrets, sessions, WeChat and the order
// and idempotency settings.
func (c Config) validateIdentity(k *checker) {
	check := k.check
	check(len(c.SessionSecret) >= minSecretBytes, "TAKEOUT_SESSION_SECRET (or _FILE): required, at least %d bytes", minSecretBytes)
	check(len(c.StaffSecret) >= minSecretBytes, "TAKEOUT_STAFF_SECRET (or _FILE): required, at least %d bytes", minSecretBytes)
	check(c.SessionSecret == "" || c.SessionSecret != c.StaffSecret, "TAKEOUT_STAFF_SECRET: must differ from TAKEOUT_SESSION_SECRET")
	check(c.SessionTTL >= time.Minute, "TAKEOUT_SESSION_TTL: want at least 1m")
	check(c.RevocationReload >= 100*time.Millisecond, "TAKEOUT_REVOCATION_RELOAD_INTERVAL: want at least 100ms")
	check(validURL(c.WeChatAPIBase, "http", "https"), "TAKEOUT_WECHAT_API_BASE: want an http(s) URL")
	check(c.WeChatAppID != "", "TAKEOUT_WECHAT_APPID: must not be empty")
	check(c.WeChatAppSecret != "", "TAKEOUT_WECHAT_APP_SECRET (or _FILE): required")
	check(c.WeChatTimeout > 0, "TAKEOUT_WECHAT_TIMEOUT: want a positive duration")
	check(!c.ShippingUpload || c.PaymentsEnabled(), "TAKEOUT_WECHAT_SHIPPING_UPLOAD: needs payments (TAKEOUT_WXPAY_MERCHANT_KEY): only WeChat Pay payments are shipped")
	check(c.CatalogCacheTTL > 0, "TAKEOUT_CATALOG_CACHE_TTL: want a positive duration")
	check(c.CatalogCacheSize > 0, "TAKEOUT_CATALOG_CACHE_SIZE: want a positive number")
	check(len(c.ConfirmSecret) >= minSecretBytes, "TAKEOUT_CONFIRM_SECRET (or _FILE): required, at least %d bytes", minSecretBytes)
	check(c.ConfirmSecret == "" || (c.ConfirmSecret != c.SessionSecret && c.ConfirmSecret != c.StaffSecret),
		"TAKEOUT_CONFIRM_SECRET: must differ from the session and staff secrets")
	check(c.ConfirmTokenTTL >= time.Minute, "TAKEOUT_CONFIRM_TOKEN_TTL: want at least 1m")
	check(c.OrderDedupWindow >= 0, "TAKEOUT_ORDER_DEDUP_WINDOW: must not be negative")
	check(c.OrderPayWindow >= time.Second, "TAKEOUT_ORDER_PAY_WINDOW: want at least 1s")
	check(c.OrderMaxTotalFen >= 1 && c.OrderMaxTotalFen <= 1_000_000_000,
		"TAKEOUT_ORDER_MAX_TOTAL_FEN: want 1 to 1000000000 (fen; WeChat Pay takes at most that in one payment)")
	check(c.OrderTimeoutSweepInterval >= 100*time.Millisecond, "TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL: want at least 100ms")
	check(c.OrderAcceptSweepInterval >= 100*time.Millisecond, "TAKEOUT_ORDER_ACCEPT_SWEEP_INTERVAL: want at least 100ms")
	// More than 64 subtransactions in one transaction overflow each
	// backend's cache of them and slow every snapshot.
	check(c.DatabaseGroupCommitMax >= 1 && c.DatabaseGroupCommitMax <= 64, "TAKEOUT_DATABASE_GROUP_COMMIT_MAX: want 1 to 64, got %d", c.DatabaseGroupCommitMax)
	// Placements and payments each have their slots; the pool keeps a
	// connection for everything else.
	check(c.DatabaseGroupCommitSlots >= 1, "TAKEOUT_DATABASE_GROUP_COMMIT_SLOTS: want at least 1, got %d", c.DatabaseGroupCommitSlots)
	check(c.DatabasePaymentGroupSlots >= 1, "TAKEOUT_DATABASE_PAYMENT_GROUP_SLOTS: want at least 1, got %d", c.DatabasePaymentGroupSlots)
	check(c.DatabaseGroupCommitSlots+c.DatabasePaymentGroupSlots < int(c.DatabaseMaxConns),
		"TAKEOUT_DATABASE_GROUP_COMMIT_SLOTS + TAKEOUT_DATABASE_PAYMENT_GROUP_SLOTS: want less than TAKEOUT_DATABASE_MAX_CONNS, got %d + %d against %d",
		c.DatabaseGroupCommitSlots, c.DatabasePaymentGroupSlots, c.DatabaseMaxConns)
	check(c.WorkerLeaseTTL >= 10*time.Second, "TAKEOUT_WORKER_LEASE_TTL: want at least 10s")
	check(c.IdemRetention >= time.Hour, "TAKEOUT_IDEMPOTENCY_RETENTION: want at least 1h (72h or more in production)")
	check(c.IdemInflightTTL > c.WriteTimeout, "TAKEOUT_IDEMPOTENCY_INFLIGHT_TTL: must exceed TAKEOUT_HTTP_WRITE_TIMEOUT, the longest a request runs")
	check(c.IdemCoalesceWait >= 0 && c.IdemCoalesceWait < c.WriteTimeout, "TAKEOUT_IDEMPOTENCY_COALESCE_WAIT: want 0 or more, below TAKEOUT_HTTP_WRITE_TIMEOUT")
	check(c.IdemL1Bytes >= 1<<20, "TAKEOUT_IDEMPOTENCY_L1_BYTES: want at least 1048576")
	check(c.IdemL1TTL > 0, "TAKEOUT_IDEMPOTENCY_L1_TTL: want a positive duration")
	check(c.IdemPruneInterval > 0, "TAKEOUT_IDEMPOTENCY_PRUNE_INTERVAL: want a positive duration")
	check(c.GCPercent >= 10, "TAKEOUT_GC_PERCENT: want at least 10")
	check(c.MemoryLimit <= 0 || c.MemoryLimit >= 64<<20, "TAKEOUT_MEMORY_LIMIT: want at least 67108864, 0 for the L1 budget plus 128 MiB, or below 0 for none")
}

// validateWork checks jobs, webhooks and payments.
func (c Config) validateWork(k *checker) {
	check := k.check
	check(c.AutoCompleteAfter >= time.Second, "TAKEOUT_ORDER_AUTO_COMPLETE_AFTER: want at least 1s")
	check(c.UrgeInterval >= time.Second, "TAKEOUT_ORDER_URGE_INTERVAL: want at least 1s")
	check(c.AfterSalesRespondWithin >= time.Second, "TAKEOUT_AFTER_SALES_RESPOND_WITHIN: want at least 1s")
	check(c.AfterSalesWindow >= time.Second, "TAKEOUT_AFTER_SALES_WINDOW: want at least 1s")
	check(c.JobWorkers >= 1, "TAKEOUT_JOB_WORKERS: want at least 1")
	check(c.JobMaxAttempts >= 1, "TAKEOUT_JOB_MAX_ATTEMPTS: want at least 1")
	check(c.JobPollInterval >= 10*time.Millisecond, "TAKEOUT_JOB_POLL_INTERVAL: want at least 10ms")
	check(c.JobRetryMaxDelay >= time.Second, "TAKEOUT_JOB_RETRY_MAX_DELAY: want at least 1s")
	check(c.JobRescueAfter >= 4*max(c.WebhookTimeout, c.WeChatTimeout), "TAKEOUT_JOB_RESCUE_AFTER: want at least 4 x the longest call timeout (TAKEOUT_WEBHOOK_TIMEOUT, TAKEOUT_WECHAT_TIMEOUT)")
	check(c.WebhookURL == "" || validURL(c.WebhookURL, "http", "https"), "TAKEOUT_WEBHOOK_URL: want an http(s) URL or empty for no webhook")
	check(c.WebhookURL == "" || len(c.WebhookSecret) >= 16, "TAKEOUT_WEBHOOK_SECRET (or _FILE): required with TAKEOUT_WEBHOOK_URL, at least 16 bytes")
	check(c.WebhookMaxAttempts >= 1, "TAKEOUT_WEBHOOK_MAX_ATTEMPTS: want at least 1")
	check(c.WebhookRetryBase > 0, "TAKEOUT_WEBHOOK_RETRY_BASE: want a positive duration")
	check(c.WebhookTimeout > 0, "TAKEOUT_WEBHOOK_TIMEOUT: want a positive duration")
	if c.PaymentsEnabled() {
		check(validURL(c.WxPayAPIBase, "http", "https"), "TAKEOUT_WXPAY_API_BASE: want an http(s) URL")
		check(c.WxPayMchID != "", "TAKEOUT_WXPAY_MCHID: required with payments")
		check(c.WxPayMerchantSerial != "", "TAKEOUT_WXPAY_MERCHANT_SERIAL: required with payments")
		check(c.WxPayPlatformKeys != "", "TAKEOUT_WXPAY_PLATFORM_KEYS: required with payments (SERIAL=path,...)")
		check(len(c.WxPayAPIv3Key) == 32, "TAKEOUT_WXPAY_APIV3_KEY (or _FILE): required with payments, 32 bytes")
		check(validURL(c.WxPayNotifyURL, "http", "https"), "TAKEOUT_WXPAY_NOTIFY_URL: want an http(s) URL")
		check(c.WxPayReconcileInterval >= 100*time.Millisecond, "TAKEOUT_WXPAY_RECONCILE_INTERVAL: want at least 100ms")
		check(c.WxPayQueryAfter >= 0, "TAKEOUT_WXPAY_QUERY_AFTER: must not be negative")
		check(c.WxPayRefundGap >= 0, "TAKEOUT_WXPAY_REFUND_GAP: must not be negative")
		check(c.WxPayFeeRateBps >= 0 && c.WxPayFeeRateBps <= 1000, "TAKEOUT_WXPAY_FEE_RATE_BPS: between 0 and 1000")
		check(c.BillSweepInterval >= time.Second, "TAKEOUT_BILL_SWEEP_INTERVAL: want at least 1s")
		check(c.WxPayMode == "merchant" || c.WxPayMode == "partner", "TAKEOUT_WXPAY_MODE: want merchant or partner")
		check(c.SharingAfterPay >= 0, "TAKEOUT_SHARING_AFTER_PAY: must not be negative")
		check(c.SharingFinishAfter > c.SharingAfterPay && c.SharingFinishAfter <= 150*24*time.Hour,
			"TAKEOUT_SHARING_FINISH_AFTER: longer than TAKEOUT_SHARING_AFTER_PAY and at most 3600h (WeChat Pay unfreezes on its own at 180 days)")
		check(c.SharingSweepInterval >= 100*time.Millisecond, "TAKEOUT_SHARING_SWEEP_INTERVAL: want at least 100ms")
		check(c.SharingPoll >= 10*time.Millisecond, "TAKEOUT_SHARING_POLL: want at least 10ms")
	}
}

// validateLive checks staff logins, streams and customer messages.
func (c Config) validateLive(k *checker) {
	check := k.check
	check(c.StaffLoginTTL >= time.Minute && c.StaffLoginTTL <= 90*24*time.Hour, "TAKEOUT_STAFF_LOGIN_TTL: want 1m to 2160h")
	check(c.LoginLimitAccount >= 0 && c.LoginLimitAddress >= 0, "TAKEOUT_LOGIN_LIMIT_ACCOUNT/_ADDRESS: want 0 (off) or a positive number")
	check(c.StreamHeartbeat >= 100*time.Millisecond, "TAKEOUT_STREAM_HEARTBEAT: want at least 100ms")
	check(c.StreamPoll >= 10*time.Millisecond, "TAKEOUT_STREAM_POLL: want at least 10ms")
	check(c.StreamBuffer >= 1, "TAKEOUT_STREAM_BUFFER: want at least 1")
	check(c.StreamMax >= 0, "TAKEOUT_STREAM_MAX: want 0 (no bound) or more")
	check(c.StreamMaxPerMerchant >= 1 && (c.StreamMax == 0 || c.StreamMaxPerMerchant < c.StreamMax),
		"TAKEOUT_STREAM_MAX_PER_MERCHANT: want at least 1 and below TAKEOUT_STREAM_MAX (%d), so that one merchant cannot take every stream", c.StreamMax)
	check(c.StreamMaxPerToken >= 1 && c.StreamMaxPerToken <= c.StreamMaxPerMerchant,
		"TAKEOUT_STREAM_MAX_PER_TOKEN: want at least 1 and at most TAKEOUT_STREAM_MAX_PER_MERCHANT (%d)", c.StreamMaxPerMerchant)
	check(c.OrderEventsRetention >= time.Hour, "TAKEOUT_ORDER_EVENTS_RETENTION: want at least 1h")
	_, err := c.SubscribeTemplateMap()
	check(err == nil, "TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES: %v", err)
	check(c.MiniProgramState == "formal" || c.MiniProgramState == "trial" || c.MiniProgramState == "developer",
		"TAKEOUT_WECHAT_MINIPROGRAM_STATE: want formal, trial or developer, got %q", c.MiniProgramState)
}

// subscribeStatuses are the statuses a subscribe message may tell of.
var subscribeStatuses = []string{"ACCEPTED", "DELIVERING", "COMPLETED", "CANCELLED", "REFUNDED"}

// SubscribeTemplateMap parses SubscribeTemplates into status → template id.
func (c Config) SubscribeTemplateMap() (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(c.SubscribeTemplates) == "" {
		return m, nil
	}
	for _, entry := range strings.Split(c.SubscribeTemplates, ",") {
		status, tpl, ok := strings.Cut(strings.TrimSpace(entry), "=")
		switch {
		case !ok || tpl == "":
			return nil, fmt.Errorf("want STATUS=template_id, got %q", entry)
		case !slices.Contains(subscribeStatuses, status):
			return nil, fmt.Errorf("%q: want one of %s", status, strings.Join(subscribeStatuses, ", "))
		case !templateID.MatchString(tpl):
			return nil, fmt.Errorf("%q: a template id is 1 to 128 letters, digits, '_' or '-'", tpl)
		case m[status] != "":
			return nil, fmt.Errorf("%s named twice", status)
		}
		m[status] = tpl
	}
	return m, nil
}

var templateID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// The simulator's identities, which production must not run on.
const (
	simAppID = "wxd0000000000000sim"
	simMchID = "1900000109" // WeChat Pay's documentation's sample merchant
)

// productionProblems lists what a production instance must not start on,
// naming each variable: the simulator's URLs and ids, plain http or
// loopback for WeChat, payments without their keys, and secrets that look
// like placeholders.
func (c Config) productionProblems() []error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format+" (TAKEOUT_ENV=production)", args...))
		}
	}
	for _, u := range []struct{ name, value string }{
		{"TAKEOUT_WECHAT_API_BASE", c.WeChatAPIBase},
		{"TAKEOUT_WXPAY_API_BASE", c.WxPayAPIBase},
		{"TAKEOUT_WXPAY_NOTIFY_URL", c.WxPayNotifyURL},
	} {
		check(validURL(u.value, "https") && !loopback(u.value), "%s: want an https URL of WeChat (or of this service, for the notify URL), not the simulator's or a loopback one, got %q", u.name, u.value)
	}
	check(c.WebhookURL == "" || validURL(c.WebhookURL, "https"), "TAKEOUT_WEBHOOK_URL: want https")
	check(c.WeChatAppID != simAppID, "TAKEOUT_WECHAT_APPID: the simulator's app id")
	check(c.WxPayMchID != simMchID, "TAKEOUT_WXPAY_MCHID: the documentation's sample merchant id")
	check(c.PaymentsEnabled(), "TAKEOUT_WXPAY_MERCHANT_KEY (or _FILE): required: production takes payments")
	check(c.WxPayMerchantSerial != "", "TAKEOUT_WXPAY_MERCHANT_SERIAL: required")
	check(c.WxPayPlatformKeys != "", "TAKEOUT_WXPAY_PLATFORM_KEYS: required")
	check(len(c.WxPayAPIv3Key) == 32, "TAKEOUT_WXPAY_APIV3_KEY (or _FILE): required, 32 bytes")
	for _, s := range []struct {
		name  string
		value Secret
	}{
		{"TAKEOUT_SESSION_SECRET", c.SessionSecret}, {"TAKEOUT_STAFF_SECRET", c.StaffSecret},
		{"TAKEOUT_CONFIRM_SECRET", c.ConfirmSecret}, {"TAKEOUT_WECHAT_APP_SECRET", c.WeChatAppSecret},
		{"TAKEOUT_WXPAY_APIV3_KEY", c.WxPayAPIv3Key}, {"TAKEOUT_WEBHOOK_SECRET", c.WebhookSecret},
	} {
		check(s.value == "" || !placeholder(string(s.value)), "%s: looks like a development placeholder (a repeated pattern, or a word like secret, changeme, example); generate a random one", s.name)
	}
	return errs
}

// loopback reports whether a URL's host is this machine.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// placeholder reports a secret that a person typed rather than a random
// generator made: few distinct bytes, or a tell-tale word.
func placeholder(s string) bool {
	distinct := map[rune]bool{}
	for _, r := range s {
		distinct[r] = true
	}
	if len(distinct) < 10 {
		return true
	}
	lower := strings.ToLower(s)
	// Words long or punctuated enough that random base64 or hex does not
	// hold them by chance.
	for _, word := range []string{"secret", "changeme", "example", "sample", "password", "development", "0123456789", "abcdefgh",
		"test-", "-test", "test_", "_test", "dev-", "-dev", "dev_", "_dev"} {
		if strings.Contains(lower, word) {
			return true
		}
	}
	return false
}

func validURL(raw string, schemes ...string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return true
		}
	}
	return false
}

// ParseLogLevel maps debug, info, warn or error to a slog level.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// Wxsim is the WeChat simulator's configuration. It shares the app id and
// secret variables with the API, since it plays the other side of them.
type Wxsim struct {
	Addr      string `env:"TAKEOUT_WXSIM_ADDR" envDefault:"127.0.0.1:8090"`
	AppID     string `env:"TAKEOUT_WECHAT_APPID" envDefault:"wxd0000000000000sim"`
	AppSecret Secret `env:"TAKEOUT_WECHAT_APP_SECRET"`
	// Dir holds the keys wxsim generates on first run and the API
	// configuration it writes for them (api.env).
	Dir   string `env:"TAKEOUT_WXSIM_DIR" envDefault:".dev/wxsim"`
	MchID string `env:"TAKEOUT_WXPAY_MCHID" envDefault:"1900000109"`
	// YilianyunCallbackURL is where the printer simulator's Yilianyun-like
	// side pushes print callbacks (the provider's console setting).
	YilianyunCallbackURL string `env:"TAKEOUT_WXSIM_YILIANYUN_CALLBACK_URL" envDefault:"http://127.0.0.1:8080/v1/printers/yilianyun/callback"`
	// MeituanCallbackURL is where the courier simulator's Meituan-like
	// side calls back (the provider's console setting; Dada's callback
	// address comes with each order).
	MeituanCallbackURL string `env:"TAKEOUT_WXSIM_MEITUAN_CALLBACK_URL" envDefault:"http://127.0.0.1:8080/v1/couriers/meituan/callback"`
	// CourierStep is how often the simulated riders move each order on
	// by one step.
	CourierStep time.Duration `env:"TAKEOUT_WXSIM_COURIER_STEP" envDefault:"20s"`
}

// LoadWxsim reads the simulator's configuration through getenv.
func LoadWxsim(getenv func(string) string) (Wxsim, error) {
	var cfg Wxsim
	values, err := environment(&cfg, getenv)
	if err != nil {
		return Wxsim{}, err
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: values}); err != nil {
		return Wxsim{}, fmt.Errorf("config: %w", err)
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return Wxsim{}, fmt.Errorf("config: TAKEOUT_WXSIM_ADDR: want host:port, got %q", cfg.Addr)
	}
	if cfg.AppSecret == "" {
		return Wxsim{}, errors.New("config: TAKEOUT_WECHAT_APP_SECRET (or _FILE): required")
	}
	return cfg, nil
}
