package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/takeout/takeout/api"
)

// contract is api/openapi.yaml, loaded once per test binary.
var contract = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is invalid: %w", err)
	}
	// Test servers listen on random ports: match paths on any host.
	doc.Servers = nil
	// The v2 payment callback answers XML, the board HTML, a script and
	// styles: check them as text.
	for _, ct := range []string{"text/xml", "text/html", "text/javascript", "text/css", "text/event-stream"} {
		openapi3filter.RegisterBodyDecoder(ct, func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(r)
			return string(b), err
		})
	}
	return legacy.NewRouter(doc)
})

// OpenAPIDoc returns the parsed contract.
func OpenAPIDoc(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// ContractClient returns an HTTP client that checks every response against
// api/openapi.yaml: its status must be documented for the route and its
// body must match the documented schema. A request to a route the
// contract lacks must be answered by a 404 or 405 problem.
func ContractClient(t testing.TB) *http.Client {
	t.Helper()
	router, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &contractTransport{t: t, router: router, next: http.DefaultTransport}}
}

type contractTransport struct {
	t      testing.TB
	router routers.Router
	next   http.RoundTripper
}

func (c *contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "text/event-stream" {
		// A stream does not end: its status and headers are checked now,
		// and each event as the caller reads it.
		if err := c.check(req, resp, nil); err != nil {
			c.t.Errorf("contract: %s %s -> %d: %v", req.Method, req.URL.Path, resp.StatusCode, err)
		}
		resp.Body = &eventChecker{t: c.t, what: req.Method + " " + req.URL.Path, body: resp.Body}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := c.check(req, resp, body); err != nil {
		c.t.Errorf("contract: %s %s -> %d: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, truncate(body))
	}
	return resp, nil
}

func (c *contractTransport) check(req *http.Request, resp *http.Response, body []byte) error {
	if req.URL.RawPath != "" {
		// Route on the encoded path: an escaped "/" is part of a parameter.
		u := *req.URL
		u.Path = u.RawPath
		req = req.Clone(req.Context())
		req.URL = &u
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// Not in the contract: only a not-found or method-not-allowed problem may answer.
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("route not in openapi.yaml: %w", err)
		}
		var p struct {
			Type string `json:"type"`
		}
		if resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Type == "" {
			return fmt.Errorf("undocumented route answered without a problem document")
		}
		return nil
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	return openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// eventChecker checks a Server-Sent Events stream as it is read: each
// line is a comment, or an id, event, data or retry field; each event
// has a type the contract names (an order event, stream.reset or
// stream.end) and JSON data; an order event has an id.
type eventChecker struct {
	t       testing.TB
	what    string
	body    io.ReadCloser
	partial []byte // the unfinished line
	event   map[string]string
	events  int
}

func (e *eventChecker) Read(p []byte) (int, error) {
	n, err := e.body.Read(p)
	e.partial = append(e.partial, p[:n]...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			break
		}
		e.line(string(e.partial[:i]))
		e.partial = e.partial[i+1:]
	}
	return n, err
}

func (e *eventChecker) Close() error { return e.body.Close() }

func (e *eventChecker) line(l string) {
	if e.event == nil {
		e.event = map[string]string{}
	}
	switch field, value, _ := strings.Cut(l, ":"); {
	case l == "":
		e.dispatch()
	case field == "":
		// A comment (a heartbeat).
	case field == "id" || field == "event" || field == "data" || field == "retry":
		if _, dup := e.event[field]; dup {
			e.t.Errorf("contract: %s: event %d has two %s fields", e.what, e.events+1, field)
		}
		e.event[field] = strings.TrimPrefix(value, " ")
	default:
		e.t.Errorf("contract: %s: line %q is no Server-Sent Events field", e.what, l)
	}
}

func (e *eventChecker) dispatch() {
	ev := e.event
	e.event = nil
	if _, ok := ev["event"]; !ok {
		if _, ok := ev["data"]; ok {
			e.t.Errorf("contract: %s: data without an event type: %v", e.what, ev)
		}
		return // the retry line, or nothing
	}
	e.events++
	typ := ev["event"]
	switch {
	case strings.HasPrefix(typ, "order."):
		if ev["id"] == "" {
			e.t.Errorf("contract: %s: %s event without an id", e.what, typ)
		}
	case typ == "stream.reset" || typ == "stream.end":
	default:
		e.t.Errorf("contract: %s: event type %q is not in the contract", e.what, typ)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(ev["data"]), &data); err != nil {
		e.t.Errorf("contract: %s: %s data is not a JSON object: %v", e.what, typ, err)
	}
}
