package ledger

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Figures are one day's (or a range's) money of a merchant, each one sum
// of the ledger's entries; nothing here is computed from orders again.
type Figures struct {
	// Orders are the sales posted (orders paid).
	Orders int32 `json:"orders"`
	// GrossFen is what the orders were worth: paid plus every discount.
	GrossFen int64 `json:"gross_fen"`
	// MerchantDiscountFen and PlatformDiscountFen are the discounts by
	// who funds them (net of what refunds gave back of them).
	MerchantDiscountFen int64 `json:"merchant_discount_fen"`
	PlatformDiscountFen int64 `json:"platform_discount_fen"`
	// RefundsFen is what refunds took back of the sales (what the
	// customer got back and the discounts that went with it).
	RefundsFen int64 `json:"refunds_fen"`
	// CommissionFen is the platform's commission, net of refunds'.
	CommissionFen int64 `json:"commission_fen"`
	// FeesFen are WeChat Pay's fees on the orders (the platform's to
	// pay; known from the daily bill).
	FeesFen int64 `json:"fees_fen"`
	// NetFen is what the merchant is owed: gross less its discounts,
	// refunds and commission.
	NetFen int64 `json:"net_fen"`
}

func (f *Figures) add(o Figures) {
	f.Orders += o.Orders
	f.GrossFen += o.GrossFen
	f.MerchantDiscountFen += o.MerchantDiscountFen
	f.PlatformDiscountFen += o.PlatformDiscountFen
	f.RefundsFen += o.RefundsFen
	f.CommissionFen += o.CommissionFen
	f.FeesFen += o.FeesFen
	f.NetFen += o.NetFen
}

// StatementDay is one day of a statement, in the merchant's time zone.
type StatementDay struct {
	Date string `json:"date"`
	Figures
}

// TopDish is a dish of the statement's orders.
type TopDish struct {
	DishID   string `json:"dish_id"`
	Name     string `json:"name"`
	Qty      int64  `json:"qty"`
	SalesFen int64  `json:"sales_fen"`
}

// Statement is a merchant's money for a range of days.
type Statement struct {
	MerchantID string         `json:"merchant_id"`
	TimeZone   string         `json:"time_zone"`
	From       string         `json:"from"`
	To         string         `json:"to"`
	Days       []StatementDay `json:"days"`
	Totals     Figures        `json:"totals"`
	TopDishes  []TopDish      `json:"top_dishes"`
}

// maxStatementDays bounds a statement's range.
const maxStatementDays = 93

// topDishes is how many dishes a statement names.
const topDishes = 10

// Statement returns a merchant's statement from the day from to the day
// to (both included, in its time zone), every day of it, days without
// money at zero.
func (s *Service) Statement(ctx context.Context, merchantID int64, from, to string, now time.Time) (Statement, error) {
	tz, err := s.q.MerchantTimeZone(ctx, s.pool, merchantID)
	if errors.Is(err, db.ErrNotFound) {
		return Statement{}, errMerchantNotFound
	}
	if err != nil {
		return Statement{}, err
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Statement{}, fmt.Errorf("merchant %d time zone %q: %w", merchantID, tz, err)
	}
	first, last, err := statementRange(from, to, now.In(loc), loc)
	if err != nil {
		return Statement{}, err
	}
	end := last.AddDate(0, 0, 1)
	rows, err := s.q.MerchantStatementDays(ctx, s.pool, dbsqlc.MerchantStatementDaysParams{TimeZone: tz, MerchantID: merchantID, FromAt: first, ToAt: end})
	if err != nil {
		return Statement{}, fmt.Errorf("read statement: %w", err)
	}
	byDay := map[string]Figures{}
	for _, r := range rows {
		byDay[dateOf(r.Day)] = Figures{Orders: r.Orders, GrossFen: r.GrossFen, MerchantDiscountFen: r.MerchantDiscountFen,
			PlatformDiscountFen: r.PlatformDiscountFen, RefundsFen: r.RefundsFen, CommissionFen: r.CommissionFen, FeesFen: r.FeesFen, NetFen: r.NetFen}
	}
	out := Statement{MerchantID: strconv.FormatInt(merchantID, 10), TimeZone: tz, From: first.Format(time.DateOnly), To: last.Format(time.DateOnly),
		Days: []StatementDay{}, TopDishes: []TopDish{}}
	for d := first; d.Before(end); d = d.AddDate(0, 0, 1) {
		day := StatementDay{Date: d.Format(time.DateOnly), Figures: byDay[d.Format(time.DateOnly)]}
		out.Days = append(out.Days, day)
		out.Totals.add(day.Figures)
	}
	dishes, err := s.q.MerchantTopDishes(ctx, s.pool, dbsqlc.MerchantTopDishesParams{MerchantID: merchantID, FromAt: first, ToAt: end, MaxRows: topDishes})
	if err != nil {
		return Statement{}, fmt.Errorf("read top dishes: %w", err)
	}
	for _, d := range dishes {
		out.TopDishes = append(out.TopDishes, TopDish{DishID: strconv.FormatInt(d.DishID, 10), Name: d.Name, Qty: d.Qty, SalesFen: d.SalesFen})
	}
	return out, nil
}

