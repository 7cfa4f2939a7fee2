package printing

import (
	"crypto"
	"crypto/md5" //nolint:gosec // G501: the provider's documented signature, recomputed independently
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // G505: likewise
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTicketIDRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ref := range []TicketRef{
		{OrderID: 1, PrinterID: 1, Seq: 1, Attempt: 1},
		{OrderID: 123064440810635264, PrinterID: 98765, Seq: 3, Attempt: 2},
		{OrderID: 1<<63 - 1, PrinterID: 36*36*36*36*36*36*36*36 - 1, Seq: 99, Attempt: 99},
	} {
		id := TicketID(ref.OrderID, ref.PrinterID, ref.Seq, ref.Attempt)
		for _, c := range id {
			if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
				t.Errorf("%s: %q is not a letter or digit (Yilianyun's origin_id)", id, c)
			}
		}
		if len(id) > 32 {
			t.Errorf("%s: %d characters, origin_id takes 32", id, len(id))
		}
		got, ok := ParseTicketID(id)
		if !ok || got != ref {
			t.Errorf("ParseTicketID(%s) = %+v, %v; want %+v", id, got, ok, ref)
		}
	}
	for _, bad := range []string{"", "abc", "1p2s3a4", strings.Repeat("0", 24), strings.Repeat("0", 24) + "!", strings.Repeat("Z", 25), strings.Repeat("0", 26)} {
		if _, ok := ParseTicketID(bad); ok {
			t.Errorf("ParseTicketID(%q) accepted", bad)
		}
	}
}

func TestYuan(t *testing.T) {
	t.Parallel()
	for fen, want := range map[int64]string{0: "¥0.00", 5: "¥0.05", 2500: "¥25.00", 123456: "¥1234.56", -300: "-¥3.00"} {
		if got := Yuan(fen); got != want {
			t.Errorf("Yuan(%d) = %q, want %q", fen, got, want)
		}
	}
}

// The signatures as the providers' documentation lays them out,
// recomputed here from the raw strings.
func TestSignatureLayouts(t *testing.T) {
	t.Parallel()
	md := md5.Sum([]byte("1000000001" + "1700000000" + "secret")) //nolint:gosec // G401
	if got := YilianyunSign("1000000001", "1700000000", "secret"); got != hex.EncodeToString(md[:]) {
		t.Errorf("YilianyunSign = %s", got)
	}
	sh := sha1.Sum([]byte("user@example.com" + "UKEY" + "1700000000")) //nolint:gosec // G401
	if got := FeieSig("user@example.com", "UKEY", "1700000000"); got != hex.EncodeToString(sh[:]) {
		t.Errorf("FeieSig = %s", got)
	}
	if got := FeieCallbackMessage("816501678_20160919184316_1419533539", "1", "1700000000"); got != "orderId=816501678_20160919184316_1419533539&status=1&stime=1700000000" {
		t.Errorf("FeieCallbackMessage = %s", got)
	}
}

func formRequest(v url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/cb", strings.NewReader(v.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// A callback is read only when its signature checks; a tampered field,
// another key or a stale push time is ErrBadCallback.
func TestCallbackVerification(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	feie := &Feie{PlatformKey: &key.PublicKey, Now: func() time.Time { return now }}
	sign := func(k *rsa.PrivateKey, orderID, status, stime string) string {
		d := sha256.Sum256([]byte(FeieCallbackMessage(orderID, status, stime)))
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(sig)
	}
	stime := strconv.FormatInt(now.Unix(), 10)
	ref := "SN1_20261206_7"
	good := url.Values{"orderId": {ref}, "status": {"1"}, "stime": {stime}, "sign": {sign(key, ref, "1", stime)}}
	cb, err := feie.Callback(formRequest(good))
	if err != nil || cb.Ref != ref || cb.Device != "SN1" || !cb.Printed {
		t.Fatalf("feie callback = %+v, %v", cb, err)
	}
	tampered := url.Values{"orderId": {"SN1_20261206_8"}, "status": {"1"}, "stime": {stime}, "sign": good["sign"]}
	foreign := url.Values{"orderId": {ref}, "status": {"1"}, "stime": {stime}, "sign": {sign(other, ref, "1", stime)}}
	for name, v := range map[string]url.Values{"tampered": tampered, "another key": foreign, "unsigned": {"orderId": {ref}}} {
		if _, err := feie.Callback(formRequest(v)); !errors.Is(err, ErrBadCallback) {
			t.Errorf("feie %s: %v", name, err)
		}
	}

	yly := &Yilianyun{ClientID: "1000000001", ClientSecret: "s", Now: func() time.Time { return now }}
	push := func(at time.Time, secret string) url.Values {
		p := strconv.FormatInt(at.Unix(), 10)
		return url.Values{"machine_code": {"M1"}, "order_id": {"O1"}, "origin_id": {"abc"}, "state": {"1"}, "push_time": {p},
			"sign": {YilianyunSign("1000000001", p, secret)}}
	}
	if cb, err := yly.Callback(formRequest(push(now, "s"))); err != nil || cb.Ref != "O1" || cb.TicketID != "abc" || !cb.Printed {
		t.Fatalf("yilianyun callback = %+v, %v", cb, err)
	}
	for name, v := range map[string]url.Values{"wrong secret": push(now, "x"), "stale": push(now.Add(-time.Hour), "s")} {
		if _, err := yly.Callback(formRequest(v)); !errors.Is(err, ErrBadCallback) {
			t.Errorf("yilianyun %s: %v", name, err)
		}
	}
}

// What a provider's failure says about the paper: a refusal, an
// unavailable gateway or a connection never made printed nothing; a
// timeout or a 500 may have.
func TestNotPrinted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.Split(r.URL.Path, "/")[1] {
		case "503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
		case "refused":
			_, _ = w.Write([]byte(`{"ret":1002,"msg":"no such printer"}`))
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		base    string
		printed bool // the paper may have come out
	}{
		{srv.URL + "/503", false}, {srv.URL + "/refused", false}, {closedURL, false}, {srv.URL + "/500", true},
	} {
		f := &Feie{Base: tc.base, HTTP: srv.Client(), Now: time.Now}
		_, err := f.Print(t.Context(), "SN1", "id", "content")
		if err == nil {
			t.Fatalf("%s: no error", tc.base)
		}
		if got := !notPrinted(err); got != tc.printed {
			t.Errorf("%s: %v: may have printed %v, want %v", tc.base, err, got, tc.printed)
		}
	}
}
