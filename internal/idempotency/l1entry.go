package idempotency

import (
	"encoding/binary"
	"unsafe"
)

// l1Entry is a Record packed into one byte slice, as L1 keeps it in its
// rings (see l1Cache): no part of it is a pointer of its own, and a
// replay reads its header fields where they lie (see
// Response.HeaderFields) rather than from a map.
//
// buf holds, in order: the fingerprint, the request, the header fields
// (each name and value preceded by its length, two bytes), then the body.
// The strings and slices its methods return share buf's memory. An entry
// l1Cache.view passes lies in a ring that a later write reuses: what is
// kept from it is copied first (clone, cloneResponse). Nothing writes
// the buf of an entry that is not in a ring.
type l1Entry struct {
	buf     []byte
	orderID int64
	status  int32
	fpEnd   uint32 // buf[:fpEnd] is the fingerprint
	reqEnd  uint32 // buf[fpEnd:reqEnd] is the request
	hdrEnd  uint32 // buf[reqEnd:hdrEnd] are the headers; the body follows
}

// packedLen is the length of rec packed as an l1Entry's buf.
func packedLen(rec Record) int {
	n := len(rec.Fingerprint) + len(rec.Request) + len(rec.Response.Body)
	for k, v := range rec.Response.HeaderFields() {
		n += 4 + len(k) + len(v)
	}
	return n
}

// appendPacked appends rec packed as an l1Entry's buf to dst, and returns
// the offsets that end its parts, counted from where it began. The
// lengths it writes take two bytes: every header name and value must be
// shorter than 64 KiB, as they are in any entry that fits a chunk (see
// l1Cache.set).
func appendPacked(dst []byte, rec Record) (out []byte, fpEnd, reqEnd, hdrEnd uint32) {
	start := len(dst)
	end := func() uint32 { return uint32(len(dst) - start) } //nolint:gosec // G115: bounded by the chunk (see above)
	dst = append(dst, rec.Fingerprint...)
	fpEnd = end()
	dst = append(dst, rec.Request...)
	reqEnd = end()
	for k, v := range rec.Response.HeaderFields() {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k))) //nolint:gosec // G115: bounded by the chunk (see above)
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(v))) //nolint:gosec // G115: bounded by the chunk (see above)
		dst = append(dst, v...)
	}
	hdrEnd = end()
	return append(dst, rec.Response.Body...), fpEnd, reqEnd, hdrEnd
}

// fingerprint is the packed record's fingerprint, sharing its memory.
func (e l1Entry) fingerprint() []byte { return e.buf[:e.fpEnd:e.fpEnd] }

// request is the packed record's request, sharing its memory.
func (e l1Entry) request() string { return e.str(e.fpEnd, e.reqEnd) }

// response is the packed record's response, sharing the entry's memory.
func (e l1Entry) response() Response {
	return Response{Status: int(e.status), Body: e.buf[e.hdrEnd:len(e.buf):len(e.buf)], packed: e.str(e.reqEnd, e.hdrEnd)}
}

// cloneResponse is the packed record's response in memory of its own:
// one allocation for its header fields and body.
func (e l1Entry) cloneResponse() Response {
	c := l1Entry{buf: append([]byte(nil), e.buf[e.reqEnd:]...), status: e.status, reqEnd: 0, hdrEnd: e.hdrEnd - e.reqEnd}
	return c.response()
}

// clone is the entry in memory of its own.
func (e l1Entry) clone() l1Entry {
	e.buf = append([]byte(nil), e.buf...)
	return e
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

// str is buf[from:to] as a string without a copy: it changes only if
// buf lies in a ring and is written over (see l1Entry).
func (e l1Entry) str(from, to uint32) string {
	if from == to {
		return ""
	}
	return unsafe.String(&e.buf[from], int(to-from)) //nolint:gosec // G103: see l1Entry for when buf may change
}
