package printing

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // G505: the provider's documented signature
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Feie is the client of a Feie-like open API (飞鹅云): one form endpoint,
// each call named by apiname and signed with sha1(user + ukey + stime).
// It has no idempotency id: a print request repeated prints again, and
// one whose answer was lost cannot be asked about (a ticket is queried
// by the id the answer carried). Its callbacks are signed with the
// platform's RSA key (SHA256withRSA over orderId, status and stime).
type Feie struct {
	Base string
	User string
	UKey string
	// PlatformKey verifies callbacks.
	PlatformKey *rsa.PublicKey
	// CallbackURL is sent with each ticket as its backurl.
	CallbackURL string
	HTTP        *http.Client
	Now         func() time.Time
}

// Name implements Provider.
func (*Feie) Name() string { return "feie" }

// IdempotencyWindow implements Provider: none.
func (*Feie) IdempotencyWindow() time.Duration { return 0 }

// FeieSig is the signature of a request.
func FeieSig(user, ukey, stime string) string {
	sum := sha1.Sum([]byte(user + ukey + stime)) //nolint:gosec // G401: the provider's documented signature
	return hex.EncodeToString(sum[:])
}

// FeieCallbackMessage is what a callback's signature covers.
func FeieCallbackMessage(orderID, status, stime string) string {
	return "orderId=" + orderID + "&status=" + status + "&stime=" + stime
}

func (f *Feie) call(ctx context.Context, apiname string, form url.Values) (json.RawMessage, error) {
	stime := strconv.FormatInt(f.Now().Unix(), 10)
	form.Set("user", f.User)
	form.Set("stime", stime)
	form.Set("sig", FeieSig(f.User, f.UKey, stime))
	form.Set("apiname", apiname)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.Base+"/Api/Open/", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return nil, classify(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, err
	}
	if unavailable(resp.StatusCode) {
		return nil, &RefusedError{Code: "HTTP " + strconv.Itoa(resp.StatusCode), Message: "unavailable"}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("feie %s: HTTP %d", apiname, resp.StatusCode)
	}
	var a struct {
		Ret  int             `json:"ret"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("feie %s: %w", apiname, err)
	}
	if a.Ret != 0 {
		return nil, &RefusedError{Code: strconv.Itoa(a.Ret), Message: a.Msg}
	}
	return a.Data, nil
}

// Print implements Provider. The ticket id is printed on the ticket by
// the caller; the provider does not see it.
func (f *Feie) Print(ctx context.Context, device, _, content string) (string, error) {
	form := url.Values{"sn": {device}, "content": {content}, "times": {"1"}}
	if f.CallbackURL != "" {
		form.Set("backurl", f.CallbackURL)
	}
	data, err := f.call(ctx, "Open_printMsg", form)
	if err != nil {
		return "", err
	}
	var ref string
	if err := json.Unmarshal(data, &ref); err != nil || ref == "" {
		return "", fmt.Errorf("feie print: malformed answer")
	}
	return ref, nil
}

// Query implements Provider.
func (f *Feie) Query(ctx context.Context, _, ref string) (bool, error) {
	data, err := f.call(ctx, "Open_queryOrderState", url.Values{"orderid": {ref}})
	if err != nil {
		return false, err
	}
	var printed bool
	if err := json.Unmarshal(data, &printed); err != nil {
		return false, fmt.Errorf("feie order state: %w", err)
	}
	return printed, nil
}

// Callback implements Provider: a form with orderId, status (1:
// printed), stime and sign (base64 SHA256withRSA).
func (f *Feie) Callback(r *http.Request) (Callback, error) {
	if err := r.ParseForm(); err != nil {
		return Callback{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
	}
	v := r.PostForm
	orderID, status, stime := v.Get("orderId"), v.Get("status"), v.Get("stime")
	sig, err := base64.StdEncoding.DecodeString(v.Get("sign"))
	if err != nil || f.PlatformKey == nil {
		return Callback{}, fmt.Errorf("%w: signature", ErrBadCallback)
	}
	digest := sha256.Sum256([]byte(FeieCallbackMessage(orderID, status, stime)))
	if err := rsa.VerifyPKCS1v15(f.PlatformKey, crypto.SHA256, digest[:], sig); err != nil {
		return Callback{}, fmt.Errorf("%w: signature", ErrBadCallback)
	}
	sec, err := strconv.ParseInt(stime, 10, 64)
	if err != nil || orderID == "" {
		return Callback{}, fmt.Errorf("%w: fields", ErrBadCallback)
	}
	// The provider's id starts with the printer's sn: sn_time_n.
	device, _, _ := strings.Cut(orderID, "_")
	return Callback{Device: device, Ref: orderID, Printed: status == "1", At: time.Unix(sec, 0)}, nil
}

// Acknowledge implements Provider.
func (*Feie) Acknowledge(w http.ResponseWriter, ok bool) {
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "FAIL")
		return
	}
	_, _ = io.WriteString(w, "SUCCESS")
}

// ParsePublicKey reads an RSA public key from PEM (PKIX "PUBLIC KEY").
func ParsePublicKey(pemBytes []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("not an RSA public key")
	}
	return rk, nil
}
