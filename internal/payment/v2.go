package payment

import (
	"net/http"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

func v2Reply(w http.ResponseWriter, ok bool, msg string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(wxpay.V2Reply(ok, msg))
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
		body, ok := callbackBody(w, r, maxBody)
		if !ok {
			v2Reply(w, false, "body too large")
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
