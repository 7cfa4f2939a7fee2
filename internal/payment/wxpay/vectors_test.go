package wxpay_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

// vectors returns the directory of the published WeChat Pay test vectors
// (TAKEOUT_WXPAY_VECTORS; .ci/run and make test point it at
// ../shared/wechatpay-vectors). They are read in place, never copied.
func vectors(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TAKEOUT_WXPAY_VECTORS")
	if dir == "" {
		t.Skip("TAKEOUT_WXPAY_VECTORS is not set: the published WeChat Pay vectors are not on this machine (make test sets it when ../shared/wechatpay-vectors exists); the self-generated vector tests still run")
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Fatalf("TAKEOUT_WXPAY_VECTORS=%s: %v", dir, err)
	}
	return dir
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(read(t, dir, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestVectors(t *testing.T) {
	dir := vectors(t)
	sdkKey, err := wxpay.ParsePrivateKey(read(t, dir, "sdk_test_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := wxpay.ParsePublicKey(read(t, dir, "sdk_test_public_key.pem"), "F5765756002FDD77")
	if err != nil {
		t.Fatal(err)
	}
	certF, err := wxpay.ParsePublicKey(read(t, dir, "sdk_platform_cert_F5765756002FDD77.pem"), "")
	if err != nil {
		t.Fatal(err)
	}
	certD, err := wxpay.ParsePublicKey(read(t, dir, "sdk_platform_cert_D7CE59D1F522D701.pem"), "")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("certificate serials", func(t *testing.T) {
		if certF.Serial != "F5765756002FDD77" || certD.Serial != "D7CE59D1F522D701" {
			t.Errorf("serials %s %s", certF.Serial, certD.Serial)
		}
		tenpay, err := wxpay.ParsePublicKey(read(t, dir, "sdk_tenpay_cert_0C4AEF34B89340881BB2B25226393DC2E47F094B.pem"), "")
		if err != nil || tenpay.Serial != "0C4AEF34B89340881BB2B25226393DC2E47F094B" {
			t.Errorf("tenpay serial %q, %v (the leading 0C must stay)", tenpay.Serial, err)
		}
	})

	t.Run("sign and verify", func(t *testing.T) {
		var v struct {
			Message           string `json:"message"`
			ExpectedSignature string `json:"expected_signature"`
			Negative          struct {
				Message string `json:"message"`
			} `json:"negative"`
		}
		readJSON(t, dir, "sdk_sign_vector.json", &v)
		sig, err := wxpay.SignSHA256WithRSA(sdkKey, []byte(v.Message))
		if err != nil || sig != v.ExpectedSignature {
			t.Fatalf("signature %s, %v", sig, err)
		}
		for _, k := range []wxpay.PublicKey{pub, certF} {
			if err := wxpay.VerifySHA256WithRSA(k.Key, []byte(v.Message), v.ExpectedSignature); err != nil {
				t.Errorf("verify with %s: %v", k.Serial, err)
			}
			if err := wxpay.VerifySHA256WithRSA(k.Key, []byte(v.Negative.Message), v.ExpectedSignature); err == nil {
				t.Error("wrong source verified")
			}
		}
	})

	t.Run("authorization headers", func(t *testing.T) {
		var v struct {
			MchID    string `json:"mchid"`
			SerialNo string `json:"serial_no"`
			Cases    []struct {
				Method, Body          string
				NonceStr              string `json:"nonce_str"`
				CanonicalURL          string `json:"canonical_url"`
				SignedMessage         string `json:"signed_message"`
				ExpectedSignature     string `json:"expected_signature"`
				ExpectedAuthorization string `json:"expected_authorization"`
				Timestamp             string `json:"timestamp"`
			} `json:"cases"`
		}
		readJSON(t, dir, "derived_authorization_vectors.json", &v)
		m := wxpay.Merchant{MchID: v.MchID, Serial: v.SerialNo, Key: sdkKey}
		for _, c := range v.Cases {
			ts, err := strconv.ParseInt(c.Timestamp, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(wxpay.RequestMessage(c.Method, c.CanonicalURL, ts, c.NonceStr, []byte(c.Body))); got != c.SignedMessage {
				t.Errorf("%s %s: message %q, want %q", c.Method, c.CanonicalURL, got, c.SignedMessage)
			}
			auth, err := m.Authorization(c.Method, c.CanonicalURL, ts, c.NonceStr, []byte(c.Body))
			if err != nil || auth != c.ExpectedAuthorization {
				t.Errorf("%s %s: authorization\n%s\nwant\n%s", c.Method, c.CanonicalURL, auth, c.ExpectedAuthorization)
			}
			p, err := wxpay.ParseAuthorization(auth)
			if err != nil || p.Signature != c.ExpectedSignature || p.MchID != v.MchID || p.Timestamp != ts {
				t.Errorf("parse back: %+v, %v", p, err)
			}
		}
		var layout struct {
			MchID, Nonce string
			SerialNo     string `json:"serial_no"`
			Timestamp    int64
			Cases        []struct{ Method, URL, Body, Expected string }
		}
		readJSON(t, dir, "sdk_authorization_format.json", &layout)
		for _, c := range layout.Cases {
			msg := string(wxpay.RequestMessage(c.Method, c.URL, layout.Timestamp, layout.Nonce, []byte(c.Body)))
			want := strings.TrimSuffix(strings.SplitN(c.Expected, `signature="Sign:`, 2)[1], `"`)
			if msg != want {
				t.Errorf("layout %s: %q, want %q", c.Method, msg, want)
			}
		}
	})

	t.Run("paySign", func(t *testing.T) {
		var v struct {
			AppID         string `json:"appId"`
			TimeStamp     string `json:"timeStamp"`
			NonceStr      string `json:"nonceStr"`
			Package       string `json:"package"`
			ExpectedSign  string `json:"expected_paySign"`
			SignedMessage string `json:"signed_message"`
		}
		readJSON(t, dir, "derived_request_payment_vector.json", &v)
		got, err := wxpay.PaySign(sdkKey, v.AppID, v.TimeStamp, v.NonceStr, v.Package)
		if err != nil || got != v.ExpectedSign {
			t.Errorf("paySign %s, %v", got, err)
		}
	})

	t.Run("aes-gcm", func(t *testing.T) {
		var v struct {
			Key, Nonce, Ciphertext string
			AssociatedData         string                             `json:"associated_data"`
			ExpectedPlaintext      string                             `json:"expected_plaintext"`
			NegativeCases          []struct{ Ciphertext, Key string } `json:"negative_cases"`
		}
		readJSON(t, dir, "sdk_aes_gcm_vectors.json", &v)
		pt, err := wxpay.DecryptAEAD([]byte(v.Key), v.Nonce, v.AssociatedData, v.Ciphertext)
		if err != nil || string(pt) != v.ExpectedPlaintext {
			t.Errorf("decrypt: %q, %v", pt, err)
		}
		for _, n := range v.NegativeCases {
			key, ct := v.Key, v.Ciphertext
			if n.Key != "" {
				key = n.Key
			}
			if n.Ciphertext != "" {
				ct = n.Ciphertext
			}
			if _, err := wxpay.DecryptAEAD([]byte(key), v.Nonce, v.AssociatedData, ct); err == nil {
				t.Errorf("negative case %+v decrypted", n)
			}
		}
	})

	t.Run("rsa-oaep", func(t *testing.T) {
		var v struct {
			Ciphertext        string
			ExpectedPlaintext string `json:"expected_plaintext"`
		}
		readJSON(t, dir, "sdk_rsa_oaep_vector.json", &v)
		pt, err := wxpay.DecryptOAEP(sdkKey, v.Ciphertext)
		if err != nil || string(pt) != v.ExpectedPlaintext {
			t.Errorf("oaep: %q, %v", pt, err)
		}
	})

	notifications := []struct {
		name, prefix string
		keys         wxpay.Keyring
		apiKey       []byte
	}{
		{"payscore (sdk)", "sdk_notify_payscore", wxpay.NewKeyring(certD), []byte("testMchAPIv3Key0")},
		// WeChat Pay public-key mode: the serial is the public key's id.
		{"transaction success", "derived_notify_transaction_success", wxpay.NewKeyring(wxpay.PublicKey{Serial: "PUB_KEY_ID_0112345678901234567890123456", Key: pub.Key}), nil},
		{"refund success", "derived_notify_refund_success", wxpay.NewKeyring(certF), nil},
	}
	var params struct {
		APIv3Key string `json:"apiv3_key"`
	}
	readJSON(t, dir, "derived_notify_params.json", &params)
	for _, n := range notifications {
		t.Run("notify "+n.name, func(t *testing.T) {
			var hdr map[string]string
			readJSON(t, dir, n.prefix+"_headers.json", &hdr)
			body := read(t, dir, n.prefix+"_body.json")
			sec, err := strconv.ParseInt(hdr["Wechatpay-Timestamp"], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(sec, 0) // the vectors' frozen clock
			h := wxpay.SignedHeaders{Timestamp: hdr["Wechatpay-Timestamp"], Nonce: hdr["Wechatpay-Nonce"], Serial: hdr["Wechatpay-Serial"], Signature: hdr["Wechatpay-Signature"]}
			if err := n.keys.VerifyMessage(h, body, now); err != nil {
				t.Fatalf("verify: %v", err)
			}
			apiKey := n.apiKey
			if apiKey == nil {
				apiKey = []byte(params.APIv3Key)
			}
			note, err := wxpay.ParseNotification(body)
			if err != nil {
				t.Fatal(err)
			}
			pt, err := wxpay.DecryptAEAD(apiKey, note.Resource.Nonce, note.Resource.AssociatedData, note.Resource.Ciphertext)
			if err != nil {
				t.Fatal(err)
			}
			if want := read(t, dir, n.prefix+"_plaintext.json"); string(pt) != string(want) {
				t.Errorf("plaintext\n%s\nwant\n%s", pt, want)
			}
			// The negative cases of the vectors' README.
			changed := append([]byte(nil), body...)
			changed[len(changed)/2] ^= 1
			probe := h
			probe.Signature = "WECHATPAY/SIGNTEST/" + h.Signature
			unknown := h
			unknown.Serial = "0000000000000000"
			for name, c := range map[string]struct {
				h    wxpay.SignedHeaders
				body []byte
				now  time.Time
			}{
				"extra newline":        {h, append(append([]byte(nil), body...), '\n'), now},
				"byte changed":         {h, changed, now},
				"timestamp off by one": {wxpay.SignedHeaders{Timestamp: strconv.FormatInt(sec+1, 10), Nonce: h.Nonce, Serial: h.Serial, Signature: h.Signature}, body, now},
				"unknown serial":       {unknown, body, now},
				"signature probe":      {probe, body, now},
				"stale by 300s":        {h, body, now.Add(300 * time.Second)},
				"early by 300s":        {h, body, now.Add(-300 * time.Second)},
			} {
				if err := n.keys.VerifyMessage(c.h, c.body, c.now); err == nil {
					t.Errorf("%s verified", name)
				}
			}
			if _, err := wxpay.DecryptAEAD([]byte("wrong-key-wrong-key-wrong-key-32"), note.Resource.Nonce, note.Resource.AssociatedData, note.Resource.Ciphertext); err == nil {
				t.Error("decrypted with a wrong APIv3 key")
			}
		})
	}

	t.Run("v2 signs", func(t *testing.T) {
		var v struct {
			Notify struct {
				File, Key, StringA string
				MD5Sign            string `json:"md5_sign"`
				HMACSign           string `json:"hmac_sha256_sign"`
				SuccessReply       string `json:"success_reply"`
			} `json:"derived_v2_notify"`
			Doc struct {
				Key, StringA   string
				StringSignTemp string `json:"stringSignTemp"`
				MD5Sign        string `json:"md5_sign"`
				HMACSign       string `json:"hmac_sha256_sign"`
			} `json:"official_doc_example"`
			PaySign struct {
				Message string
				MD5Sign string `json:"md5_sign"`
			} `json:"official_v2_paysign_example"`
		}
		readJSON(t, dir, "derived_v2_vectors.json", &v)
		doc := fields(v.Doc.StringA)
		if got := wxpay.V2StringToSign(doc, v.Doc.Key); got != v.Doc.StringSignTemp {
			t.Errorf("stringSignTemp %q", got)
		}
		for typ, want := range map[string]string{wxpay.SignTypeMD5: v.Doc.MD5Sign, wxpay.SignTypeHMACSHA256: v.Doc.HMACSign} {
			if got, _ := wxpay.V2Sign(doc, v.Doc.Key, typ); got != want {
				t.Errorf("doc %s: %s, want %s", typ, got, want)
			}
		}
		msg, key, _ := strings.Cut(v.PaySign.Message, "&key=")
		if got, _ := wxpay.V2Sign(fields(msg), key, wxpay.SignTypeMD5); got != v.PaySign.MD5Sign {
			t.Errorf("v2 paySign %s, want %s", got, v.PaySign.MD5Sign)
		}

		f, err := wxpay.ParseV2XML(strings.NewReader(string(read(t, dir, v.Notify.File))))
		if err != nil {
			t.Fatal(err)
		}
		if f["sign"] != v.Notify.MD5Sign || f["attach"] != "支付测试" {
			t.Errorf("parsed %v", f)
		}
		if got := strings.TrimSuffix(wxpay.V2StringToSign(f, v.Notify.Key), "&key="+v.Notify.Key); got != v.Notify.StringA {
			t.Errorf("stringA %q", got)
		}
		if err := wxpay.V2Verify(f, v.Notify.Key, wxpay.SignTypeMD5); err != nil {
			t.Errorf("md5 notify: %v", err)
		}
		if got, _ := wxpay.V2Sign(f, v.Notify.Key, wxpay.SignTypeHMACSHA256); got != v.Notify.HMACSign {
			t.Errorf("hmac notify: %s", got)
		}
		f["total_fee"] = "100"
		if wxpay.V2Verify(f, v.Notify.Key, wxpay.SignTypeMD5) == nil {
			t.Error("a changed amount verified")
		}
		if got := string(wxpay.V2Reply(true, "OK")); got != v.Notify.SuccessReply {
			t.Errorf("reply %s", got)
		}
	})
}

func fields(stringA string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(stringA, "&") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
