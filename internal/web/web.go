// Package web is the HTTP plumbing that every handler shares: strict JSON
// request decoding with size limits, JSON responses, and the one function
// that turns errors into RFC 9457 problem documents.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/takeout/takeout/internal/problem"
)

// Validator is implemented by request bodies that check their own values
// after decoding.
type Validator interface {
	Validate() error
}

// Decode reads one JSON object from r's body into a T: unknown fields,
// wrong types, trailing data, a non-JSON content type, oversized bodies
// and strings that break the text rule (see CheckText) are problems
// naming what is wrong. The body size limit is set by the
// server's middleware (http.MaxBytesReader).
func Decode[T any](r *http.Request) (T, error) {
	var v T
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return v, problem.New(problem.UnsupportedMediaType, "send the body as Content-Type: application/json, got %q", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return v, tooLarge(mbe)
		}
		return v, problem.New(problem.InvalidRequest, "the body must hold exactly one JSON object")
	}
	if err := checkStrings(reflect.ValueOf(&v), "", false); err != nil {
		return v, err
	}
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, err
		}
	}
	return v, nil
}

// maxSizedBody bounds the buffer ReadBody sizes from Content-Length
// before reading: a larger claim is read as it arrives.
const maxSizedBody = 64 << 10

// ReadBody reads r's body to its end as io.ReadAll does, into one buffer
// sized by the request's Content-Length when it gives one, instead of a
// buffer grown and copied as the bytes arrive.
func ReadBody(r *http.Request) ([]byte, error) {
	return readBody(r.Body, r.ContentLength)
}

func readBody(body io.Reader, announced int64) ([]byte, error) {
	if announced <= 0 || announced > maxSizedBody {
		return io.ReadAll(body)
	}
	// One byte of room past the announced length, for the read that
	// sees the end.
	b := make([]byte, 0, announced+1)
	for {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			// Longer than announced: the rest as it comes.
			rest, err := io.ReadAll(body)
			return append(b, rest...), err
		}
	}
}

func tooLarge(mbe *http.MaxBytesError) error {
	return problem.New(problem.BodyTooLarge, "the body exceeds %d bytes", mbe.Limit)
}

func decodeError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(mbe)
	case errors.Is(err, io.EOF):
		return problem.New(problem.InvalidRequest, "the body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem.New(problem.InvalidRequest, "the body is truncated JSON")
	case errors.As(err, &syn):
		return problem.New(problem.InvalidRequest, "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return problem.New(problem.InvalidRequest, "the body must be a JSON object, got %s", typ.Value)
		}
		return problem.Field(typ.Field, "must be %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return problem.Field(field, "unknown field")
	default:
		return problem.Wrap(problem.InvalidRequest, err, "the body is not valid JSON")
	}
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case goKind == "slice", goKind == "array":
		return "an array"
	default:
		return "an object"
	}
}

// JSON writes v as a JSON response with the given status.
func JSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here: our response types marshal.
		http.Error(w, `{"type":"internal-error","title":"Internal server error","status":500}`, http.StatusInternalServerError)
		return
	}
	RawJSON(w, status, body)
}

// RawJSON writes an already encoded JSON body.
func RawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte{'\n'})
}

// ClientGone reports whether err is the request's own cancellation: its
// client closed the connection before the answer, so the work stopped
// where it was (a transaction rolled back) and no one reads the answer.
func ClientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// Error writes err as a problem document. Problems are shown as they are;
// anything else is a 500 whose cause is logged (with the request id, by the
// request's logger) and never shown. A request its client abandoned is
// answered 503 (whoever still listens may retry) and logged as expected.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	logger := Logger(r.Context())
	p, ok := problem.As(err)
	if !ok && ClientGone(r, err) {
		Expected(r.Context())
		logger.InfoContext(r.Context(), "request abandoned: the client went away", "err", err)
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, r, problem.New(problem.Unavailable, "the request was cancelled; retry"))
		return
	}
	if !ok && dependencyDown(r.Context(), err) {
		// The database is down or restarting: nothing committed, and a
		// retry shortly will likely succeed.
		p = problem.New(problem.Unavailable, "the database is unavailable; retry shortly")
		w.Header().Set("Retry-After", "1")
		logger.WarnContext(r.Context(), "request failed: database unavailable", "err", err)
		WriteProblem(w, r, p)
		return
	}
	if !ok {
		p = problem.New(problem.Internal, "something went wrong on our side; quote request id %s when reporting it", RequestID(r.Context()))
		logger.ErrorContext(r.Context(), "request failed", "err", err)
	} else if p.Type.Status >= 500 {
		logger.ErrorContext(r.Context(), "request failed", "err", err)
	}
	WriteProblem(w, r, p)
}

// WriteProblem renders p as application/problem+json.
func WriteProblem(w http.ResponseWriter, r *http.Request, p *problem.Error) {
	doc := make(map[string]any, len(p.Extra)+5)
	for k, v := range p.Extra {
		doc[k] = v
	}
	doc["type"] = p.Type.Slug
	doc["title"] = p.Type.Title
	doc["status"] = p.Type.Status
	doc["detail"] = p.Detail
	if r != nil {
		doc["instance"] = r.URL.Path
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		buf.Reset()
		fmt.Fprintf(&buf, `{"type":%q,"status":%d}`+"\n", p.Type.Slug, p.Type.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	if p.Type.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// Every 503 says when to come back.
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(p.Type.Status)
	_, _ = w.Write(buf.Bytes())
}
