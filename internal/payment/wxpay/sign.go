package wxpay

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // G505: WeChat Pay's RSA-OAEP uses SHA-1
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignSHA256WithRSA signs message with RSASSA-PKCS1-v1_5 over SHA-256 and
// returns it in standard base64. It is deterministic.
func SignSHA256WithRSA(key *rsa.PrivateKey, message []byte) (string, error) {
	h := sha256.Sum256(message)
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, h[:])
	if err != nil {
		return "", fmt.Errorf("wxpay: sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifySHA256WithRSA checks a base64 SHA256withRSA signature.
func VerifySHA256WithRSA(key *rsa.PublicKey, message []byte, signature string) error {
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	h := sha256.Sum256(message)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, h[:], sig); err != nil {
		return ErrBadSignature
	}
	return nil
}

// RequestMessage is what a merchant signs for an API v3 request:
// METHOD\nURL\ntimestamp\nnonce\nbody\n, where URL is the path with its
// raw query string.
func RequestMessage(method, canonicalURL string, timestamp int64, nonce string, body []byte) []byte {
	var b strings.Builder
	b.Grow(len(method) + len(canonicalURL) + len(nonce) + len(body) + 20)
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(canonicalURL)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(timestamp, 10))
	b.WriteByte('\n')
	b.WriteString(nonce)
	b.WriteByte('\n')
	b.Write(body)
	b.WriteByte('\n')
	return []byte(b.String())
}

// Merchant is the merchant side of API v3: its id, its API certificate's
// serial and private key.
type Merchant struct {
	MchID  string
	Serial string
	Key    *rsa.PrivateKey
}

// AuthorizationScheme is the v3 Authorization scheme.
const AuthorizationScheme = "WECHATPAY2-SHA256-RSA2048"

// Authorization returns the Authorization header of a v3 request.
func (m Merchant) Authorization(method, canonicalURL string, timestamp int64, nonce string, body []byte) (string, error) {
	sig, err := SignSHA256WithRSA(m.Key, RequestMessage(method, canonicalURL, timestamp, nonce, body))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",timestamp="%d",serial_no="%s",signature="%s"`,
		AuthorizationScheme, m.MchID, nonce, timestamp, m.Serial, sig), nil
}

// AuthorizationParams are the fields of a v3 Authorization header.
type AuthorizationParams struct {
	MchID, Nonce, Serial, Signature string
	Timestamp                       int64
}

// ParseAuthorization reads a v3 Authorization header (as the platform, and
// wxsim, do).
func ParseAuthorization(h string) (AuthorizationParams, error) {
	rest, ok := strings.CutPrefix(h, AuthorizationScheme+" ")
	if !ok {
		return AuthorizationParams{}, errors.New("wxpay: not a " + AuthorizationScheme + " authorization")
	}
	var p AuthorizationParams
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return AuthorizationParams{}, errors.New("wxpay: malformed authorization")
		}
		v = v[1 : len(v)-1]
		switch k {
		case "mchid":
			p.MchID = v
		case "nonce_str":
			p.Nonce = v
		case "serial_no":
			p.Serial = v
		case "signature":
			p.Signature = v
		case "timestamp":
			ts, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return AuthorizationParams{}, errors.New("wxpay: malformed timestamp")
			}
			p.Timestamp = ts
		}
	}
	if p.MchID == "" || p.Nonce == "" || p.Serial == "" || p.Signature == "" || p.Timestamp == 0 {
		return AuthorizationParams{}, errors.New("wxpay: incomplete authorization")
	}
	return p, nil
}

// Errors of verification; all are answered as failures.
var (
	ErrBadSignature   = errors.New("wxpay: signature does not verify")
	ErrUnknownSerial  = errors.New("wxpay: unknown Wechatpay-Serial")
	ErrStaleTimestamp = errors.New("wxpay: timestamp outside the allowed window")
	ErrSignTest       = errors.New("wxpay: WeChat Pay signature probe")
	ErrMissingHeader  = errors.New("wxpay: missing Wechatpay-* header")
)

// MaxSkew is how far a notification's or response's timestamp may be from
// now (the platform and the SDK use 5 minutes).
const MaxSkew = 5 * time.Minute

// SignedHeaders are the Wechatpay-* headers of a response or notification.
type SignedHeaders struct {
	Timestamp, Nonce, Serial, Signature string
}

