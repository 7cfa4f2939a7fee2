package sharing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// errDisabled answers the routes of profit sharing in the merchant mode.
var errDisabled = problem.New(problem.Unavailable, "profit sharing needs the service-provider mode (TAKEOUT_WXPAY_MODE=partner)")

var errMerchantNotFound = problem.New(problem.NotFound, "no such merchant")

// SubMerchantRequest onboards a merchant: the sub-merchant id WeChat Pay
// gave it under the platform's service-provider account, and the app id
// of its own, when it pays through one.
type SubMerchantRequest struct {
	SubMchID *string `json:"sub_mchid"`
	SubAppID *string `json:"sub_appid"`
}

var (
	subMchIDPattern = regexp.MustCompile(`^[0-9]{8,12}$`)
	subAppIDPattern = regexp.MustCompile(`^wx[0-9a-f]{16}$`)
)

// Validate checks the ids' forms (WeChat Pay's merchant ids are digits,
// app ids wx and 16 hex digits).
func (r *SubMerchantRequest) Validate() error {
	if r.SubMchID == nil || !subMchIDPattern.MatchString(*r.SubMchID) {
		return problem.Field("sub_mchid", "required: the sub-merchant's id at WeChat Pay, 8 to 12 digits")
	}
	if r.SubAppID != nil && !subAppIDPattern.MatchString(*r.SubAppID) {
		return problem.Field("sub_appid", "an app id: wx and 16 hexadecimal digits")
	}
	return nil
}

// SubMerchant is a merchant's sub-merchant account.
type SubMerchant struct {
	MerchantID string  `json:"merchant_id"`
	SubMchID   string  `json:"sub_mchid"`
	SubAppID   *string `json:"sub_appid"`
	Version    int64   `json:"version"`
}

// SetSubMerchant onboards merchantID with its sub-merchant account;
// payments taken from then on are its.
func SetSubMerchant(ctx context.Context, pool *pgxpool.Pool, merchantID int64, req SubMerchantRequest) (SubMerchant, error) {
	row, err := dbsqlc.New().MerchantSetSubMerchant(ctx, pool, dbsqlc.MerchantSetSubMerchantParams{ID: merchantID, SubMchid: req.SubMchID, SubAppid: req.SubAppID})
	if errors.Is(err, db.ErrNotFound) {
		return SubMerchant{}, errMerchantNotFound
	}
	if _, dup := db.UniqueViolation(err); dup {
		return SubMerchant{}, problem.New(problem.AlreadyExists, "another merchant has sub_mchid %s", *req.SubMchID).With("field", "sub_mchid")
	}
	if err != nil {
		return SubMerchant{}, fmt.Errorf("set sub-merchant: %w", err)
	}
	return SubMerchant{MerchantID: strconv.FormatInt(row.ID, 10), SubMchID: derefOr(row.SubMchid), SubAppID: row.SubAppid, Version: row.Version}, nil
}

// HandleSetSubMerchant serves PUT /admin/v1/merchants/{id}/sub-merchant
// (admins). It works in either mode, so that merchants are onboarded
// before the platform switches to the service-provider mode.
func HandleSetSubMerchant(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, errMerchantNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		req, err := web.Decode[SubMerchantRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		m, err := SetSubMerchant(r.Context(), pool, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, m)
	})
}

// Requests is a list of profit-sharing requests.
type Requests struct {
	Requests []Request `json:"requests"`
}

// HandleList serves GET /admin/v1/profit-sharing (admins): the newest
// requests, FAILED ones by default (what waits for an operator), or of
// ?status= and ?order_id=.
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, errDisabled)
			return
		}
		q, err := web.Query(r, "status", "order_id")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		status := q.Get("status")
		if status == "" {
			status = StatusFailed
		}
		if status == "all" {
			status = ""
		} else if !slices.Contains([]string{StatusPending, StatusProcessing, StatusSuccess, StatusFailed, StatusSuperseded}, status) {
			web.Error(w, r, problem.New(problem.InvalidRequest, "status: PENDING, PROCESSING, SUCCESS, FAILED, SUPERSEDED or all").With("parameter", "status"))
			return
		}
		var orderID *int64
		if v := q.Get("order_id"); v != "" {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				web.Error(w, r, problem.New(problem.InvalidRequest, "order_id: a positive id").With("parameter", "order_id"))
				return
			}
			orderID = &id
		}
		list, err := s.List(r.Context(), status, orderID, 200)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Requests{Requests: list})
	})
}

// HandleRetry serves POST /admin/v1/profit-sharing/{out_no}/retry
// (admins): a FAILED request tried again as its next attempt.
func HandleRetry(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, errDisabled)
			return
		}
		if _, err := web.Query(r); err != nil { // it takes no parameters
			web.Error(w, r, err)
			return
		}
		req, err := s.Retry(r.Context(), r.PathValue("out_no"))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, req)
	})
}
