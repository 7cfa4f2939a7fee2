// Package idempotency makes retried requests safe: a request carries an
// Idempotency-Key, and its completed response is kept and replayed byte for
// byte to every retry. Layers, cheapest first: an in-process L1 cache of
// completed responses, a Redis claim (one Lua round trip: claim, wait for
// an in-flight duplicate, or replay), and PostgreSQL records written in the
// same transaction as the business change, which are the truth. Redis may
// be down or flushed at any moment: exactly-once then rests on PostgreSQL
// alone. Store.Do runs the whole protocol; its core knows nothing of HTTP
// (handlers.go adapts it for creating routes and the operators' routes).
package idempotency

import (
	"strings"

	"github.com/takeout/takeout/internal/problem"
)

// DigestAlg names how fingerprints are computed, stored with each record so
// the scheme can evolve.
const DigestAlg = "sm3/v1"

// ParseKey reads an Idempotency-Key header value: a structured-field string
// ("abc") or a bare token (abc), 1 to 255 printable ASCII characters.
func ParseKey(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return "", ErrKeyMissing
	}
	if strings.HasPrefix(v, `"`) {
		if len(v) < 2 || !strings.HasSuffix(v, `"`) {
			return "", problem.New(problem.InvalidRequest, "Idempotency-Key: unterminated string")
		}
		inner := v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch c {
			case '\\':
				if i+1 >= len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
					return "", problem.New(problem.InvalidRequest, `Idempotency-Key: only \" and \\ may be escaped`)
				}
				i++
				b.WriteByte(inner[i])
			case '"':
				return "", problem.New(problem.InvalidRequest, "Idempotency-Key: unescaped quote")
			default:
				b.WriteByte(c)
			}
		}
		v = b.String()
	}
	if len(v) < 1 || len(v) > 255 {
		return "", problem.New(problem.InvalidRequest, "Idempotency-Key: want 1 to 255 characters, got %d", len(v))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", problem.New(problem.InvalidRequest, "Idempotency-Key: character %d is not printable ASCII", i+1)
		}
	}
	return v, nil
}

// Problems of the idempotency layer.
var (
	ErrKeyMissing = problem.New(problem.IdempotencyKeyMissing, "send an Idempotency-Key header (e.g. a UUID) so that a retry cannot place a second order")
	ErrMismatch   = problem.New(problem.IdempotencyKeyMismatch, "this Idempotency-Key was used for a different request; use a new key for a new request")
)

// InProgress is returned while another request with the same key runs and
// did not finish within the coalescing wait.
func InProgress(retryAfterSeconds int) *problem.Error {
	return problem.New(problem.RequestInProgress, "a request with this Idempotency-Key is still being processed; retry in %ds", retryAfterSeconds).
		With("retry_after", retryAfterSeconds)
}
