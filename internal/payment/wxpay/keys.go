// Package wxpay implements the WeChat Pay protocol on Go's standard
// library (the official SDK is not available here): API v3 request
// signing (WECHATPAY2-SHA256-RSA2048), response and notification signature
// verification, AEAD_AES_256_GCM resource decryption, the
// wx.requestPayment paySign, RSA-OAEP for sensitive fields, and the legacy
// API v2 MD5 / HMAC-SHA256 signatures and XML. It holds no state and does
// no I/O beyond what callers hand it; tests check it byte for byte against
// the published vectors.
package wxpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParsePrivateKey reads an RSA private key from PEM: PKCS#8 (whatever the
// block's label, as the SDK's test keys use "TESTING KEY") or PKCS#1.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("wxpay: no PEM block in private key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("wxpay: private key is not RSA")
		}
		return rk, nil
	}
	k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("wxpay: parse private key: %w", err)
	}
	return k, nil
}

// PublicKey is a WeChat Pay verification key and the serial (or public
// key id) that names it in the Wechatpay-Serial header.
type PublicKey struct {
	Serial string
	Key    *rsa.PublicKey
}

// ParsePublicKey reads a platform certificate (its serial comes from the
// certificate) or a bare SPKI public key (WeChat Pay public-key mode; its
// id must be given as serial).
func ParsePublicKey(pemBytes []byte, serial string) (PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return PublicKey{}, errors.New("wxpay: no PEM block in public key")
	}
	if block.Type == "CERTIFICATE" {
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return PublicKey{}, fmt.Errorf("wxpay: parse certificate: %w", err)
		}
		k, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return PublicKey{}, errors.New("wxpay: certificate key is not RSA")
		}
		if serial == "" {
			serial = CertificateSerial(cert)
		}
		return PublicKey{Serial: serial, Key: k}, nil
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("wxpay: parse public key: %w", err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return PublicKey{}, errors.New("wxpay: public key is not RSA")
	}
	if serial == "" {
		return PublicKey{}, errors.New("wxpay: a bare public key needs its key id")
	}
	return PublicKey{Serial: serial, Key: rk}, nil
}

// CertificateSerial formats a certificate's serial as WeChat Pay does: the
// upper-case hex of the serial's bytes, leading zero digit kept (formatting
// the big.Int with %X would drop it).
func CertificateSerial(cert *x509.Certificate) string {
	return strings.ToUpper(fmt.Sprintf("%X", cert.SerialNumber.Bytes()))
}

// Keyring holds the verification keys by serial; several at once lets
// WeChat Pay rotate its platform certificates (or move to public-key mode)
// without downtime.
type Keyring map[string]*rsa.PublicKey

// NewKeyring indexes keys by serial.
func NewKeyring(keys ...PublicKey) Keyring {
	r := make(Keyring, len(keys))
	for _, k := range keys {
		r[k.Serial] = k.Key
	}
	return r
}
