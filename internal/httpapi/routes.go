package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/statemachine"
)

// routes is the whole API: every route of api/openapi.yaml is here.
func routes(d Deps, m *httpMetrics) http.Handler {
	r := chi.NewRouter()
	r.Use(
		instrument(d.Logger, m),
		recoverPanics,
		limitBody(d.MaxBodyBytes),
	)
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)

	r.Get("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(d))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{}))

	r.Route("/v1", func(r chi.Router) {
		// Payment callbacks come from the provider: never rate limited.
		r.Method(http.MethodPost, "/payments/wechat/notify", payment.HandleNotifyV3(d.Payments))
		r.Method(http.MethodPost, "/payments/wechat/notify/v2", payment.HandleNotifyV2(d.Payments))

		r.Group(func(r chi.Router) {
			r.Use(limitByIP(d.RateLimitIP, d.ClientIPHeader))
			r.Method(http.MethodPost, "/auth/wx-login", auth.HandleLogin(d.Pool, d.WeChat, d.Tokens))
			r.Method(http.MethodGet, "/merchants", catalog.HandleMerchants(d.Catalog))
			r.Method(http.MethodGet, "/merchants/{id}/menu", catalog.HandleMenu(d.Catalog))

			r.Group(func(r chi.Router) {
				r.Use(auth.RequireUser(d.Tokens), limitByUser(d.RateLimitUser))
				r.Method(http.MethodPost, "/orders/confirm", order.HandleConfirm(d.Orders))
				r.Method(http.MethodPost, "/orders", order.HandleSubmit(d.Orders))
				r.Method(http.MethodGet, "/orders", order.HandleList(d.Orders))
				r.Method(http.MethodGet, "/orders/{id}", order.HandleGet(d.Orders))
				r.Method(http.MethodPost, "/orders/{id}/cancel", order.HandleCancel(d.Orders))
				r.Method(http.MethodPost, "/orders/{id}/pay", payment.HandlePay(d.Payments))
			})
		})
	})

	r.Route("/admin/v1", func(r chi.Router) {
		r.Use(auth.RequireStaff(d.Tokens))
		r.With(auth.RequireAdmin).Method(http.MethodPost, "/merchants", catalog.HandleCreateMerchant(d.Catalog))
		r.Method(http.MethodPatch, "/merchants/{id}", catalog.HandleUpdateMerchant(d.Catalog))
		r.Method(http.MethodGet, "/merchants/{id}/dishes", catalog.HandleListDishes(d.Catalog))
		r.Method(http.MethodPost, "/merchants/{id}/dishes", catalog.HandleCreateDish(d.Catalog))
		r.Method(http.MethodGet, "/dishes/{id}", catalog.HandleGetDish(d.Catalog))
		r.Method(http.MethodPatch, "/dishes/{id}", catalog.HandleUpdateDish(d.Catalog))
		r.Method(http.MethodPut, "/dishes/{id}/stock", catalog.HandleSetStock(d.Catalog))
		r.Method(http.MethodGet, "/orders", order.HandleSearch(d.Orders))
		r.Method(http.MethodPost, "/orders/{id}/accept", order.HandleStaffAction(d.Orders, statemachine.Accept))
		r.Method(http.MethodPost, "/orders/{id}/reject", order.HandleStaffAction(d.Orders, statemachine.Reject))
		r.Method(http.MethodPost, "/orders/{id}/dispatch", order.HandleStaffAction(d.Orders, statemachine.Dispatch))
		r.Method(http.MethodPost, "/orders/{id}/complete", order.HandleStaffAction(d.Orders, statemachine.Complete))
		r.Method(http.MethodPost, "/orders/{id}/refund", order.HandleStaffAction(d.Orders, statemachine.Refund))
		r.With(auth.RequireAdmin).Method(http.MethodGet, "/jobs/dead", jobs.HandleDead(d.Jobs))
		r.With(auth.RequireAdmin).Method(http.MethodPost, "/jobs/{id}/retry", jobs.HandleRetry(d.Jobs))
		r.With(auth.RequireAdmin).Method(http.MethodGet, "/idempotency-keys/{user_id}/{key}", idempotency.HandleInspect(d.Idempotency))
		r.With(auth.RequireAdmin).Method(http.MethodDelete, "/idempotency-keys/{user_id}/{key}", idempotency.HandlePurge(d.Idempotency))
	})
	return r
}
