package wxsim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Keys are what the simulator and the API share in development: the
// merchant's API key pair (the API signs with it; wxsim verifies), the
// platform key pair (wxsim signs; the API verifies) and the APIv3 key.
type Keys struct {
	Merchant       *rsa.PrivateKey
	Platform       *rsa.PrivateKey
	PlatformSerial string
	APIv3Key       []byte
	// Feie signs the printer simulator's Feie-like callbacks; the API
	// verifies them with its public half.
	Feie *rsa.PrivateKey
	// PrinterSecret is the printer providers' client secret (Yilianyun)
	// and UKEY (Feie) in development.
	PrinterSecret string
	// CourierSecret is the courier providers' app secret (Dada, Meituan)
	// in development.
	CourierSecret string
}

// The file names in the key directory.
const (
	merchantKeyFile = "merchant_key.pem"
	platformKeyFile = "platform_key.pem"
	platformPubFile = "platform_pub.pem"
	apiv3KeyFile    = "apiv3.key"
	apiEnvFile      = "api.env"
	feieKeyFile     = "feie_key.pem"
	feiePubFile     = "feie_pub.pem"
	printerKeyFile  = "printers.key"
	courierKeyFile  = "couriers.key"
	// DadaAppKey and MeituanAppKey are the courier simulator's
	// development apps.
	DadaAppKey    = "dada-dev-app"
	MeituanAppKey = "meituan-dev-app"
	// YilianyunClientID and FeieUser are the printer simulator's
	// development accounts.
	YilianyunClientID = "1000000001"
	FeieUser          = "dev@wxsim"
	// PlatformSerial names the simulator's platform key (public-key mode).
	PlatformSerial = "PUB_KEY_ID_WXSIM"
	// MerchantSerial names the merchant's API certificate.
	MerchantSerial = "WXSIM-MERCHANT-SERIAL"
)

// LoadOrCreateKeys reads the keys from dir, generating them on first run,
// and writes dir/api.env: the TAKEOUT_WXPAY_* settings that make the API
// talk to this simulator. The files are private (0600).
func LoadOrCreateKeys(dir, mchID string) (Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Keys{}, err
	}
	k := Keys{PlatformSerial: PlatformSerial}
	var err error
	if k.Merchant, err = loadOrCreateRSA(filepath.Join(dir, merchantKeyFile)); err != nil {
		return Keys{}, err
	}
	if k.Platform, err = loadOrCreateRSA(filepath.Join(dir, platformKeyFile)); err != nil {
		return Keys{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.Platform.PublicKey)
	if err != nil {
		return Keys{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, platformPubFile), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return Keys{}, err
	}
	if k.APIv3Key, err = loadOrCreateSecret(filepath.Join(dir, apiv3KeyFile)); err != nil {
		return Keys{}, err
	}
	if k.Feie, err = loadOrCreateRSA(filepath.Join(dir, feieKeyFile)); err != nil {
		return Keys{}, err
	}
	feiePub, err := x509.MarshalPKIXPublicKey(&k.Feie.PublicKey)
	if err != nil {
		return Keys{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, feiePubFile), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: feiePub}), 0o600); err != nil {
		return Keys{}, err
	}
	printerSecret, err := loadOrCreateSecret(filepath.Join(dir, printerKeyFile))
	if err != nil {
		return Keys{}, err
	}
	k.PrinterSecret = string(printerSecret)
	courierSecret, err := loadOrCreateSecret(filepath.Join(dir, courierKeyFile))
	if err != nil {
		return Keys{}, err
	}
	k.CourierSecret = string(courierSecret)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Keys{}, err
	}
	env := fmt.Sprintf(`export TAKEOUT_WXPAY_MCHID='%s'
export TAKEOUT_WXPAY_MERCHANT_SERIAL='%s'
export TAKEOUT_WXPAY_MERCHANT_KEY_FILE='%s'
export TAKEOUT_WXPAY_PLATFORM_KEYS='%s=%s'
export TAKEOUT_WXPAY_APIV3_KEY_FILE='%s'
export TAKEOUT_YILIANYUN_CLIENT_ID='%s'
export TAKEOUT_YILIANYUN_CLIENT_SECRET_FILE='%s'
export TAKEOUT_FEIE_USER='%s'
export TAKEOUT_FEIE_UKEY_FILE='%s'
export TAKEOUT_FEIE_PUBLIC_KEY='%s'
export TAKEOUT_DADA_APP_KEY='%s'
export TAKEOUT_DADA_APP_SECRET_FILE='%s'
export TAKEOUT_MEITUAN_APP_KEY='%s'
export TAKEOUT_MEITUAN_APP_SECRET_FILE='%s'
`, mchID, MerchantSerial, filepath.Join(abs, merchantKeyFile), PlatformSerial, filepath.Join(abs, platformPubFile), filepath.Join(abs, apiv3KeyFile),
		YilianyunClientID, filepath.Join(abs, printerKeyFile), FeieUser, filepath.Join(abs, printerKeyFile), filepath.Join(abs, feiePubFile),
		DadaAppKey, filepath.Join(abs, courierKeyFile), MeituanAppKey, filepath.Join(abs, courierKeyFile))
	if err := os.WriteFile(filepath.Join(dir, apiEnvFile), []byte(env), 0o600); err != nil {
		return Keys{}, err
	}
	return k, nil
}

// loadOrCreateSecret reads a secret of 32 printable bytes from path,
// generating it on first run.
func loadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: wxsim's own key directory
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		b = []byte(hex.EncodeToString(raw[:]))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

func loadOrCreateRSA(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: wxsim's own key directory
	if err == nil {
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s: no PEM block", path)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an RSA key", path)
		}
		return rk, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return k, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// ReadAPIEnv reads back the TAKEOUT_WXPAY_* settings LoadOrCreateKeys
// wrote into dir/api.env, for tools that start the API themselves.
func ReadAPIEnv(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, apiEnvFile)) //nolint:gosec // G304: wxsim's own key directory
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out, nil
}
