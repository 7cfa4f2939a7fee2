package wxpay

import (
	"crypto/hmac"
	"crypto/md5" //nolint:gosec // G501: API v2's MD5 sign is the protocol
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// V2 sign types.
const (
	SignTypeMD5        = "MD5"
	SignTypeHMACSHA256 = "HMAC-SHA256"
)

// V2StringToSign is the sorted "k=v&...&key=KEY" string of API v2: fields
// sorted by name, empty values and "sign" left out.
func V2StringToSign(fields map[string]string, key string) string {
	names := make([]string, 0, len(fields))
	for k, v := range fields {
		if v != "" && k != "sign" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(fields[k])
		b.WriteByte('&')
	}
	b.WriteString("key=")
	b.WriteString(key)
	return b.String()
}

// V2Sign signs fields with the API v2 key: upper-case hex of MD5 or of
// HMAC-SHA256 keyed with the API key.
func V2Sign(fields map[string]string, key, signType string) (string, error) {
	s := V2StringToSign(fields, key)
	switch signType {
	case SignTypeMD5, "":
		sum := md5.Sum([]byte(s)) //nolint:gosec // G401: mandated by API v2
		return strings.ToUpper(hex.EncodeToString(sum[:])), nil
	case SignTypeHMACSHA256:
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(s))
		return strings.ToUpper(hex.EncodeToString(m.Sum(nil))), nil
	default:
		return "", fmt.Errorf("wxpay: unknown v2 sign_type %q", signType)
	}
}

// V2Verify checks fields["sign"] in constant time.
func V2Verify(fields map[string]string, key, signType string) error {
	want, err := V2Sign(fields, key, signType)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToUpper(fields["sign"]))) != 1 {
		return ErrBadSignature
	}
	return nil
}

// ParseV2XML reads a flat v2 <xml> message into fields. Nested elements,
// repeated fields and trailing data are refused.
func ParseV2XML(r io.Reader) (map[string]string, error) {
	dec := xml.NewDecoder(r)
	fields := map[string]string{}
	depth := 0
	var name string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("wxpay: xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case depth == 1 && t.Name.Local != "xml":
				return nil, errors.New("wxpay: xml: root element must be <xml>")
			case depth == 2:
				name = t.Name.Local
				text.Reset()
			case depth > 2:
				return nil, errors.New("wxpay: xml: nested elements")
			}
		case xml.CharData:
			if depth == 2 {
				text.Write(t)
			}
		case xml.EndElement:
			if depth == 2 {
				if _, dup := fields[name]; dup {
					return nil, fmt.Errorf("wxpay: xml: field %q repeated", name)
				}
				fields[name] = text.String()
			}
			depth--
			if depth == 0 {
				if _, err := dec.Token(); !errors.Is(err, io.EOF) {
					return nil, errors.New("wxpay: xml: data after </xml>")
				}
				return fields, nil
			}
		case xml.Directive:
			return nil, errors.New("wxpay: xml: directives are not allowed")
		}
	}
	return nil, errors.New("wxpay: xml: no <xml> element")
}

// V2Reply is the XML answer to a v2 notification.
func V2Reply(success bool, msg string) []byte {
	code := "FAIL"
	if success {
		code = "SUCCESS"
	}
	var b strings.Builder
	b.WriteString("<xml><return_code><![CDATA[")
	b.WriteString(code)
	b.WriteString("]]></return_code><return_msg><![CDATA[")
	b.WriteString(strings.ReplaceAll(msg, "]]>", ""))
	b.WriteString("]]></return_msg></xml>")
	return []byte(b.String())
}
