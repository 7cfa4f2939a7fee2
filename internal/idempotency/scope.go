package idempotency

import "strconv"

// Scope names who sent an Idempotency-Key: the keys of two scopes never
// meet. A customer's scope is their user id, and their records (submits,
// the hot path) live in idempotency_records; any other caller's (staff,
// e.g. "staff:admin:alice") live in request_records.
type Scope struct {
	userID int64
	name   string
}

// UserScope is the scope of a customer's keys.
func UserScope(userID int64) Scope { return Scope{userID: userID} }

// NamedScope is the scope of another caller's keys, by name.
func NamedScope(name string) Scope { return Scope{name: name} }

// String names the scope: the user id, or the name.
func (s Scope) String() string {
	if s.name != "" {
		return s.name
	}
	return strconv.FormatInt(s.userID, 10)
}

// l1Key is the in-process cache's key of a (scope, key) record. A user's
// is "<id>\x00<key>" (what purges publish); a named scope's name is never
// all digits (it holds a colon), so the two never meet.
func (s Scope) l1Key(key string) string { return s.String() + "\x00" + key }
