package orderstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// ResetEvent is sent first when the Last-Event-ID a client resumes from is
// unknown (older than the outbox keeps, or of another merchant): the
// client cannot be told what it missed and should reload its orders.
const ResetEvent = "stream.reset"

// HandleStream serves GET /admin/v1/merchants/{id}/orders/stream: the
// merchant's order events as Server-Sent Events, each with its webhook
// event id, resuming after Last-Event-ID. Merchant staff of that merchant
// or an admin.
func HandleStream(h *Hub) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := auth.StaffFrom(r.Context())
		merchantID, err := web.PathID(r, problem.New(problem.NotFound, "no merchant %q", r.PathValue("id")))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if !st.CanManage(merchantID) {
			web.Error(w, r, auth.ErrOtherMerchant)
			return
		}
		sub, err := h.subscribe(r.Context(), merchantID, st.TokenID)
		if err != nil {
			var p *problem.Error
			if errors.As(err, &p) && p.Extra["retry_after"] != nil {
				w.Header().Set("Retry-After", fmt.Sprint(p.Extra["retry_after"]))
			}
			web.Error(w, r, err)
			return
		}
		// The start is read after subscribing: whatever the hub delivers
		// from now on is at or after it, so nothing falls in between.
		pos, reset, err := h.start(r.Context(), merchantID, r.Header.Get("Last-Event-ID"))
		if err != nil {
			h.unsubscribe(sub)
			web.Error(w, r, err)
			return
		}
		s := &stream{h: h, sub: sub, pos: pos}
		// The stream lasts only while its token is valid: its revocation
		// (here or on any instance, the account disabled, a logout) or its
		// expiry ends it, as either would refuse an ordinary request.
		if h.opts.Revocations != nil {
			s.revoked, s.unwatch = h.opts.Revocations.Watch(st.TokenID)
		}
		if !st.ExpiresAt.IsZero() {
			expired := make(chan struct{})
			s.expiry = time.AfterFunc(time.Until(st.ExpiresAt), func() { close(expired) })
			s.expired = expired
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
		logger := web.Logger(r.Context())
		if conn, ok := hijack(w, r); ok {
			if conn == nil { // taken over, and the client already gone
				s.close()
				return
			}
			s.out = &connSink{conn: conn}
			// Caught up here, on the request's goroutine; then the stream
			// lives on a goroutine of its own with nothing of the request
			// (its buffers, headers and context) held: an idle board is a
			// connection, its inbox and two small goroutines.
			if err := s.begin(r.Context(), reset); err != nil {
				s.close()
				_ = conn.Close()
				logger.Debug("order stream ended", "err", err)
				return
			}
			go s.runDetached(conn, logger) //nolint:gosec // G118: the request's context ends with its handler, and the stream outlives it
			return
		}
		defer s.close()
		w.WriteHeader(http.StatusOK)
		s.out = &responseSink{w: w, rc: http.NewResponseController(w)}
		err = s.begin(r.Context(), reset)
		if err == nil {
			err = s.loop(r.Context())
		}
		if err != nil && r.Context().Err() == nil {
			logger.Debug("order stream ended", "err", err)
		}
	})
}

// hijack takes an HTTP/1.1 connection over from the server and sends the
// stream's head on it (the headers set on w, and a body that lasts until
// the connection closes); a nil connection when the client went
// meanwhile. false: it is not one (HTTP/2, or a writer that cannot be
// taken over), and the stream is served through w.
func hijack(w http.ResponseWriter, r *http.Request) (net.Conn, bool) {
	if r.ProtoMajor != 1 || !r.ProtoAtLeast(1, 1) {
		return nil, false
	}
	header := w.Header().Clone() // w may not be used once hijacked
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	header.Del("Content-Length")
	header.Set("Connection", "close")
	header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	_ = header.Write(&head)
	head.WriteString("\r\n")
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(head.Bytes()); err != nil {
		_ = conn.Close()
		return nil, true
	}
	return conn, true
}

