// Package bill reconciles each day with WeChat Pay's bills: after 10:00
// Asia/Shanghai it downloads the trade bill and the fund bill of the day
// before, checks each against its hash, reads the yuan amounts into fen,
// and matches three ways: the bill against our payments and refunds,
// those against the bill, and the ledger against both; the fund bill
// against the trade bill. Each disagreement is an anomaly of its kind.
// WeChat's fees, which only the bill tells, are posted to the ledger.
//
// A run of a date holds the date's row for its transaction, so two runs
// of one date take turns; a run replaces what the last one found, so
// running a date again (after a fix) gives the answer of the records as
// they are. Days missed are backfilled within the three months WeChat
// keeps bills.
package bill

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1" //nolint:gosec // G505: WeChat Pay gives its bills' SHA1
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/problem"
)

// Shanghai is the bills' time zone (no daylight saving: a fixed offset).
var Shanghai = time.FixedZone("Asia/Shanghai", 8*3600)

// Kept is how far back WeChat Pay keeps bills; older days are not asked.
const Kept = 90 * 24 * time.Hour

// readyAt is when the bill of a day is ready: 10:00 the next day.
func readyAt(day time.Time) time.Time { return day.AddDate(0, 0, 1).Add(10 * time.Hour) }

// Source is WeChat Pay's side of bills (payment.Client).
type Source interface {
	TradeBill(ctx context.Context, date string) (payment.BillRef, error)
	FundBill(ctx context.Context, date string) (payment.BillRef, error)
	SharingBill(ctx context.Context, date string) (payment.BillRef, error)
	DownloadBill(ctx context.Context, url string) ([]byte, error)
}

