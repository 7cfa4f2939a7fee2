package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// BillRef is WeChat Pay's answer to a bill request: where to download the
// bill (a URL that lives five minutes) and the hash of the bill as it is
// before compression.
type BillRef struct {
	HashType    string `json:"hash_type"`
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
}

// TradeBill asks for the trade bill (every payment and refund) of a day
// in Asia/Shanghai (YYYY-MM-DD), gzip.
func (c *Client) TradeBill(ctx context.Context, date string) (BillRef, error) {
	var out BillRef
	err := c.do(ctx, http.MethodGet, "/v3/bill/tradebill?"+url.Values{"bill_date": {date}, "bill_type": {"ALL"}, "tar_type": {"GZIP"}}.Encode(), nil, &out)
	return out, err
}

// FundBill asks for the fund bill of the basic account of a day, gzip.
func (c *Client) FundBill(ctx context.Context, date string) (BillRef, error) {
	var out BillRef
	err := c.do(ctx, http.MethodGet, "/v3/bill/fundflowbill?"+url.Values{"bill_date": {date}, "account_type": {"BASIC"}, "tar_type": {"GZIP"}}.Encode(), nil, &out)
	return out, err
}

// SharingBill asks for the profit-sharing bill of a day (the service
// provider's: every share, unfreeze and return of its sub-merchants),
// gzip.
func (c *Client) SharingBill(ctx context.Context, date string) (BillRef, error) {
	var out BillRef
	err := c.do(ctx, http.MethodGet, "/v3/profitsharing/bills?"+url.Values{"bill_date": {date}, "tar_type": {"GZIP"}}.Encode(), nil, &out)
	return out, err
}

// maxBill bounds a bill's download.
const maxBill = 256 << 20

// DownloadBill fetches a bill's file from its download URL, signed as any
// request. The platform does not sign the file: the caller checks it
// against the hash BillRef gave. A URL that is not on the API's own host
// is refused (the signature is not sent elsewhere).
func (c *Client) DownloadBill(ctx context.Context, downloadURL string) ([]byte, error) {
	u, err := url.Parse(downloadURL)
	base, berr := url.Parse(c.base)
	if err != nil || berr != nil || u.Host != base.Host || (u.Scheme != base.Scheme && u.Scheme != "https") {
		return nil, fmt.Errorf("wechat pay: bill download URL %q is not on %s", downloadURL, c.base)
	}
	auth, err := c.mch.Authorization(http.MethodGet, u.RequestURI(), c.now().Unix(), nonce(), nil)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, downloadURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("wechat pay bill download: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBill+1))
	if err != nil {
		return nil, fmt.Errorf("wechat pay bill download: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &APIError{Status: resp.StatusCode}
		_ = json.NewDecoder(bytes.NewReader(body)).Decode(e)
		return nil, e
	}
	if len(body) > maxBill {
		return nil, fmt.Errorf("wechat pay bill download: larger than %d bytes", maxBill)
	}
	return body, nil
}
