package orderstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
		defer h.unsubscribe(sub)
		// The start is read after subscribing: whatever the hub delivers
		// from now on is at or after it, so nothing falls in between.
		pos, reset, err := h.start(r.Context(), merchantID, r.Header.Get("Last-Event-ID"))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		s := &stream{h: h, sub: sub, rc: http.NewResponseController(w), w: w, pos: pos}
		// The stream lasts only while its token is valid: its revocation
		// (here or on any instance, the account disabled, a logout) or its
		// expiry ends it, as either would refuse an ordinary request.
		if h.opts.Revocations != nil {
			revoked, stop := h.opts.Revocations.Watch(st.TokenID)
			defer stop()
			s.revoked = revoked
		}
		if !st.ExpiresAt.IsZero() {
			expired := make(chan struct{})
			expiry := time.AfterFunc(time.Until(st.ExpiresAt), func() { close(expired) })
			defer expiry.Stop()
			s.expired = expired
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
		w.WriteHeader(http.StatusOK)
		if err := s.serve(r.Context(), reset); err != nil && r.Context().Err() == nil {
			web.Logger(r.Context()).Debug("order stream ended", "err", err)
		}
	})
}

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
	rc  *http.ResponseController
	// w is written straight: the server buffers a response already (2 KB,
	// then its connection's 4 KB), and a buffer of our own would be held
	// by every idle stream. dirty says something was written since the
	// last flush.
	w     http.ResponseWriter
	dirty bool
	pos   Position
	// revoked and expired end the stream: its token was revoked, or
	// expired (nil: never).
	revoked <-chan struct{}
	expired <-chan struct{}
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
	if err := s.rc.SetWriteDeadline(now.Add(s.h.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) && s.err == nil {
		s.err = err
	}
}

func (s *stream) serve(ctx context.Context, reset bool) error {
	s.arm()
	s.printf("retry: 2000\n\n")
	if reset {
		s.printf("event: %s\ndata: {\"reason\":\"Last-Event-ID is unknown or too old: reload the orders\"}\n\n", ResetEvent)
	}
	if err := s.catchUp(ctx); err != nil {
		return err
	}
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
	if _, err := fmt.Fprintf(s.w, format, a...); err != nil && s.err == nil {
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
	return s.rc.Flush()
}
