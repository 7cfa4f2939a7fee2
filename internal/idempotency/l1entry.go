package idempotency

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// l1Entry is a Record as L1 keeps it: every variable-length part packed
// into one byte slice. A record of its own is about eight heap objects
// (the fingerprint, the header map and its strings, the body, the
// request); a full L1 holds tens of thousands of entries, and every
// garbage collection visits every object of each. Packed, an entry is
// the slice, which holds no pointers and is marked without being
// scanned; a replay reads its header fields where they lie (see
// Response.HeaderFields) rather than from a map of its own.
//
// buf holds, in order: the fingerprint, the request, the header fields
// (each name and value preceded by its length, two bytes), then the body.
// Nothing writes buf after packL1 fills it: the records read back share
// its memory, and their readers must not write it either.
type l1Entry struct {
	buf     []byte
	orderID int64
	status  int32
	fpEnd   uint32 // buf[:fpEnd] is the fingerprint
	reqEnd  uint32 // buf[fpEnd:reqEnd] is the request
	hdrEnd  uint32 // buf[reqEnd:hdrEnd] are the headers; the body follows
}

// l1Packable reports whether packL1 keeps rec whole: each header's name
// and value fit their two-byte lengths, and the entry its four-byte
// offsets. Anything larger is not cached (it is still answered
// from Redis or PostgreSQL).
func l1Packable(rec Record) bool {
	n := len(rec.Fingerprint) + len(rec.Request) + len(rec.Response.Body)
	for k, v := range rec.Response.HeaderFields() {
		if len(k) > math.MaxUint16 || len(v) > math.MaxUint16 {
			return false
		}
		n += 4 + len(k) + len(v)
	}
	return n <= math.MaxUint32
}

// packL1 copies rec into one l1Entry. rec must be l1Packable.
func packL1(rec Record) l1Entry {
	n := len(rec.Fingerprint) + len(rec.Request) + len(rec.Response.Body)
	for k, v := range rec.Response.HeaderFields() {
		n += 4 + len(k) + len(v)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, rec.Fingerprint...)
	fpEnd := len(buf)
	buf = append(buf, rec.Request...)
	reqEnd := len(buf)
	for k, v := range rec.Response.HeaderFields() {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(k))) //nolint:gosec // G115: l1Packable bounds it
		buf = append(buf, k...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(v))) //nolint:gosec // G115: l1Packable bounds it
		buf = append(buf, v...)
	}
	hdrEnd := len(buf)
	buf = append(buf, rec.Response.Body...)
	return l1Entry{
		buf: buf, orderID: rec.OrderID, status: int32(rec.Response.Status), //nolint:gosec // G115: an HTTP status fits
		fpEnd: uint32(fpEnd), reqEnd: uint32(reqEnd), hdrEnd: uint32(hdrEnd), //nolint:gosec // G115: l1Packable bounds it
	}
}

// fingerprint is the packed record's fingerprint, sharing its memory.
func (e l1Entry) fingerprint() []byte { return e.buf[:e.fpEnd:e.fpEnd] }

// request is the packed record's request, sharing its memory.
func (e l1Entry) request() string { return e.str(e.fpEnd, e.reqEnd) }

// response is the packed record's response, sharing the entry's memory:
// a replay allocates nothing.
func (e l1Entry) response() Response {
	return Response{Status: int(e.status), Body: e.buf[e.hdrEnd:len(e.buf):len(e.buf)], packed: e.str(e.reqEnd, e.hdrEnd)}
}

// record is the whole packed record.
func (e l1Entry) record() Record {
	return Record{Fingerprint: e.fingerprint(), Response: e.response(), OrderID: e.orderID, Request: e.request()}
}

// packedField reads the length-prefixed string that packed starts with,
// and returns it and the rest.
func packedField(packed string) (field, rest string) {
	n := int(packed[0])<<8 | int(packed[1])
	return packed[2 : 2+n], packed[2+n:]
}

// str is buf[from:to] as a string without a copy: nothing writes buf
// after packL1, so the string never changes.
func (e l1Entry) str(from, to uint32) string {
	if from == to {
		return ""
	}
	return unsafe.String(&e.buf[from], int(to-from)) //nolint:gosec // G103: buf is never written after packing (see l1Entry)
}

// weight is the memory the entry takes in L1 under key, as L1Bytes
// bounds it: its bytes and the cache's node.
func (e l1Entry) weight(key string) uint32 {
	return uint32(min(len(key)+cap(e.buf)+l1EntryOverhead, math.MaxUint32)) //nolint:gosec // G115: clamped
}
