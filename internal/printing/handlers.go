package printing

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Printer is a merchant's cloud printer as the API shows it.
type Printer struct {
	ID          string   `json:"id"`
	MerchantID  string   `json:"merchant_id"`
	Name        string   `json:"name"`
	Provider    string   `json:"provider"`
	Device      string   `json:"device"`
	Role        string   `json:"role"`
	CategoryIDs []string `json:"category_ids"`
	Enabled     bool     `json:"enabled"`
	Version     int64    `json:"version"`
}

// Printers is the answer of GET /admin/v1/merchants/{id}/printers.
type Printers struct {
	Printers []Printer `json:"printers"`
}

// TicketPrinter is the printer a ticket is for.
type TicketPrinter struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Role     string `json:"role"`
}

// Ticket is one print ticket as GET /admin/v1/prints shows it.
type Ticket struct {
	ID         string        `json:"id"`
	OrderID    string        `json:"order_id"`
	MerchantID string        `json:"merchant_id"`
	Printer    TicketPrinter `json:"printer"`
	// Trigger is accept (the order's ticket) or reprint (an operator's).
	Trigger string `json:"trigger"`
	Seq     int32  `json:"seq"`
	// Attempt above 1: a paper may have come out before; this one says
	// "重打 #attempt".
	Attempt int32  `json:"attempt"`
	Status  string `json:"status"`
	// Late: not printed by PrintBy.
	Late        bool       `json:"late"`
	Tries       int32      `json:"tries"`
	LastError   string     `json:"last_error,omitempty"`
	PrintBy     time.Time  `json:"print_by"`
	FirstSentAt *time.Time `json:"first_sent_at,omitempty"`
	PrintedAt   *time.Time `json:"printed_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	RequestedBy string     `json:"requested_by,omitempty"`
}

// Tickets is the answer of GET /admin/v1/prints.
type Tickets struct {
	Tickets []Ticket `json:"tickets"`
}

// CreatePrinterRequest is the body of POST /admin/v1/merchants/{id}/printers.
type CreatePrinterRequest struct {
	Name        string   `json:"name" text:"name"`
	Provider    string   `json:"provider"`
	Device      string   `json:"device"`
	Role        string   `json:"role"`
	CategoryIDs []string `json:"category_ids"`
}

// UpdatePrinterRequest is the body of PATCH /admin/v1/printers/{id}: the
// version read, and what changes.
type UpdatePrinterRequest struct {
	Version     int64     `json:"version"`
	Name        *string   `json:"name" text:"name"`
	CategoryIDs *[]string `json:"category_ids"`
	Enabled     *bool     `json:"enabled"`
}

var (
	errMerchantNotFound = problem.New(problem.NotFound, "no such merchant")
	errPrinterNotFound  = problem.New(problem.NotFound, "no such printer")
	errTicketNotFound   = problem.New(problem.NotFound, "no such print ticket")
)

func printerJSON(p dbsqlc.Printer) Printer {
	cats := make([]string, 0, len(p.CategoryIds))
	for _, c := range p.CategoryIds {
		cats = append(cats, strconv.FormatInt(c, 10))
	}
	return Printer{ID: strconv.FormatInt(p.ID, 10), MerchantID: strconv.FormatInt(p.MerchantID, 10), Name: p.Name,
		Provider: p.Provider, Device: p.Device, Role: p.Role, CategoryIDs: cats, Enabled: p.Enabled, Version: p.Version}
}

func ticketJSON(j dbsqlc.PrintJob, p dbsqlc.Printer, now time.Time) Ticket {
	return Ticket{
		ID: strconv.FormatInt(j.ID, 10), OrderID: strconv.FormatInt(j.OrderID, 10), MerchantID: strconv.FormatInt(j.MerchantID, 10),
		Printer: TicketPrinter{ID: strconv.FormatInt(p.ID, 10), Name: p.Name, Provider: p.Provider, Role: p.Role},
		Trigger: j.Trigger, Seq: j.Seq, Attempt: j.Attempt, Status: j.Status, Late: j.Status != StatusPrinted && now.After(j.PrintBy),
		Tries: j.Tries, LastError: j.LastError, PrintBy: j.PrintBy.UTC(), FirstSentAt: utc(j.FirstSentAt), PrintedAt: utc(j.PrintedAt),
		CreatedAt: j.CreatedAt.UTC(), RequestedBy: j.RequestedBy,
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// categoryIDs parses and checks a printer's categories: the merchant's
// own, each once.
func (s *Service) categoryIDs(ctx context.Context, q dbsqlc.DBTX, merchantID int64, raw []string) ([]int64, error) {
	ids := make([]int64, 0, len(raw))
	for _, r := range raw {
		id, err := strconv.ParseInt(r, 10, 64)
		if err != nil || id <= 0 || slices.Contains(ids, id) {
			return nil, problem.New(problem.InvalidRequest, "category_ids: %q is not a category id, or is given twice", r).With("field", "category_ids")
		}
		ids = append(ids, id)
	}
	if len(ids) > 100 {
		return nil, problem.New(problem.InvalidRequest, "category_ids: at most 100").With("field", "category_ids")
	}
	found, err := s.q.CategoriesOfMerchant(ctx, q, dbsqlc.CategoriesOfMerchantParams{MerchantID: merchantID, Ids: ids})
	if err != nil {
		return nil, err
	}
	if len(found) != len(ids) {
		return nil, problem.New(problem.InvalidRequest, "category_ids: not every category is this merchant's").With("field", "category_ids")
	}
	return ids, nil
}

// validDevice is a provider's device code: letters and digits.
func validDevice(d string) bool {
	if d == "" || len(d) > 40 {
		return false
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// CreatePrinter adds a printer to a merchant.
func (s *Service) CreatePrinter(ctx context.Context, tx pgx.Tx, staff auth.Staff, merchantID int64, req CreatePrinterRequest) (Printer, error) {
	if !staff.CanManage(merchantID) {
		return Printer{}, auth.ErrOtherMerchant
	}
	switch {
	case req.Name == "" || len([]rune(req.Name)) > 60:
		return Printer{}, problem.New(problem.InvalidRequest, "name: 1 to 60 characters").With("field", "name")
	case req.Provider != "yilianyun" && req.Provider != "feie":
		return Printer{}, problem.New(problem.InvalidRequest, "provider: yilianyun or feie").With("field", "provider")
	case !validDevice(req.Device):
		return Printer{}, problem.New(problem.InvalidRequest, "device: the printer's code at its provider, 1 to 40 letters and digits").With("field", "device")
	case req.Role != "kitchen" && req.Role != "receipt":
		return Printer{}, problem.New(problem.InvalidRequest, "role: kitchen or receipt").With("field", "role")
	case req.Role == "receipt" && len(req.CategoryIDs) > 0:
		return Printer{}, problem.New(problem.InvalidRequest, "category_ids: a receipt printer prints the whole order").With("field", "category_ids")
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM merchants WHERE id = $1)", merchantID).Scan(&exists); err != nil || !exists {
		if err != nil {
			return Printer{}, err
		}
		return Printer{}, errMerchantNotFound
	}
	cats, err := s.categoryIDs(ctx, tx, merchantID, req.CategoryIDs)
	if err != nil {
		return Printer{}, err
	}
	p, err := s.q.PrinterCreate(ctx, tx, dbsqlc.PrinterCreateParams{
		MerchantID: merchantID, Name: req.Name, Provider: req.Provider, Device: req.Device, Role: req.Role, CategoryIds: cats,
	})
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return Printer{}, problem.New(problem.AlreadyExists, "%s printer %s is already set up", req.Provider, req.Device)
	}
	if err != nil {
		return Printer{}, err
	}
	return printerJSON(p), nil
}

// UpdatePrinter renames a printer, changes its categories, or turns it
// off or on, from the version read.
func (s *Service) UpdatePrinter(ctx context.Context, staff auth.Staff, id int64, req UpdatePrinterRequest) (Printer, error) {
	return db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (Printer, error) {
		p, err := s.q.PrinterGet(ctx, tx, id)
		if errors.Is(err, db.ErrNotFound) || (err == nil && !staff.CanManage(p.MerchantID)) {
			return Printer{}, errPrinterNotFound
		}
		if err != nil {
			return Printer{}, err
		}
		if req.Version != p.Version {
			return Printer{}, problem.New(problem.VersionConflict, "the printer is at version %d", p.Version).With("current_version", p.Version)
		}
		params := dbsqlc.PrinterUpdateParams{ID: id, Version: p.Version, Name: p.Name, CategoryIds: p.CategoryIds, Enabled: p.Enabled}
		if req.Name != nil {
			if *req.Name == "" || len([]rune(*req.Name)) > 60 {
				return Printer{}, problem.New(problem.InvalidRequest, "name: 1 to 60 characters").With("field", "name")
			}
			params.Name = *req.Name
		}
		if req.CategoryIDs != nil {
			if p.Role == "receipt" && len(*req.CategoryIDs) > 0 {
				return Printer{}, problem.New(problem.InvalidRequest, "category_ids: a receipt printer prints the whole order").With("field", "category_ids")
			}
			if params.CategoryIds, err = s.categoryIDs(ctx, tx, p.MerchantID, *req.CategoryIDs); err != nil {
				return Printer{}, err
			}
		}
		if req.Enabled != nil {
			params.Enabled = *req.Enabled
		}
		out, err := s.q.PrinterUpdate(ctx, tx, params)
		if errors.Is(err, db.ErrNotFound) {
			return Printer{}, problem.New(problem.VersionConflict, "the printer was changed meanwhile")
		}
		if err != nil {
			return Printer{}, err
		}
		return printerJSON(out), nil
	})
}

// PrintersOf lists a merchant's printers.
func (s *Service) PrintersOf(ctx context.Context, staff auth.Staff, merchantID int64) ([]Printer, error) {
	if !staff.CanManage(merchantID) {
		return nil, auth.ErrOtherMerchant
	}
	ps, err := s.q.PrintersOf(ctx, s.opts.Pool, merchantID)
	if err != nil {
		return nil, err
	}
	out := make([]Printer, 0, len(ps))
	for _, p := range ps {
		out = append(out, printerJSON(p))
	}
	return out, nil
}

// ListTickets lists tickets newest first: a merchant's staff their
// merchant's, an admin any merchant's or (merchantID 0) all.
func (s *Service) ListTickets(ctx context.Context, staff auth.Staff, merchantID int64, status string, before int64) ([]Ticket, error) {
	if !staff.Role.Admin {
		if merchantID != 0 && merchantID != staff.Role.MerchantID {
			return nil, auth.ErrOtherMerchant
		}
		merchantID = staff.Role.MerchantID
	}
	now := s.opts.Now()
	rows, err := s.q.PrintJobsList(ctx, s.opts.Pool, dbsqlc.PrintJobsListParams{MerchantID: merchantID, Status: status, BeforeID: before, Now: now, MaxRows: 100})
	if err != nil {
		return nil, err
	}
	out := make([]Ticket, 0, len(rows))
	for _, r := range rows {
		out = append(out, ticketJSON(r.PrintJob, r.Printer, now))
	}
	return out, nil
}

// Reprint queues another ticket like ticket id (the next seq of its
// order on its printer), printed "补打 #seq", in tx.
func (s *Service) Reprint(ctx context.Context, tx pgx.Tx, staff auth.Staff, id int64) (Ticket, error) {
	row, err := s.q.PrintJobGet(ctx, tx, id)
	if errors.Is(err, db.ErrNotFound) || (err == nil && !staff.CanManage(row.PrintJob.MerchantID)) {
		return Ticket{}, errTicketNotFound
	}
	if err != nil {
		return Ticket{}, err
	}
	j := row.PrintJob
	if _, err := s.q.PrintJobLockFirst(ctx, tx, dbsqlc.PrintJobLockFirstParams{OrderID: j.OrderID, PrinterID: j.PrinterID}); err != nil {
		return Ticket{}, err
	}
	now := s.opts.Now()
	newID, err := s.q.PrintJobReprint(ctx, tx, dbsqlc.PrintJobReprintParams{ID: id, PrintBy: now.Add(s.opts.PrintWithin), Now: now, RequestedBy: staff.Subject})
	if err != nil {
		return Ticket{}, err
	}
	out, err := s.q.PrintJobGet(ctx, tx, newID)
	if err != nil {
		return Ticket{}, err
	}
	return ticketJSON(out.PrintJob, out.Printer, now), nil
}

// staffHandler adapts a handler that needs the staff member and the {id}
// path parameter.
func staffHandler(notFound error, h func(http.ResponseWriter, *http.Request, auth.Staff, int64)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		id, err := web.PathID(r, notFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		h(w, r, staff, id)
	})
}

// HandleCreatePrinter serves POST /admin/v1/merchants/{id}/printers,
// exactly once per Idempotency-Key.
func HandleCreatePrinter(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, false, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, ok := auth.StaffFrom(ctx)
		if !ok {
			return idempotency.Created{}, problem.New(problem.Unauthorized, "staff token required")
		}
		merchantID, err := web.PathID(r, errMerchantNotFound)
		if err != nil {
			return idempotency.Created{}, err
		}
		req, err := web.Decode[CreatePrinterRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		p, err := s.CreatePrinter(ctx, tx, staff, merchantID, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, p)
	})
}

// HandleListPrinters serves GET /admin/v1/merchants/{id}/printers.
func HandleListPrinters(s *Service) http.Handler {
	return staffHandler(errMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		ps, err := s.PrintersOf(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Printers{Printers: ps})
	})
}

// HandleUpdatePrinter serves PATCH /admin/v1/printers/{id}.
func HandleUpdatePrinter(s *Service) http.Handler {
	return staffHandler(errPrinterNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[UpdatePrinterRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		p, err := s.UpdatePrinter(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, p)
	})
}

// HandleList serves GET /admin/v1/prints?status=&merchant_id=&before=.
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		q, err := web.Query(r, "status", "merchant_id", "before")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		status := q.Get("status")
		if !slices.Contains([]string{"", StatusQueued, StatusSent, StatusPrinted, StatusFailed, StatusLate}, status) {
			web.Error(w, r, problem.New(problem.InvalidRequest, "status: queued, sent, printed, failed or late").With("parameter", "status"))
			return
		}
		var merchantID, before int64
		for name, dst := range map[string]*int64{"merchant_id": &merchantID, "before": &before} {
			if v := q.Get(name); v != "" {
				if *dst, err = strconv.ParseInt(v, 10, 64); err != nil || *dst <= 0 {
					web.Error(w, r, problem.New(problem.InvalidRequest, "%s: a positive id", name).With("parameter", name))
					return
				}
			}
		}
		ts, err := s.ListTickets(r.Context(), staff, merchantID, status, before)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Tickets{Tickets: ts})
	})
}

// HandleReprint serves POST /admin/v1/prints/{id}/reprint: one reprint
// per Idempotency-Key (required: a retried request must not print
// twice).
func HandleReprint(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, true, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, ok := auth.StaffFrom(ctx)
		if !ok {
			return idempotency.Created{}, problem.New(problem.Unauthorized, "staff token required")
		}
		id, err := web.PathID(r, errTicketNotFound)
		if err != nil {
			return idempotency.Created{}, err
		}
		t, err := s.Reprint(ctx, tx, staff, id)
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, t)
	})
}

// HandleCallback serves POST /v1/printers/{provider}/callback: a
// provider's signed print callback, answered as the provider expects.
func HandleCallback(s *Service, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := web.CheckQuery(r); err != nil {
			web.Error(w, r, err)
			return
		}
		prov, ok := s.Provider(chi.URLParam(r, "provider"))
		if !ok {
			web.Error(w, r, problem.New(problem.NotFound, "no such printer provider"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		cb, err := prov.Callback(r)
		if err != nil {
			s.callbacks.WithLabelValues(prov.Name(), "rejected").Inc()
			web.Logger(r.Context()).WarnContext(r.Context(), "print callback rejected", "provider", prov.Name(), "err", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		done, err := s.HandleCallback(r.Context(), prov, cb)
		if err != nil {
			web.Logger(r.Context()).ErrorContext(r.Context(), "print callback", "provider", prov.Name(), "err", err)
		}
		prov.Acknowledge(w, done)
	})
}
