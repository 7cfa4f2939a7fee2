// Package telemetry traces takeout with OpenTelemetry: one trace per
// request across the HTTP server, PostgreSQL, Redis, River jobs and the
// calls out to WeChat, WeChat Pay and merchant webhooks, each through the
// maintained instrumentation of its library (otelhttp, otelpgx, redisotel,
// otelriver). It is configured by the standard OTEL_* variables; off (the
// default) it installs nothing, so untraced requests pay for nothing.
package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Options configure New.
type Options struct {
	// Exporter is OTEL_TRACES_EXPORTER: "none" (or empty) traces nothing,
	// "otlp" sends to a collector (OTLP over HTTP/protobuf, configured by
	// the exporter's own OTEL_EXPORTER_OTLP_* variables), "console"
	// writes each span as JSON to Console.
	Exporter    string
	ServiceName string
	Console     io.Writer
	// BatchDelay is how long finished spans wait to be exported together.
	BatchDelay time.Duration
	// TrustedNets are the callers whose traceparent a request continues;
	// anyone else's starts a trace of its own, linked to theirs.
	TrustedNets []netip.Prefix
}

// Tracing is the service's tracer provider and how each layer is traced
// with it. Its zero value (and nil) traces nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	trusted  []netip.Prefix
	props    propagation.TextMapPropagator
}

// New sets tracing up as o asks; with no exporter it returns nil, which
// traces nothing.
func New(ctx context.Context, o Options) (*Tracing, error) {
	var proc sdktrace.SpanProcessor
	switch o.Exporter { // config checked it
	case "", "none":
		return nil, nil
	case "otlp":
		e, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
		}
		proc = sdktrace.NewBatchSpanProcessor(e, sdktrace.WithBatchTimeout(o.BatchDelay))
	case "console":
		e, err := stdouttrace.New(stdouttrace.WithWriter(o.Console))
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
		}
		proc = sdktrace.NewBatchSpanProcessor(e, sdktrace.WithBatchTimeout(o.BatchDelay))
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: want otlp, console or none, got %q", o.Exporter)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(o.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return &Tracing{
		provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc), sdktrace.WithResource(res)),
		trusted:  o.TrustedNets,
		props:    propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

// Shutdown flushes the spans still buffered and stops exporting.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Handler traces each request of h, continuing the caller's trace when it
// is trusted, and answers with the request's own traceparent. The span is
// named by its route template once routed (see SetRoute).
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.props.Inject(r.Context(), propagation.HeaderCarrier(w.Header()))
		h.ServeHTTP(w, r)
	})
	return otelhttp.NewHandler(inner, "http",
		otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.props),
		otelhttp.WithPublicEndpointFn(func(r *http.Request) bool { return !t.trusts(r.RemoteAddr) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

func (t *Tracing) trusts(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range t.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// SetRoute names the request's span after its route template, as the
// OpenTelemetry HTTP conventions ask ("POST /v1/orders"); the router
// knows the template only once it has routed.
func SetRoute(ctx context.Context, method, route string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route))
}

// Recording reports whether ctx carries a span that records attributes:
// callers that build an attribute's name check it first.
func Recording(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).IsRecording()
}

// Attr records a string attribute on the current span, when it is traced:
// which layer answered, what an outcome was.
func Attr(ctx context.Context, key, value string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(key, value))
	}
}

// Transport traces the calls of base and propagates traceparent to the
// service called.
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	if t == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.props))
}

// Pool traces every statement, transaction and connection of a pool that
// cfg will build.
func (t *Tracing) Pool(cfg *pgxpool.Config) {
	if t == nil {
		return
	}
	cfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(t.provider), otelpgx.WithSpanNameFunc(statementName))
}

// statementName names a statement's span after its sqlc query
// ("-- name: OrderInsert :one" gives "OrderInsert"), else its first word.
func statementName(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok {
			return name
		}
	}
	if op, _, ok := strings.Cut(s, " "); ok {
		return strings.ToUpper(op)
	}
	return strings.ToUpper(s)
}

// Redis traces every command, pipeline and script of c.
func (t *Tracing) Redis(c redis.UniversalClient) error {
	if t == nil {
		return nil
	}
	if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(t.provider)); err != nil {
		return fmt.Errorf("trace redis: %w", err)
	}
	return nil
}

// JobMiddleware traces job inserts (carrying the trace into the job) and
// runs (linked to the trace that inserted the job); nil when off.
func (t *Tracing) JobMiddleware() []rivertype.Middleware {
	if t == nil {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: t.provider, EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true,
	})}
}

// noMetadata is a job's metadata when the inserting code is not traced.
var noMetadata = []byte("{}")

// JobMetadata is the metadata of a job inserted by hand in ctx's
// transaction (not through River's client, whose middleware does this):
// the traceparent of ctx's span, so that the job's run links to it, or
// "{}" when ctx is not traced.
func JobMetadata(ctx context.Context) []byte {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return noMetadata
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	b, err := json.Marshal(carrier)
	if err != nil {
		return noMetadata
	}
	return b
}

// LogHandler adds the trace and span ids of a record's context to it, so
// that every log line of a traced request names its trace.
func (t *Tracing) LogHandler(h slog.Handler) slog.Handler {
	if t == nil {
		return h
	}
	return traceLogHandler{h}
}

type traceLogHandler struct{ slog.Handler }

func (h traceLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceLogHandler{h.Handler.WithAttrs(as)}
}

func (h traceLogHandler) WithGroup(name string) slog.Handler {
	return traceLogHandler{h.Handler.WithGroup(name)}
}
