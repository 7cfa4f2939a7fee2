// Package webhook delivers order events to the merchant webhook as River
// jobs: each event has an id that is stable across retries (order id,
// event, version), so receivers deduplicate; each delivery is signed with
// HMAC-SHA256; failures are retried with exponential backoff until the job
// is discarded (our dead letter), from where an admin may retry it.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/riverqueue/river"
)

// Headers of a delivery.
const (
	HeaderEventID   = "X-Takeout-Event-Id"
	HeaderTimestamp = "X-Takeout-Timestamp"
	// HeaderSignature is "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)).
	HeaderSignature = "X-Takeout-Signature"
)

// Event is the body of a delivery.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"` // order.paid, order.accepted, ...
	OrderID    string          `json:"order_id"`
	MerchantID string          `json:"merchant_id"`
	Status     string          `json:"status"`
	Version    int64           `json:"version"`
	OccurredAt time.Time       `json:"occurred_at"`
	Order      json.RawMessage `json:"order,omitempty"`
	// Delivery is the courier delivery of an order.delivery event.
	Delivery json.RawMessage `json:"delivery,omitempty"`
}

// EventID is the stable id of an order's event at a version.
func EventID(orderID int64, eventType string, version int64) string {
	return strconv.FormatInt(orderID, 10) + ":" + eventType + ":" + strconv.FormatInt(version, 10)
}

// Args is the delivery job.
type Args struct {
	Event Event `json:"event"`
}

// Kind names the job.
func (Args) Kind() string { return "webhook.deliver" }

// Sign returns the signature header value for a body sent at timestamp.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature in constant time (for receivers and
// tests).
func Verify(secret []byte, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}

// Worker delivers events to URL.
type Worker struct {
	river.WorkerDefaults[Args]
	URL       string
	Secret    []byte
	Client    *http.Client
	RetryBase time.Duration
	Now       func() time.Time
}

// Work posts the event; anything but a 2xx answer is an error, so River
// retries it.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	body, err := json.Marshal(job.Args.Event)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	ts := strconv.FormatInt(w.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEventID, job.Args.Event.ID)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(w.Secret, ts, body))
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", job.Args.Event.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("deliver %s: receiver answered HTTP %d", job.Args.Event.ID, resp.StatusCode)
	}
	return nil
}

// NextRetry backs off exponentially from RetryBase, capped at an hour.
func (w *Worker) NextRetry(job *river.Job[Args]) time.Time {
	d := w.RetryBase << min(job.Attempt-1, 20)
	if d <= 0 || d > time.Hour {
		d = time.Hour
	}
	return w.Now().Add(d)
}

// Timeout bounds one delivery attempt.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return 10 * time.Second }