// VerifyMessage checks a platform-signed message (a response or a
// notification): the serial names a known key, the timestamp is within
// MaxSkew of now, the signature is not the platform's probe, and the
// SHA256withRSA signature over timestamp\nnonce\nbody\n verifies.
func (r Keyring) VerifyMessage(h SignedHeaders, body []byte, now time.Time) error {
	if h.Timestamp == "" || h.Nonce == "" || h.Serial == "" || h.Signature == "" {
		return ErrMissingHeader
	}
	if strings.HasPrefix(h.Signature, "WECHATPAY/SIGNTEST/") {
		return ErrSignTest
	}
	key, ok := r[h.Serial]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownSerial, h.Serial)
	}
	ts, err := strconv.ParseInt(h.Timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrStaleTimestamp, h.Timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d >= MaxSkew || d <= -MaxSkew {
		return fmt.Errorf("%w: %v", ErrStaleTimestamp, d)
	}
	msg := make([]byte, 0, len(h.Timestamp)+len(h.Nonce)+len(body)+3)
	msg = append(msg, h.Timestamp...)
	msg = append(msg, '\n')
	msg = append(msg, h.Nonce...)
	msg = append(msg, '\n')
	msg = append(msg, body...)
	msg = append(msg, '\n')
	return VerifySHA256WithRSA(key, msg, h.Signature)
}

// DecryptAEAD opens an AEAD_AES_256_GCM resource: base64 ciphertext with
// the GCM tag appended, 12-byte nonce, associated data. The key is the
// APIv3 key (32 bytes in production; the SDK's vectors use 16).
func DecryptAEAD(key []byte, nonce, associatedData, ciphertextB64 string) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("wxpay: ciphertext is not base64: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("wxpay: APIv3 key: %w", err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(nonce))
	if err != nil {
		return nil, fmt.Errorf("wxpay: gcm: %w", err)
	}
	pt, err := gcm.Open(nil, []byte(nonce), ct, []byte(associatedData))
	if err != nil {
		return nil, fmt.Errorf("wxpay: decrypt resource: %w", err)
	}
	return pt, nil
}

// EncryptAEAD seals plaintext as the platform does (for wxsim and tests).
func EncryptAEAD(key []byte, nonce, associatedData string, plaintext []byte) (string, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", fmt.Errorf("wxpay: APIv3 key: %w", err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(nonce))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// PaySign is the paySign of wx.requestPayment (API v3, signType RSA):
// SHA256withRSA over appId\ntimeStamp\nnonceStr\npackage\n.
func PaySign(key *rsa.PrivateKey, appID, timeStamp, nonceStr, pkg string) (string, error) {
	return SignSHA256WithRSA(key, []byte(appID+"\n"+timeStamp+"\n"+nonceStr+"\n"+pkg+"\n"))
}

// DecryptOAEP decrypts a sensitive field (RSA-OAEP with SHA-1, base64).
func DecryptOAEP(key *rsa.PrivateKey, ciphertextB64 string) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("wxpay: ciphertext is not base64: %w", err)
	}
	pt, err := rsa.DecryptOAEP(sha1.New(), rand.Reader, key, ct, nil) //nolint:gosec // G401: mandated by the protocol
	if err != nil {
		return nil, fmt.Errorf("wxpay: oaep: %w", err)
	}
	return pt, nil
}

// Notification is the envelope of a v3 notification.
type Notification struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	EventType    string   `json:"event_type"`
	ResourceType string   `json:"resource_type"`
	Summary      string   `json:"summary"`
	Resource     Resource `json:"resource"`
}

// Resource is a notification's encrypted payload.
type Resource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// ParseNotification decodes a v3 notification envelope.
func ParseNotification(body []byte) (Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return Notification{}, fmt.Errorf("wxpay: notification: %w", err)
	}
	if n.ID == "" || n.EventType == "" || n.Resource.Ciphertext == "" || n.Resource.Nonce == "" {
		return Notification{}, errors.New("wxpay: notification lacks id, event_type or resource")
	}
	if n.Resource.Algorithm != "AEAD_AES_256_GCM" {
		return Notification{}, fmt.Errorf("wxpay: unsupported resource algorithm %q", n.Resource.Algorithm)
	}
	return n, nil
}