// Options are what a Service needs.
type Options struct {
	Pool   *pgxpool.Pool
	Source Source
	// FeeRateBps is WeChat Pay's fee rate the merchant signed for, in
	// basis points (60 is 0.6%): a bill's fee that is not this rate of its
	// amount, rounded to the fen, is an anomaly.
	FeeRateBps int64
	// Sharing matches the profit-sharing bill too (the service-provider
	// mode).
	Sharing    bool
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Service runs reconciliations.
type Service struct {
	o    Options
	q    *dbsqlc.Queries
	runs *prometheus.CounterVec
}

// NewService returns a Service.
func NewService(o Options) (*Service, error) {
	s := &Service{o: o, q: dbsqlc.New(), runs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_reconciliation_runs_total",
		Help: "Runs of the daily reconciliation by outcome: done, not_ready (the bill is not out yet), failed (WeChat Pay could not be asked, a download or hash failed, a bill could not be read).",
	}, []string{"outcome"})}
	for _, o := range []string{"done", "not_ready", "failed"} {
		s.runs.WithLabelValues(o)
	}
	if o.Logger == nil {
		s.o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer != nil {
		anomalies := &anomaliesCollector{s: s, desc: prometheus.NewDesc("takeout_reconciliation_anomalies",
			"Disagreements the daily reconciliations of the last 7 days found, by kind (missing_here, missing_there, amount, fee, status, ledger, fund).", []string{"kind"}, nil)}
		for _, c := range []prometheus.Collector{s.runs, anomalies} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register reconciliation metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Kinds of anomalies.
const (
	// MissingHere is in the bill and not in our records.
	MissingHere = "missing_here"
	// MissingThere is in our records of the day and not in the bill.
	MissingThere = "missing_there"
	// Amount differs between the bill and our record.
	Amount = "amount"
	// Fee is a fee that is not the signed rate of its amount.
	Fee = "fee"
	// Status is a payment or refund the bill has in another state.
	Status = "status"
	// Ledger is a payment or refund whose ledger entries are not the
	// bill's amount.
	Ledger = "ledger"
	// Fund is a fund bill that does not add up to the trade bill.
	Fund = "fund"
)

// AnomalyKinds are every kind, for metrics and docs.
var AnomalyKinds = []string{MissingHere, MissingThere, Amount, Fee, Status, Ledger, Fund}

// Anomaly is one disagreement.
type Anomaly struct {
	Kind    string `json:"kind"`
	Ref     string `json:"ref"`
	Detail  string `json:"detail"`
	BillFen *int64 `json:"bill_fen"`
	OursFen *int64 `json:"ours_fen"`
}

// Summary is what a run read and matched.
type Summary struct {
	TradeRows      int   `json:"trade_rows"`
	PaidFen        int64 `json:"paid_fen"`
	RefundedFen    int64 `json:"refunded_fen"`
	FeeFen         int64 `json:"fee_fen"`
	FundRows       int   `json:"fund_rows"`
	FundIncomeFen  int64 `json:"fund_income_fen"`
	FundExpenseFen int64 `json:"fund_expense_fen"`
	Matched        int   `json:"matched"`
	FeesPosted     int   `json:"fees_posted"`
	// The profit-sharing bill's, in the service-provider mode.
	SharingRows int    `json:"sharing_rows,omitempty"`
	SharedFen   int64  `json:"shared_fen,omitempty"`
	UnfrozenFen int64  `json:"unfrozen_fen,omitempty"`
	ReturnedFen int64  `json:"returned_fen,omitempty"`
	SharingHash string `json:"sharing_hash,omitempty"`
}

// Reconciliation is a date's run as operators see it.
type Reconciliation struct {
	Date       string     `json:"date"`
	Status     string     `json:"status"`
	Attempts   int32      `json:"attempts"`
	Error      string     `json:"error"`
	TradeHash  string     `json:"trade_hash"`
	FundHash   string     `json:"fund_hash"`
	Summary    Summary    `json:"summary"`
	Anomalies  []Anomaly  `json:"anomalies"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// ErrNotReady is a bill WeChat Pay has not made yet.
var ErrNotReady = problem.New(problem.BillNotReady, "WeChat Pay's bill of that day is not ready: bills are out from 10:00 (Asia/Shanghai) the next day")

// fetched is a downloaded, verified bill.
type fetched struct {
	raw  []byte
	hash string
}

// fetch asks for a bill and downloads it, asking again once when its URL
// expired first; none is (nil, nil): nothing happened that day.
func (s *Service) fetch(ctx context.Context, ask func(context.Context, string) (payment.BillRef, error), date string) (*fetched, error) {
	var lastErr error
	for range 2 {
		ref, err := ask(ctx, date)
		var ae *payment.APIError
		switch {
		case errors.As(err, &ae) && ae.Code == "NO_STATEMENT_EXIST":
			return nil, nil
		case errors.As(err, &ae) && ae.Code == "STATEMENT_CREATING":
			return nil, ErrNotReady
		case err != nil:
			return nil, fmt.Errorf("ask for the bill: %w", err)
		}
		if !strings.EqualFold(ref.HashType, "SHA1") {
			return nil, fmt.Errorf("bill hash type %q: want SHA1", ref.HashType)
		}
		gz, err := s.o.Source.DownloadBill(ctx, ref.DownloadURL)
		if errors.As(err, &ae) && ae.Status < 500 {
			lastErr = fmt.Errorf("download the bill: %w", err) // the URL expired: ask again
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("download the bill: %w", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("the bill is not gzip: %w", err)
		}
		raw, err := io.ReadAll(io.LimitReader(zr, 1<<30))
		if err != nil {
			return nil, fmt.Errorf("the bill is not gzip: %w", err)
		}
		sum := sha1.Sum(raw) //nolint:gosec // G401: WeChat Pay's bill hash
		if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, ref.HashValue) {
			return nil, fmt.Errorf("the bill's SHA1 is %s, WeChat Pay said %s: not the bill it made", got, ref.HashValue)
		}
		return &fetched{raw: raw, hash: strings.ToLower(ref.HashValue)}, nil
	}
	return nil, lastErr
}

// Run reconciles one date (Asia/Shanghai), now: ErrNotReady when its
// bill is not out, an upstream-unavailable problem when it cannot be
// fetched, verified or read (recorded on the date).
func (s *Service) Run(ctx context.Context, day time.Time) (Reconciliation, error) {
	date := day.Format(time.DateOnly)
	// Whether the bill is out is WeChat Pay's to say (STATEMENT_CREATING):
	// the sweep asks only after 10:00 the next day, an operator may ask
	// any time.
	trade, err := s.fetch(ctx, s.o.Source.TradeBill, date)
	var fund *fetched
	if err == nil {
		fund, err = s.fetch(ctx, s.o.Source.FundBill, date)
	}
	var shares *fetched
	if err == nil && s.o.Sharing {
		shares, err = s.fetch(ctx, s.o.Source.SharingBill, date)
	}
	var tb TradeBill
	var fb FundBill
	var sb SharingBill
	if err == nil && trade != nil {
		tb, err = ParseTradeBill(trade.raw)
	}
	if err == nil && fund != nil {
		fb, err = ParseFundBill(fund.raw)
	}
	if err == nil && shares != nil {
		sb, err = ParseSharingBill(shares.raw)
	}
	if errors.Is(err, ErrNotReady) {
		s.runs.WithLabelValues("not_ready").Inc()
		return Reconciliation{}, err
	}
	if err != nil {
		s.runs.WithLabelValues("failed").Inc()
		if ferr := s.q.ReconciliationFailed(ctx, s.o.Pool, dbsqlc.ReconciliationFailedParams{BillDate: pgDate(day), Error: err.Error()}); ferr != nil {
			err = errors.Join(err, ferr)
		}
		s.o.Logger.ErrorContext(ctx, "reconciliation failed", "date", date, "error", err)
		return Reconciliation{}, problem.Wrap(problem.UpstreamUnavailable, err, "reconciling %s: %v", date, err)
	}
	out, err := db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (Reconciliation, error) {
		if _, err := s.q.ReconciliationLock(ctx, tx, pgDate(day)); err != nil {
			return Reconciliation{}, fmt.Errorf("lock reconciliation: %w", err)
		}
		m := &matcher{s: s, tx: tx, day: day, feeRate: s.o.FeeRateBps}
		if err := m.match(ctx, tb, fb); err != nil {
			return Reconciliation{}, err
		}
		if s.o.Sharing {
			if err := m.sharing(ctx, sb); err != nil {
				return Reconciliation{}, err
			}
			if shares != nil {
				m.summary.SharingHash = shares.hash
			}
		}
		if err := s.q.ReconciliationAnomaliesClear(ctx, tx, pgDate(day)); err != nil {
			return Reconciliation{}, err
		}
		for _, a := range m.found {
			if err := s.q.ReconciliationAnomalyInsert(ctx, tx, dbsqlc.ReconciliationAnomalyInsertParams{BillDate: pgDate(day), Kind: a.Kind, Ref: a.Ref,
				Detail: a.Detail, BillFen: a.BillFen, OursFen: a.OursFen}); err != nil {
				return Reconciliation{}, err
			}
		}
		summary, _ := json.Marshal(m.summary)
		var th, fh string
		if trade != nil {
			th = trade.hash
		}
		if fund != nil {
			fh = fund.hash
		}
		if _, err := s.q.ReconciliationDone(ctx, tx, dbsqlc.ReconciliationDoneParams{BillDate: pgDate(day), TradeHash: th, FundHash: fh, Summary: summary}); err != nil {
			return Reconciliation{}, err
		}
		return s.get(ctx, tx, day)
	})
	if err == nil {
		s.runs.WithLabelValues("done").Inc()
		if len(out.Anomalies) > 0 {
			s.o.Logger.WarnContext(ctx, "reconciliation found anomalies", "date", date, "anomalies", len(out.Anomalies))
		}
	}
	return out, err
}

var errNoRun = problem.New(problem.NotFound, "that date has not been reconciled")

// Get returns a date's reconciliation.
func (s *Service) Get(ctx context.Context, day time.Time) (Reconciliation, error) {
	return s.get(ctx, s.o.Pool, day)
}

func (s *Service) get(ctx context.Context, q dbsqlc.DBTX, day time.Time) (Reconciliation, error) {
	r, err := s.q.ReconciliationGet(ctx, q, pgDate(day))
	if errors.Is(err, db.ErrNotFound) {
		return Reconciliation{}, errNoRun
	}
	if err != nil {
		return Reconciliation{}, err
	}
	out := Reconciliation{Date: r.BillDate.Time.Format(time.DateOnly), Status: r.Status, Attempts: r.Attempts, Error: r.Error,
		TradeHash: r.TradeHash, FundHash: r.FundHash, Anomalies: []Anomaly{}, StartedAt: r.StartedAt.UTC()}
	if r.FinishedAt != nil {
		at := r.FinishedAt.UTC()
		out.FinishedAt = &at
	}
	_ = json.Unmarshal(r.Summary, &out.Summary)
	rows, err := s.q.ReconciliationAnomalies(ctx, q, pgDate(day))
	if err != nil {
		return Reconciliation{}, err
	}
	for _, a := range rows {
		out.Anomalies = append(out.Anomalies, Anomaly{Kind: a.Kind, Ref: a.Ref, Detail: a.Detail, BillFen: a.BillFen, OursFen: a.OursFen})
	}
	return out, nil
}

// Due returns the dates to reconcile at now: each day from the first
// payment (at most Kept back) whose bill is out and that is not done,
// oldest first.
func Due(now time.Time, first time.Time, done map[string]bool) []time.Time {
	today := Day(now)
	from := Day(first)
	if oldest := today.Add(-Kept); from.Before(oldest) {
		from = oldest
	}
	var out []time.Time
	for d := from; d.Before(today); d = d.AddDate(0, 0, 1) {
		if !done[d.Format(time.DateOnly)] && !now.Before(readyAt(d)) {
			out = append(out, d)
		}
	}
	return out
}

// pgDate is a day as the database's date.
func pgDate(day time.Time) pgtype.Date {
	return pgtype.Date{Time: time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC), Valid: true}
}

// Day is the date (midnight, Asia/Shanghai) of t.
func Day(t time.Time) time.Time {
	t = t.In(Shanghai)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, Shanghai)
}

// ParseDay reads a date (YYYY-MM-DD, Asia/Shanghai) to reconcile: within
// the three months WeChat Pay keeps bills, not after today.
func ParseDay(s string, now time.Time) (time.Time, error) {
	d, err := time.ParseInLocation(time.DateOnly, s, Shanghai)
	switch {
	case err != nil:
		return time.Time{}, problem.New(problem.InvalidRequest, "date: YYYY-MM-DD (Asia/Shanghai)").With("parameter", "date")
	case d.After(Day(now)):
		return time.Time{}, problem.New(problem.InvalidRequest, "date: %s has not happened yet", s).With("parameter", "date")
	case d.Before(Day(now).Add(-Kept)):
		return time.Time{}, problem.New(problem.InvalidRequest, "date: WeChat Pay keeps bills three months; %s is older", s).With("parameter", "date")
	}
	return d, nil
}

type anomaliesCollector struct {
	s    *Service
	desc *prometheus.Desc
}

func (c *anomaliesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *anomaliesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]int64{}
	for _, k := range AnomalyKinds {
		counts[k] = 0
	}
	rows, err := c.s.q.ReconciliationAnomalyCounts(ctx, c.s.o.Pool, pgDate(Day(c.s.o.Now()).AddDate(0, 0, -7)))
	if err != nil {
		return
	}
	for _, r := range rows {
		counts[r.Kind] = r.N
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k)
	}
}
