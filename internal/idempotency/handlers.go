package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

func pathKey(r *http.Request) (int64, string, error) {
	userID, err := ParseUserID(chi.URLParam(r, "user_id"))
	if err != nil {
		return 0, "", err
	}
	key, err := url.PathUnescape(chi.URLParam(r, "key"))
	if err != nil {
		return 0, "", ErrNoRecord
	}
	key, err = ParseKey(key)
	if err != nil {
		return 0, "", err
	}
	return userID, key, nil
}

// HandleInspect serves GET /admin/v1/idempotency-keys/{user_id}/{key}.
func HandleInspect(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, key, err := pathKey(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		in, err := s.Inspect(r.Context(), userID, key)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, in)
	})
}

// HandlePurge serves DELETE /admin/v1/idempotency-keys/{user_id}/{key}.
func HandlePurge(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, key, err := pathKey(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if err := s.Purge(r.Context(), userID, key); err != nil {
			web.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Created is what a creating handler made: the response to send (and to
// replay for a retry), and what to do once it is committed (e.g.
// invalidate caches), if anything.
type Created struct {
	Response    Response
	AfterCommit func()
}

// JSONCreated renders v as a JSON response with status and extra headers
// (name, value pairs).
func JSONCreated(status int, v any, headers ...string) (Created, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return Created{}, err
	}
	h := map[string]string{"Content-Type": "application/json"}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return Created{Response: Response{Status: status, Headers: h, Body: body}}, nil
}

// Creating serves a request that creates or adds something exactly once
// per Idempotency-Key, through Do, as submit does: the same key and body
// get the first answer byte for byte with Idempotent-Replayed: true, the
// same key with another body 422. scope names who sent the request (keys
// of two callers never meet). Without the header the request runs once as
// sent, unless required, when it is 400 idempotency-key-missing.
func Creating(s *Store, b db.Beginner, required bool, scope func(*http.Request) string,
	create func(ctx context.Context, tx pgx.Tx, r *http.Request) (Created, error)) http.Handler {
	return CreatingWith(s, b, CreateOptions{Required: required, Scope: scope}, create)
}

// CreateOptions say how CreatingWith treats a route's keys.
type CreateOptions struct {
	// Required makes a request without an Idempotency-Key 400
	// idempotency-key-missing; otherwise it runs once as sent.
	Required bool
	// Scope names who sent the request: keys of two callers never meet.
	Scope func(*http.Request) string
	// Identity, when set, is what a key's records keep of a body instead
	// of the body itself (its fingerprint, and L1's copy): for a body that
	// holds a secret, such as a new account's password, which must then
	// be kept only as a keyed hash. Two bodies are the same request when
	// their identities are equal. An error refuses the request.
	Identity func(body []byte) ([]byte, error)
}

// CreatingWith is Creating with its options.
func CreatingWith(s *Store, b db.Beginner, o CreateOptions,
	create func(ctx context.Context, tx pgx.Tx, r *http.Request) (Created, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		raw := r.Header.Get("Idempotency-Key")
		var after func()
		change := ChangeFunc(func(ctx context.Context, tx *Tx) (Answer, error) {
			// Do runs a change again when PostgreSQL aborted it to break a
			// deadlock: each run reads the body from its start.
			if r.GetBody != nil {
				if body, err := r.GetBody(); err == nil {
					r.Body = body
				}
			}
			c, err := create(ctx, tx, r)
			after = c.AfterCommit
			return tx.Answer(Record{Response: c.Response}), err
		})
		var (
			res Result
			err error
		)
		if raw == "" && !o.Required {
			res.Response, err = db.WithTxV(ctx, b, func(tx pgx.Tx) (Response, error) {
				ans, err := change(ctx, &Tx{Tx: tx, s: s, atStart: true})
				return ans.rec.Response, err
			})
		} else {
			res, err = s.doHTTP(r, raw, NamedScope(o.Scope(r)), o.Identity, change)
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if after != nil {
			after()
		}
		WriteResponse(w, res)
	})
}

// WriteResponse sends a response Do answered with, marking a replay with
// Idempotent-Replayed: true.
func WriteResponse(w http.ResponseWriter, res Result) {
	for k, v := range res.Response.HeaderFields() {
		w.Header().Set(k, v)
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(res.Response.Body)))
	w.WriteHeader(res.Response.Status)
	_, _ = w.Write(res.Response.Body)
}

// doHTTP reads the key and the whole body (left readable for the
// handler, from its start again through r.GetBody) and runs op through Do, the request known by the body's
// identity when one is given (see CreateOptions.Identity).
func (s *Store) doHTTP(r *http.Request, rawKey string, scope Scope, identity func([]byte) ([]byte, error), op Operation) (Result, error) {
	key, err := ParseKey(rawKey)
	if err != nil {
		return Result{}, err
	}
	body, err := web.ReadBody(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Result{}, problem.New(problem.BodyTooLarge, "the body exceeds %d bytes", mbe.Limit)
		}
		return Result{}, problem.Wrap(problem.InvalidRequest, err, "the body could not be read")
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	kept := body
	if identity != nil {
		if kept, err = identity(body); err != nil {
			return Result{}, err
		}
	}
	return s.Do(r.Context(), Request{Scope: scope, Key: key, Route: HTTPRoute(r), Body: string(kept)}, op)
}

// HTTPRoute is r's Request.Route: its method and escaped path, which
// hold the route and every path parameter (the refund of order 7 is not
// the refund of order 8), and no newline or other raw byte.
func HTTPRoute(r *http.Request) string { return r.Method + " " + r.URL.EscapedPath() }
