package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/takeout/takeout/internal/problem"
)

// Query reads r's query string strictly, where url.URL.Query drops what it
// cannot parse and so turns a filter the caller sent into no filter at
// all: a malformed pair (a bad %-escape, a ';' separator), a parameter
// the route does not take, one given twice, or a value that breaks the
// text rule is a 400 problem naming the parameter.
func Query(r *http.Request, allowed ...string) (url.Values, error) {
	out := url.Values{}
	err := eachParameter(r.URL.RawQuery, func(key, value string) error {
		switch {
		case !slices.Contains(allowed, key):
			if len(allowed) == 0 {
				return queryProblem(key, "this route takes no query parameters")
			}
			return queryProblem(key, "unknown parameter; this route takes %s", strings.Join(allowed, ", "))
		case out.Has(key):
			return queryProblem(key, "given more than once")
		}
		out.Set(key, value)
		return nil
	})
	return out, err
}

// CheckQuery reports a query string that does not parse, or holds
// control characters, naming the parameter: every route refuses one.
func CheckQuery(r *http.Request) error {
	return eachParameter(r.URL.RawQuery, func(string, string) error { return nil })
}

// eachParameter calls f with each parameter of a raw query string,
// unescaped, in order.
func eachParameter(raw string, f func(key, value string) error) error {
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			return problem.New(problem.InvalidRequest, "the query string is malformed at %q: %v", pair, err).With("parameter", rawKey)
		}
		if strings.Contains(pair, ";") {
			return queryProblem(key, "';' does not separate parameters: use '&', or escape it as %%3B")
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return queryProblem(key, "malformed %%-escape in %q", rawValue)
		}
		if CheckText(key, key+value, false) != nil {
			return queryProblem(key, "no control characters")
		}
		if err := f(key, value); err != nil {
			return err
		}
	}
	return nil
}

func queryProblem(param, format string, args ...any) *problem.Error {
	p := problem.New(problem.InvalidRequest, "query parameter %s: %s", param, fmt.Sprintf(format, args...))
	return p.With("parameter", param)
}

// textHeaders are the request headers the service reads as text. Others
// it reads are parsed whole (Content-Type, traceparent), checked where
// they are read (X-Request-Id) or answered in WeChat Pay's shape
// (Wechatpay-*, whose signature covers them).
var textHeaders = []string{"Authorization", "Idempotency-Key", "Last-Event-ID"}

// CheckPathAndHeaders applies the text rule to r's path, whose segments
// are the path parameters, and to the headers the service reads as text:
// bytes that are not UTF-8, or control characters, escaped in a path
// segment (%FF, %00) or raw in a header, are a 400 problem before any
// handler could carry them to PostgreSQL, which refuses them.
func CheckPathAndHeaders(r *http.Request) error {
	if CheckText("path", r.URL.Path, false) != nil {
		return problem.New(problem.InvalidRequest, "the path must be UTF-8 text without control characters, escaped or not")
	}
	for _, name := range textHeaders {
		if v := r.Header.Get(name); v != "" && CheckText(name, v, false) != nil {
			return problem.New(problem.InvalidRequest, "header %s must be UTF-8 text without control characters", name).With("header", name)
		}
	}
	return nil
}