func dateOf(d pgtype.Date) string { return d.Time.Format(time.DateOnly) }

// statementRange reads from and to (YYYY-MM-DD in loc; by default the
// last 7 days to today) into the first and last day's midnights.
func statementRange(from, to string, now time.Time, loc *time.Location) (time.Time, time.Time, error) {
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	last, first := today, today.AddDate(0, 0, -6)
	var err error
	if to != "" {
		if last, err = time.ParseInLocation(time.DateOnly, to, loc); err != nil {
			return time.Time{}, time.Time{}, problem.New(problem.InvalidRequest, "to: YYYY-MM-DD").With("parameter", "to")
		}
		first = last.AddDate(0, 0, -6)
	}
	if from != "" {
		if first, err = time.ParseInLocation(time.DateOnly, from, loc); err != nil {
			return time.Time{}, time.Time{}, problem.New(problem.InvalidRequest, "from: YYYY-MM-DD").With("parameter", "from")
		}
	}
	switch {
	case first.After(last):
		return time.Time{}, time.Time{}, problem.New(problem.InvalidRequest, "from is after to").With("parameter", "from")
	case last.Sub(first) >= maxStatementDays*24*time.Hour:
		return time.Time{}, time.Time{}, problem.New(problem.InvalidRequest, "at most %d days at once", maxStatementDays).With("parameter", "from")
	}
	return first, last, nil
}

// yuan writes fen as yuan with two decimals, in integers.
func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// writeCSV writes a statement as CSV, amounts in yuan, with a totals line.
func writeCSV(w http.ResponseWriter, st Statement) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="statement-%s-%s-%s.csv"`, st.MerchantID, st.From, st.To))
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"date", "orders", "gross_yuan", "merchant_discount_yuan", "platform_discount_yuan", "refunds_yuan", "commission_yuan", "fees_yuan", "net_yuan"})
	row := func(label string, f Figures) {
		_ = cw.Write([]string{label, strconv.Itoa(int(f.Orders)), yuan(f.GrossFen), yuan(f.MerchantDiscountFen), yuan(f.PlatformDiscountFen),
			yuan(f.RefundsFen), yuan(f.CommissionFen), yuan(f.FeesFen), yuan(f.NetFen)})
	}
	for _, d := range st.Days {
		row(d.Date, d.Figures)
	}
	row("total", st.Totals)
	cw.Flush()
}

// HandleStatement serves GET /admin/v1/merchants/{id}/statement?from=&to=&format=
// (admins, and the merchant's staff): JSON, or CSV with format=csv.
func HandleStatement(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, errMerchantNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		staff, _ := auth.StaffFrom(r.Context())
		if !staff.CanManage(id) {
			web.Error(w, r, problem.New(problem.Forbidden, "staff read their own merchant's statement"))
			return
		}
		q, err := web.Query(r, "from", "to", "format")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		format := q.Get("format")
		if format != "" && format != "json" && format != "csv" {
			web.Error(w, r, problem.New(problem.InvalidRequest, "format: json or csv").With("parameter", "format"))
			return
		}
		st, err := s.Statement(r.Context(), id, q.Get("from"), q.Get("to"), time.Now())
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if format == "csv" {
			writeCSV(w, st)
			return
		}
		web.JSON(w, http.StatusOK, st)
	})
}
