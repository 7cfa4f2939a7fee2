package payment

import (
	"bytes"
	"mime"
	"net/http"

	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/web"
)

// v2Reply answers a v2 notification: SUCCESS, or FAIL (the platform
// retries), in the XML shape with 200.
func v2Reply(w http.ResponseWriter, ok bool, msg string) { v2Answer(w, http.StatusOK, ok, msg) }

// v2Answer is v2Reply with another status: for a request that is no v2
// notification at all (too large, empty, not XML), answered FAIL in the
// XML shape with the status that says why.
func v2Answer(w http.ResponseWriter, status int, ok bool, msg string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(wxpay.V2Reply(ok, msg))
}

// isXML reports whether a v2 callback's Content-Type is XML's (or absent,
// as some gateways send it).
func isXML(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return contentType == "" || (err == nil && (mt == "text/xml" || mt == "application/xml"))
}

// HandleNotifyV2 serves POST /v1/payments/wechat/notify/v2: the legacy
// XML payment callback, through Service.NotifyV2, answered with the XML
// SUCCESS/FAIL reply (FAIL makes the platform retry).
func HandleNotifyV2(s *Service, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			v2Reply(w, false, "v2 callbacks are not configured")
			return
		}
		if web.CheckQuery(r) != nil {
			v2Answer(w, http.StatusBadRequest, false, "malformed query string")
			return
		}
		if !isXML(r.Header.Get("Content-Type")) {
			v2Answer(w, http.StatusUnsupportedMediaType, false, "send the notification as XML")
			return
		}
		body, ok := callbackBody(w, r, maxBody)
		switch {
		case !ok:
			v2Answer(w, http.StatusRequestEntityTooLarge, false, "body too large")
			return
		case len(bytes.TrimSpace(body)) == 0:
			v2Answer(w, http.StatusBadRequest, false, "empty body")
			return
		}
		if err := s.NotifyV2(r.Context(), body); err != nil {
			_, msg := notifyAnswer(r, err)
			v2Reply(w, false, msg)
			return
		}
		v2Reply(w, true, "OK")
	})
}
