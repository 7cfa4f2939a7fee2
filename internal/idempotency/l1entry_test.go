package idempotency

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// plain is r with its header fields in Headers, however r holds them, to
// compare responses by what they say.
func plain(r Response) Response {
	return Response{Status: r.Status, Headers: maps.Collect(r.HeaderFields()), Body: r.Body}
}

func plainRecord(r Record) Record {
	r.Response = plain(r.Response)
	return r
}

// pack is rec packed into an entry of its own, as l1Cache.set packs it
// into a ring.
func pack(rec Record) l1Entry {
	buf, fpEnd, reqEnd, hdrEnd := appendPacked(make([]byte, 0, packedLen(rec)), rec)
	return l1Entry{buf: buf, orderID: rec.OrderID, status: int32(rec.Response.Status), fpEnd: fpEnd, reqEnd: reqEnd, hdrEnd: hdrEnd} //nolint:gosec // G115: test statuses fit
}

func TestL1EntryKeepsTheRecord(t *testing.T) {
	t.Parallel()
	cases := map[string]Record{
		"empty": {},
		"a submit's answer": {
			Fingerprint: []byte("0123456789abcdef0123456789abcdef"), OrderID: 1234567890123,
			Request:  "v1.eyJtIjoxfQ.c2ln",
			Response: Response{Status: 201, Body: []byte(`{"id":"1234567890123"}`), Headers: map[string]string{"Content-Type": "application/json", "Location": "/v1/orders/1234567890123"}},
		},
		"no headers, no request": {Fingerprint: []byte{0, 1, 2}, Response: Response{Status: 422, Body: []byte(`{"type":"x"}`)}},
		"empty header value":     {Response: Response{Status: 200, Headers: map[string]string{"X-Empty": "", "": "no name"}}},
		"binary body":            {Response: Response{Status: 200, Body: []byte{0, 0xff, 0, 0xfe}}},
		"longest header":         {Response: Response{Status: 200, Headers: map[string]string{"X-Long": strings.Repeat("v", 65535)}}},
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pack(rec)
			if diff := cmp.Diff(rec, plainRecord(e.record()), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Response{})); diff != "" {
				t.Errorf("record after packing (-want +got):\n%s", diff)
			}
			if got := e.request(); got != rec.Request {
				t.Errorf("request() = %q, want %q", got, rec.Request)
			}
			got := e.response()
			for k, v := range rec.Response.Headers {
				if g := got.Header(k); g != v {
					t.Errorf("Header(%q) = %q, want %q", k, g, v)
				}
			}
			if g := got.Header("X-Absent"); g != "" {
				t.Errorf(`Header("X-Absent") = %q, want ""`, g)
			}
			// Stored in Redis and PostgreSQL, it reads back the same.
			want, err := json.Marshal(rec.Response)
			if err != nil {
				t.Fatal(err)
			}
			var back Response
			if err := json.Unmarshal(mustJSON(t, got), &back); err != nil {
				t.Fatal(err)
			}
			var wantBack Response
			if err := json.Unmarshal(want, &wantBack); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantBack, back, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Response{})); diff != "" {
				t.Errorf("JSON of the replayed response (-want +got):\n%s", diff)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A packed entry is a copy: changing the record it came from afterwards
// changes nothing in L1.
func TestL1EntryIsACopy(t *testing.T) {
	t.Parallel()
	body, fp := []byte(`{"id":"1"}`), []byte("fingerprint")
	headers := map[string]string{"Location": "/v1/orders/1"}
	e := pack(Record{Fingerprint: fp, Response: Response{Status: 201, Body: body, Headers: headers}})
	body[0], fp[0], headers["Location"] = 'X', 'X', "/elsewhere"
	if got := string(e.response().Body); got != `{"id":"1"}` {
		t.Errorf("body = %s, want the body as it was packed", got)
	}
	if got := string(e.fingerprint()); got != "fingerprint" {
		t.Errorf("fingerprint = %s, want the fingerprint as it was packed", got)
	}
	if got := e.response().Header("Location"); got != "/v1/orders/1" {
		t.Errorf("Location = %s, want the header as it was packed", got)
	}
}

// A record read back from L1 packs again to the same record: L1 stores a
// record it read from itself (the request kept after a fingerprint
// matched).
func TestL1EntryRepacks(t *testing.T) {
	t.Parallel()
	rec := Record{Fingerprint: []byte("fp"), Request: "req", Response: Response{Status: 201, Body: []byte("b"), Headers: map[string]string{"A": "1", "B": "2"}}}
	again := pack(pack(rec).record())
	if diff := cmp.Diff(rec, plainRecord(again.record()), cmpopts.IgnoreUnexported(Response{})); diff != "" {
		t.Errorf("record packed twice (-want +got):\n%s", diff)
	}
}

func TestL1EntryRoundTripsAnyRecord(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rec := Record{
			Fingerprint: rapid.SliceOf(rapid.Byte()).Draw(rt, "fingerprint"),
			Request:     rapid.String().Draw(rt, "request"),
			OrderID:     rapid.Int64().Draw(rt, "order"),
			Response: Response{
				Status:  rapid.IntRange(100, 599).Draw(rt, "status"),
				Headers: rapid.MapOf(rapid.String(), rapid.String()).Draw(rt, "headers"),
				Body:    rapid.SliceOf(rapid.Byte()).Draw(rt, "body"),
			},
		}
		if diff := cmp.Diff(rec, plainRecord(pack(rec).record()), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Response{})); diff != "" {
			rt.Fatalf("record after packing (-want +got):\n%s", diff)
		}
	})
}

// Lengths written in two bytes cannot hold 64 KiB: L1 keeps no entry
// larger than a chunk, which leaves such records to Redis and PostgreSQL.
func TestL1RefusesWhatTheLengthsCannotHold(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("v", 65536)
	cases := map[string]struct {
		key string
		rec Record
	}{
		"header value over 64 KiB": {"k", Record{Response: Response{Status: 200, Headers: map[string]string{"X": long}}}},
		"header name over 64 KiB":  {"k", Record{Response: Response{Status: 200, Headers: map[string]string{long: "v"}}}},
		"key over 64 KiB":          {long, Record{Response: Response{Status: 200}}},
		"status over 65535":        {"k", Record{Response: Response{Status: 70000}}},
	}
	c := newL1Cache(64<<20, time.Hour, time.Now)
	for name, tc := range cases {
		if c.set(tc.key, tc.rec) {
			t.Errorf("%s: kept, want refused", name)
		}
	}
	if n, _ := c.size(); n != 0 {
		t.Errorf("%d entries held, want none", n)
	}
}
