package shipping

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Upload is an order's shipping upload as operators see it.
type Upload struct {
	OrderID    string `json:"order_id"`
	MerchantID string `json:"merchant_id,omitempty"`
	// LogisticsType is WeChat's: 2 same-city delivery, 4 collected.
	LogisticsType int16  `json:"logistics_type"`
	Status        string `json:"status"`
	Tries         int32  `json:"tries"`
	// Errcode and LastError are WeChat's last refusal or the last
	// failure.
	Errcode    *int32     `json:"errcode"`
	LastError  string     `json:"last_error"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	UploadedAt *time.Time `json:"uploaded_at"`
}

// Uploads is the answer of GET /admin/v1/shipping.
type Uploads struct {
	Uploads []Upload `json:"uploads"`
}

func uploadFrom(u dbsqlc.ShippingUpload, merchantID int64) Upload {
	out := Upload{OrderID: strconv.FormatInt(u.OrderID, 10), LogisticsType: u.LogisticsType, Status: u.Status, Tries: u.Tries,
		Errcode: u.Errcode, LastError: u.LastError, CreatedAt: u.CreatedAt.UTC(), UpdatedAt: u.UpdatedAt.UTC()}
	if merchantID != 0 {
		out.MerchantID = strconv.FormatInt(merchantID, 10)
	}
	if u.UploadedAt != nil {
		at := u.UploadedAt.UTC()
		out.UploadedAt = &at
	}
	return out
}

// maxList is how many uploads a list answers with.
const maxList = 200

// List returns the uploads of a status (of one merchant when merchantID
// is not 0), oldest first.
func (s *Service) List(ctx context.Context, status string, merchantID int64) ([]Upload, error) {
	p := dbsqlc.ShippingUploadListParams{Status: status, MaxRows: maxList}
	if merchantID != 0 {
		p.MerchantID = &merchantID
	}
	rows, err := s.q.ShippingUploadList(ctx, s.opts.Pool, p)
	if err != nil {
		return nil, err
	}
	out := make([]Upload, len(rows))
	for i, r := range rows {
		out[i] = uploadFrom(dbsqlc.ShippingUpload{OrderID: r.OrderID, LogisticsType: r.LogisticsType, Status: r.Status, Tries: r.Tries,
			Errcode: r.Errcode, LastError: r.LastError, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, UploadedAt: r.UploadedAt}, r.MerchantID)
	}
	return out, nil
}

var errNotFound = problem.New(problem.NotFound, "no shipping upload for this order")

// Retry queues an upload that failed or was refused again.
func (s *Service) Retry(ctx context.Context, orderID int64) (Upload, error) {
	return db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (Upload, error) {
		row, err := s.q.ShippingUploadRetry(ctx, tx, orderID)
		if errors.Is(err, db.ErrNotFound) {
			cur, gerr := s.q.ShippingUploadSubject(ctx, tx, orderID)
			if errors.Is(gerr, db.ErrNotFound) {
				return Upload{}, errNotFound
			}
			if gerr != nil {
				return Upload{}, gerr
			}
			return Upload{}, problem.New(problem.VersionConflict, "the upload is %s: only a failed or refused one is retried", cur.Status).
				With("current_status", cur.Status)
		}
		if err != nil {
			return Upload{}, err
		}
		// Not unique: the last try's job may still be finishing (running),
		// and would not run again; the lease keeps the two apart.
		if err := s.insertJob(ctx, tx, orderID, false); err != nil {
			return Upload{}, err
		}
		return uploadFrom(row, 0), nil
	})
}

// HandleList serves GET /admin/v1/shipping?status=&merchant_id= (admins).
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := web.Query(r, "status", "merchant_id")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		status := q.Get("status")
		if status == "" {
			status = StatusFailed
		}
		if !slices.Contains([]string{StatusPending, StatusUploaded, StatusRefused, StatusFailed, StatusSkipped}, status) {
			web.Error(w, r, problem.New(problem.InvalidRequest, "status: pending, uploaded, refused, failed or skipped").With("parameter", "status"))
			return
		}
		var merchantID int64
		if v := q.Get("merchant_id"); v != "" {
			if merchantID, err = strconv.ParseInt(v, 10, 64); err != nil || merchantID <= 0 {
				web.Error(w, r, problem.New(problem.InvalidRequest, "merchant_id: a positive id").With("parameter", "merchant_id"))
				return
			}
		}
		list, err := s.List(r.Context(), status, merchantID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Uploads{Uploads: list})
	})
}

// HandleRetry serves POST /admin/v1/shipping/{id}/retry (admins), id
// the order's.
func HandleRetry(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, errNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		u, err := s.Retry(r.Context(), id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, u)
	})
}
