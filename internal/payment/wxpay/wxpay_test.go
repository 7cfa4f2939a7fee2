package wxpay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

// platform plays WeChat Pay with a key made at run time: it signs and
// encrypts notifications exactly as the platform does.
type platform struct {
	key    *rsa.PrivateKey
	serial string
	apiKey []byte
}

func newPlatform(t testing.TB) platform {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return platform{key: k, serial: "PUB_KEY_ID_TEST", apiKey: []byte("0123456789abcdef0123456789abcdef")}
}

func (p platform) keyring() wxpay.Keyring {
	return wxpay.NewKeyring(wxpay.PublicKey{Serial: p.serial, Key: &p.key.PublicKey})
}

// notify builds a signed, encrypted TRANSACTION.SUCCESS notification.
func (p platform) notify(t testing.TB, plaintext string, at time.Time) (wxpay.SignedHeaders, []byte) {
	t.Helper()
	ct, err := wxpay.EncryptAEAD(p.apiKey, "0123456789ab", "transaction", []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(wxpay.Notification{ID: "EV-1", CreateTime: at.Format(time.RFC3339), EventType: "TRANSACTION.SUCCESS",
		ResourceType: "encrypt-resource", Resource: wxpay.Resource{OriginalType: "transaction", Algorithm: "AEAD_AES_256_GCM",
			Ciphertext: ct, AssociatedData: "transaction", Nonce: "0123456789ab"}})
	ts := strconv.FormatInt(at.Unix(), 10)
	sig, err := wxpay.SignSHA256WithRSA(p.key, []byte(ts+"\nnonce-1\n"+string(body)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return wxpay.SignedHeaders{Timestamp: ts, Nonce: "nonce-1", Serial: p.serial, Signature: sig}, body
}

func TestNotificationRoundTrip(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	now := time.Unix(1_800_000_000, 0)
	h, body := p.notify(t, `{"out_trade_no":"T1","amount":{"total":100}}`, now)
	if err := p.keyring().VerifyMessage(h, body, now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := wxpay.ParseNotification(body)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := wxpay.DecryptAEAD(p.apiKey, n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext)
	if err != nil || !strings.Contains(string(pt), `"T1"`) {
		t.Fatalf("decrypt: %s, %v", pt, err)
	}
	other := newPlatform(t)
	rotated := wxpay.NewKeyring(wxpay.PublicKey{Serial: "OLD", Key: &other.key.PublicKey}, wxpay.PublicKey{Serial: p.serial, Key: &p.key.PublicKey})
	if err := rotated.VerifyMessage(h, body, now); err != nil {
		t.Errorf("a keyring with two keys (rotation): %v", err)
	}

	cases := map[string]struct {
		h    wxpay.SignedHeaders
		body []byte
		now  time.Time
		want error
	}{
		"stale":          {h, body, now.Add(5 * time.Minute), wxpay.ErrStaleTimestamp},
		"future":         {h, body, now.Add(-5 * time.Minute), wxpay.ErrStaleTimestamp},
		"unknown serial": {wxpay.SignedHeaders{Timestamp: h.Timestamp, Nonce: h.Nonce, Serial: "X", Signature: h.Signature}, body, now, wxpay.ErrUnknownSerial},
		"probe":          {wxpay.SignedHeaders{Timestamp: h.Timestamp, Nonce: h.Nonce, Serial: h.Serial, Signature: "WECHATPAY/SIGNTEST/abc"}, body, now, wxpay.ErrSignTest},
		"other nonce":    {wxpay.SignedHeaders{Timestamp: h.Timestamp, Nonce: "nonce-2", Serial: h.Serial, Signature: h.Signature}, body, now, wxpay.ErrBadSignature},
		"missing header": {wxpay.SignedHeaders{Timestamp: h.Timestamp, Serial: h.Serial, Signature: h.Signature}, body, now, wxpay.ErrMissingHeader},
		"tampered body":  {h, []byte(strings.Replace(string(body), "EV-1", "EV-2", 1)), now, wxpay.ErrBadSignature},
	}
	for name, c := range cases {
		if err := p.keyring().VerifyMessage(c.h, c.body, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := wxpay.DecryptAEAD([]byte("ffffffffffffffffffffffffffffffff"), n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext); err == nil {
		t.Error("decrypted with the wrong APIv3 key")
	}
	tampered := []byte(n.Resource.Ciphertext)
	tampered[3] ^= 1
	if _, err := wxpay.DecryptAEAD(p.apiKey, n.Resource.Nonce, n.Resource.AssociatedData, string(tampered)); err == nil {
		t.Error("decrypted a tampered ciphertext")
	}
}

func TestAuthorizationRoundTrip(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	m := wxpay.Merchant{MchID: "1900000001", Serial: "MERCHANT-SERIAL", Key: p.key}
	auth, err := m.Authorization("GET", "/v3/pay/transactions/out-trade-no/T1?mchid=1900000001", 1_800_000_000, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wxpay.ParseAuthorization(auth)
	if err != nil {
		t.Fatal(err)
	}
	msg := wxpay.RequestMessage("GET", "/v3/pay/transactions/out-trade-no/T1?mchid=1900000001", a.Timestamp, a.Nonce, nil)
	if err := wxpay.VerifySHA256WithRSA(&p.key.PublicKey, msg, a.Signature); err != nil {
		t.Errorf("the platform cannot verify our request: %v", err)
	}
	for _, bad := range []string{"", "Bearer x", wxpay.AuthorizationScheme + ` mchid="1"`, wxpay.AuthorizationScheme + ` mchid=1,nonce_str="n"`} {
		if _, err := wxpay.ParseAuthorization(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestV2(t *testing.T) {
	t.Parallel()
	fields := map[string]string{"appid": "wx1", "mch_id": "10", "out_trade_no": "T1", "total_fee": "100", "empty": ""}
	for _, typ := range []string{wxpay.SignTypeMD5, wxpay.SignTypeHMACSHA256} {
		sig, err := wxpay.V2Sign(fields, "k", typ)
		if err != nil {
			t.Fatal(err)
		}
		signed := map[string]string{"sign": strings.ToLower(sig)}
		for k, v := range fields {
			signed[k] = v
		}
		if err := wxpay.V2Verify(signed, "k", typ); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if err := wxpay.V2Verify(signed, "other", typ); err == nil {
			t.Errorf("%s verified with another key", typ)
		}
	}
	if _, err := wxpay.V2Sign(fields, "k", "SHA1"); err == nil {
		t.Error("accepted an unknown sign type")
	}
	for name, x := range map[string]string{
		"not xml":      "hello",
		"other root":   "<foo><a>1</a></foo>",
		"nested":       "<xml><a><b>1</b></a></xml>",
		"repeated":     "<xml><a>1</a><a>2</a></xml>",
		"trailing":     "<xml><a>1</a></xml><xml/>",
		"doctype":      `<!DOCTYPE xml [<!ENTITY e "x">]><xml><a>&e;</a></xml>`,
		"unterminated": "<xml><a>1</a>",
	} {
		if _, err := wxpay.ParseV2XML(strings.NewReader(x)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	f, err := wxpay.ParseV2XML(strings.NewReader(`<xml><a><![CDATA[x&y]]></a><b>2</b></xml>`))
	if err != nil || f["a"] != "x&y" || f["b"] != "2" {
		t.Errorf("parsed %v, %v", f, err)
	}
}

func FuzzVerifyNotification(f *testing.F) {
	p := newPlatform(f)
	now := time.Unix(1_800_000_000, 0)
	h, body := p.notify(f, `{"out_trade_no":"T1"}`, now)
	f.Add(h.Timestamp, h.Nonce, h.Serial, h.Signature, body)
	f.Add("1", "", "", "", []byte("{}"))
	ring := p.keyring()
	f.Fuzz(func(t *testing.T, ts, nonce, serial, sig string, body []byte) {
		err := ring.VerifyMessage(wxpay.SignedHeaders{Timestamp: ts, Nonce: nonce, Serial: serial, Signature: sig}, body, now)
		if err == nil {
			// Only what the platform signed verifies.
			if want, _ := wxpay.SignSHA256WithRSA(p.key, []byte(ts+"\n"+nonce+"\n"+string(body)+"\n")); want != sig {
				t.Fatal("verified a signature the platform did not make")
			}
		}
		if n, err := wxpay.ParseNotification(body); err == nil {
			_, _ = wxpay.DecryptAEAD(p.apiKey, n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext)
		}
	})
}

func FuzzParseV2XML(f *testing.F) {
	f.Add(`<xml><appid><![CDATA[wx1]]></appid><sign>ABC</sign></xml>`)
	f.Add(`<xml></xml>`)
	f.Fuzz(func(t *testing.T, x string) {
		fields, err := wxpay.ParseV2XML(strings.NewReader(x))
		if err != nil {
			return
		}
		_ = wxpay.V2Verify(fields, "key", wxpay.SignTypeMD5)
	})
}

// BenchmarkVerifyAndDecrypt is what every v3 callback costs before the
// database: the RSA-SHA256 signature check and the AES-256-GCM decryption.
func BenchmarkVerifyAndDecrypt(b *testing.B) {
	p := newPlatform(b)
	now := time.Unix(1_800_000_000, 0)
	h, body := p.notify(b, `{"out_trade_no":"T1","transaction_id":"4200","amount":{"total":100}}`, now)
	ring := p.keyring()
	b.ReportAllocs()
	for b.Loop() {
		if err := ring.VerifyMessage(h, body, now); err != nil {
			b.Fatal(err)
		}
		n, err := wxpay.ParseNotification(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wxpay.DecryptAEAD(p.apiKey, n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepaySignatures is what every prepay costs in RSA, by the
// protocol: the request's Authorization to WeChat Pay and the paySign the
// mini-program hands to wx.requestPayment, each RSA-SHA256 with the
// merchant's 2048-bit key.
func BenchmarkPrepaySignatures(b *testing.B) {
	p := newPlatform(b)
	m := wxpay.Merchant{MchID: "1900000001", Serial: "MERCHANT-SERIAL", Key: p.key}
	body := []byte(`{"appid":"wxd930ea5d5a258f4f","mchid":"1900000001","description":"takeout","out_trade_no":"T1-1","amount":{"total":1300}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Authorization("POST", "/v3/pay/transactions/jsapi", 1_800_000_000, "NONCE", body); err != nil {
			b.Fatal(err)
		}
		if _, err := wxpay.PaySign(p.key, "wxd930ea5d5a258f4f", "1800000000", "NONCE", "prepay_id=wx1"); err != nil {
			b.Fatal(err)
		}
	}
}