// runDetached serves a taken-over stream until it ends. A stream's client
// sends nothing after its request, so a read returns only when the client
// goes (or the connection is closed here), which ends the stream at once.
func (s *stream) runDetached(conn net.Conn, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer s.close()
	defer conn.Close()
	go func() {
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	if err := s.loop(ctx); err != nil && ctx.Err() == nil {
		logger.Debug("order stream ended", "err", err)
	}
}

// close gives up what the stream held: its place in the hub, its
// revocation watch and its expiry timer.
func (s *stream) close() {
	if s.unwatch != nil {
		s.unwatch()
	}
	if s.expiry != nil {
		s.expiry.Stop()
	}
	s.h.unsubscribe(s.sub)
}

// sink is where a stream writes: the response (through the server's
// buffers) or a connection taken over.
type sink interface {
	io.Writer
	Flush() error
	SetWriteDeadline(t time.Time) error
}

// responseSink writes through the server's response.
type responseSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (r *responseSink) Write(p []byte) (int, error)        { return r.w.Write(p) }
func (r *responseSink) Flush() error                       { return r.rc.Flush() }
func (r *responseSink) SetWriteDeadline(t time.Time) error { return r.rc.SetWriteDeadline(t) }

// connSink writes to a connection taken over, gathering a flush's writes
// in a buffer borrowed for it: an idle stream holds none.
type connSink struct {
	conn net.Conn
	buf  *bytes.Buffer
}

var sinkBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (c *connSink) Write(p []byte) (int, error) {
	if c.buf == nil {
		c.buf = sinkBuffers.Get().(*bytes.Buffer) //nolint:forcetypeassert // the pool holds only these
	}
	return c.buf.Write(p)
}

func (c *connSink) Flush() error {
	if c.buf == nil {
		return nil
	}
	_, err := c.conn.Write(c.buf.Bytes())
	c.buf.Reset()
	sinkBuffers.Put(c.buf)
	c.buf = nil
	return err
}

func (c *connSink) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// start is where a stream begins: after the event named lastID, or (none
// given, or unknown) at the latest event, reset telling which.
func (h *Hub) start(ctx context.Context, merchantID int64, lastID string) (Position, bool, error) {
	if lastID != "" {
		p, err := h.q.OrderEventPosition(ctx, h.opts.Pool, dbsqlc.OrderEventPositionParams{EventID: lastID, MerchantID: merchantID})
		if err == nil {
			return Position{Xid: p.Xid, Seq: p.Seq}, false, nil
		}
		if !errors.Is(err, db.ErrNotFound) {
			return Position{}, false, fmt.Errorf("find Last-Event-ID: %w", err)
		}
	}
	last, err := h.q.OrderEventsLatest(ctx, h.opts.Pool)
	if err != nil {
		return Position{}, false, fmt.Errorf("latest order event: %w", err)
	}
	return Position{Xid: last.Xid, Seq: last.Seq}, lastID != "", nil
}

// stream is one connected client.
type stream struct {
	h   *Hub
	sub *subscriber
	// out is written straight: it buffers what one flush sends, and an
	// idle stream holds no buffer of its own. dirty says something was
	// written since the last flush.
	out   sink
	dirty bool
	pos   Position
	// revoked and expired end the stream: its token was revoked, or
	// expired (nil: never); unwatch and expiry are given up at its end.
	revoked <-chan struct{}
	expired <-chan struct{}
	unwatch func()
	expiry  *time.Timer
	// armed is when the write deadline was last set; err is the first
	// failure to set it.
	armed time.Time
	err   error
}

// arm moves the write deadline ahead before anything is written: a
// stream outlives the server's write timeout, while a client that stops
// reading must not hold its goroutine and buffers for ever.
func (s *stream) arm() {
	now := time.Now()
	if now.Sub(s.armed) < time.Second {
		return
	}
	s.armed = now
	if err := s.out.SetWriteDeadline(now.Add(s.h.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) && s.err == nil {
		s.err = err
	}
}

// begin sends the stream's first lines and what it missed.
func (s *stream) begin(ctx context.Context, reset bool) error {
	s.arm()
	s.printf("retry: 2000\n\n")
	if reset {
		s.printf("event: %s\ndata: {\"reason\":\"Last-Event-ID is unknown or too old: reload the orders\"}\n\n", ResetEvent)
	}
	return s.catchUp(ctx)
}

// loop sends events as they come, and heartbeats while none do, until
// the stream ends.
func (s *stream) loop(ctx context.Context) error {
	heartbeat := time.NewTicker(s.h.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		// A revocation or expiry that is due wins over events waiting.
		if err := s.ended(); err != nil {
			return err
		}
		if s.sub.behind.Swap(false) {
			s.h.lagged.Inc()
			if err := s.catchUp(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.h.done:
			return nil
		case <-s.revoked:
			continue
		case <-s.expired:
			continue
		case ev := <-s.sub.events:
			s.write(*ev)
			// Take whatever else is waiting into the same flush.
			for more := true; more && !s.sub.behind.Load(); {
				select {
				case ev := <-s.sub.events:
					s.write(*ev)
				default:
					more = false
				}
			}
		case <-heartbeat.C:
			s.arm()
			s.printf(": heartbeat\n\n")
		}
		if err := s.flush(); err != nil {
			return err
		}
	}
}

// EndEvent is the last event of a stream whose token stopped being valid:
// reconnecting with it is refused (401), and the board logs in again.
const EndEvent = "stream.end"

// ended ends the stream when its token was revoked or expired: it sends
// EndEvent and returns errTokenEnded. Otherwise it returns nil.
func (s *stream) ended() error {
	select {
	case <-s.revoked:
		return s.end("the token was revoked: log in again")
	case <-s.expired:
		return s.end("the token expired: log in again")
	default:
		return nil
	}
}

// end sends EndEvent with reason and ends the stream.
func (s *stream) end(reason string) error {
	s.arm()
	s.printf("event: %s\ndata: {\"reason\":%q}\n\n", EndEvent, reason)
	if err := s.flush(); err != nil {
		return err
	}
	return errTokenEnded
}

var errTokenEnded = errors.New("the stream's token is no longer valid")

// catchUp sends the merchant's events after the stream's position from
// the outbox.
func (s *stream) catchUp(ctx context.Context) error {
	for {
		rows, err := s.h.q.OrderEventsOfMerchantAfter(ctx, s.h.opts.Pool, dbsqlc.OrderEventsOfMerchantAfterParams{
			MerchantID: s.sub.merchantID, Xid: s.pos.Xid, Seq: s.pos.Seq, MaxRows: pageRows,
		})
		if err != nil {
			return fmt.Errorf("replay order events: %w", err)
		}
		for _, r := range rows {
			s.write(Event{Pos: Position{Xid: r.Xid, Seq: r.Seq}, MerchantID: r.MerchantID, ID: r.EventID, Type: r.Type, Data: r.Body})
		}
		if err := s.flush(); err != nil {
			return err
		}
		if len(rows) < pageRows {
			return nil
		}
	}
}

// write buffers an event unless the stream already sent it.
func (s *stream) write(ev Event) {
	if !ev.Pos.After(s.pos) {
		return
	}
	s.arm()
	s.printf("id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, ev.Data)
	s.pos = ev.Pos
	s.h.delivered.Inc()
}

// printf writes to the client; a failure is kept for flush to return.
func (s *stream) printf(format string, a ...any) {
	if _, err := fmt.Fprintf(s.out, format, a...); err != nil && s.err == nil {
		s.err = err
	}
	s.dirty = true
}

func (s *stream) flush() error {
	if s.err != nil {
		return s.err
	}
	if !s.dirty {
		return nil
	}
	s.dirty = false
	return s.out.Flush()
}
