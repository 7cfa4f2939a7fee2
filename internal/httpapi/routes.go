package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/takeout/takeout/internal/aftersales"
	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/bill"
	"github.com/takeout/takeout/internal/board"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/ledger"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderstream"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/sharing"
	"github.com/takeout/takeout/internal/shipping"
	"github.com/takeout/takeout/internal/staff"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/subscribemsg"
	"github.com/takeout/takeout/internal/voucher"
)

// routes is the whole API: every route of api/openapi.yaml is here.
func routes(d Deps, m *httpMetrics) http.Handler {
	r := chi.NewRouter()
	r.Use(instrument(d.Logger, m), recoverPanics)
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)

	// The live order stream lasts as long as the board is open: no
	// request deadline (each write has its own).
	r.With(wellFormed, auth.RequireStaff(d.Tokens)).
		Method(http.MethodGet, "/admin/v1/merchants/{id}/orders/stream", orderstream.HandleStream(d.Stream))
	r.Group(func(r chi.Router) {
		r.Use(deadline(d.RequestTimeout))
		apiRoutes(r, d)
	})
	return r
}

// apiRoutes are every request-and-answer route.
func apiRoutes(r chi.Router, d Deps) {
	r.With(wellFormed).Get("/healthz", handleHealthz())
	r.With(wellFormed).Get("/readyz", handleReadyz(d))
	r.With(wellFormed).Method(http.MethodGet, "/board/", board.Handler())
	r.With(wellFormed).Method(http.MethodGet, "/board/{file}", board.Handler())

	// Groups with full paths rather than mounted subrouters: a mount adds
	// a wildcard path value to every request it routes.
	callbackRoutes(r, d)

	r.Group(func(r chi.Router) {
		r.Use(wellFormed, limitBody(d.MaxBodyBytes))
		r.Group(func(r chi.Router) {
			r.Use(limitByIP(d.RateLimitIP, d.ClientIPHeader))
			r.Method(http.MethodPost, "/v1/auth/wx-login", auth.HandleLogin(d.Pool, d.WeChat, d.Tokens))
			r.Method(http.MethodGet, "/v1/merchants", catalog.HandleMerchants(d.Catalog))
			r.Method(http.MethodGet, "/v1/merchants/{id}/menu", catalog.HandleMenu(d.Catalog))
			r.Method(http.MethodGet, "/v1/merchants/{id}/slots", catalog.HandleSlots(d.Catalog))
			r.Method(http.MethodGet, "/v1/voucher-templates", voucher.HandleOffers(d.Vouchers))
			// Staff logins have their own limits, per account and address,
			// shared by every instance.
			r.Method(http.MethodPost, "/admin/v1/auth/login", staff.HandleLogin(d.Staff, d.ClientIPHeader))

			r.Group(func(r chi.Router) {
				r.Use(auth.RequireUser(d.Tokens), limitByUser(d.RateLimitUser))
				r.Method(http.MethodPost, "/v1/auth/logout", auth.HandleLogout(d.Tokens, d.Revocations))
				r.Method(http.MethodPost, "/v1/orders/confirm", order.HandleConfirm(d.Orders))
				r.Method(http.MethodPost, "/v1/orders", order.HandleSubmit(d.Orders))
				r.Method(http.MethodGet, "/v1/orders", order.HandleList(d.Orders))
				r.Method(http.MethodGet, "/v1/orders/{id}", order.HandleGet(d.Orders))
				r.Method(http.MethodPost, "/v1/orders/{id}/cancel", order.HandleCancel(d.Orders))
				r.Method(http.MethodPost, "/v1/orders/{id}/complete", order.HandleConfirmReceipt(d.Orders))
				r.Method(http.MethodPost, "/v1/orders/{id}/reorder", order.HandleReorder(d.Orders))
				r.Method(http.MethodPost, "/v1/orders/{id}/urge", order.HandleUrge(d.Orders))
				r.Method(http.MethodPost, "/v1/orders/{id}/pay", payment.HandlePay(d.Payments))
				r.Method(http.MethodPut, "/v1/orders/{id}/subscriptions", subscribemsg.HandleGrant(d.Messages))
				r.Method(http.MethodGet, "/v1/orders/{id}/delivery", courier.HandleOfOrder(d.Couriers))
				r.Method(http.MethodPost, "/v1/vouchers/claim", voucher.HandleClaim(d.Vouchers, d.Idempotency))
				r.Method(http.MethodGet, "/v1/vouchers", voucher.HandleWallet(d.Vouchers))
				customerAfterSalesRoutes(r, d)
			})
		})

		r.Group(func(r chi.Router) {
			r.Use(auth.RequireStaff(d.Tokens))
			const a = "/admin/v1"
			r.Method(http.MethodPost, a+"/auth/logout", auth.HandleLogout(d.Tokens, d.Revocations))
			r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/merchants/{id}/staff", staff.HandleCreate(d.Staff, d.Idempotency))
			r.Method(http.MethodGet, a+"/merchants/{id}/staff", staff.HandleList(d.Staff))
			r.With(auth.RequireAdmin).Method(http.MethodDelete, a+"/staff/{id}", staff.HandleDisable(d.Staff))
			r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/merchants", catalog.HandleCreateMerchant(d.Catalog, d.Idempotency))
			r.Method(http.MethodPatch, a+"/merchants/{id}", catalog.HandleUpdateMerchant(d.Catalog))
			r.Method(http.MethodGet, a+"/merchants/{id}/dishes", catalog.HandleListDishes(d.Catalog))
			r.Method(http.MethodPost, a+"/merchants/{id}/dishes", catalog.HandleCreateDish(d.Catalog, d.Idempotency))
			r.Method(http.MethodGet, a+"/merchants/{id}/categories", catalog.HandleListCategories(d.Catalog))
			r.Method(http.MethodPost, a+"/merchants/{id}/categories", catalog.HandleCreateCategory(d.Catalog, d.Idempotency))
			r.Method(http.MethodPatch, a+"/categories/{id}", catalog.HandleUpdateCategory(d.Catalog))
			r.Method(http.MethodDelete, a+"/categories/{id}", catalog.HandleDeleteCategory(d.Catalog))
			r.Method(http.MethodGet, a+"/dishes/{id}", catalog.HandleGetDish(d.Catalog))
			r.Method(http.MethodPut, a+"/dishes/{id}/options", catalog.HandleSetOptions(d.Catalog))
			r.Method(http.MethodPatch, a+"/dishes/{id}", catalog.HandleUpdateDish(d.Catalog))
			r.Method(http.MethodPut, a+"/dishes/{id}/stock", catalog.HandleSetStock(d.Catalog))
			r.Method(http.MethodPost, a+"/dishes/{id}/stock/adjustments", catalog.HandleAdjustStock(d.Catalog, d.Idempotency))
			discountRoutes(r, d, a)
			printingRoutes(r, d, a)
			courierRoutes(r, d, a)
			r.Method(http.MethodGet, a+"/orders", order.HandleSearch(d.Orders))
			r.Method(http.MethodPost, a+"/orders/{id}/accept", order.HandleStaffAction(d.Orders, statemachine.Accept))
			r.Method(http.MethodPost, a+"/orders/{id}/reject", order.HandleStaffAction(d.Orders, statemachine.Reject))
			r.Method(http.MethodPost, a+"/orders/{id}/ready", order.HandleStaffAction(d.Orders, statemachine.MarkReady))
			r.Method(http.MethodPost, a+"/orders/{id}/dispatch", order.HandleStaffAction(d.Orders, statemachine.Dispatch))
			r.Method(http.MethodPost, a+"/orders/{id}/pick-up", order.HandleStaffAction(d.Orders, statemachine.PickUp))
			r.Method(http.MethodPost, a+"/orders/{id}/complete", order.HandleStaffAction(d.Orders, statemachine.Complete))
			r.Method(http.MethodPost, a+"/orders/{id}/refund", order.HandleStaffAction(d.Orders, statemachine.Refund))
			r.Method(http.MethodPost, a+"/orders/{id}/refunds", payment.HandlePartialRefund(d.Payments, d.Idempotency, d.Pool))
			moneyRoutes(r, d, a)
			r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/tokens/revoke", auth.HandleRevoke(d.Tokens, d.Revocations))
			r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/refunds", payment.HandleRefunds(d.Payments))
			r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/refunds/{out_refund_no}/retry", payment.HandleRefundAction(d.Payments, true))
			r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/refunds/{out_refund_no}/settle", payment.HandleRefundAction(d.Payments, false))
			operatorRoutes(r, d, a)
			r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/idempotency-keys/{user_id}/{key}", idempotency.HandleInspect(d.Idempotency))
			r.With(auth.RequireAdmin).Method(http.MethodDelete, a+"/idempotency-keys/{user_id}/{key}", idempotency.HandlePurge(d.Idempotency))
		})
	})
}

// operatorRoutes are admins' routes of work that needs an operator:
// shipping uploads WeChat refused, the daily reconciliation and dead
// jobs.
func operatorRoutes(r chi.Router, d Deps, a string) {
	r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/shipping", shipping.HandleList(d.Shipping))
	r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/shipping/{id}/retry", shipping.HandleRetry(d.Shipping))
	r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/reconciliations/{date}", bill.HandleGet(d.Bills))
	r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/reconciliations/{date}/run", bill.HandleRun(d.Bills))
	r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/jobs/dead", jobs.HandleDead(d.Jobs))
	r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/jobs/{id}/retry", jobs.HandleRetry(d.Jobs))
}

// customerAfterSalesRoutes are customers' routes of after-sales requests.
func customerAfterSalesRoutes(r chi.Router, d Deps) {
	r.Method(http.MethodPost, "/v1/orders/{id}/after-sales", aftersales.HandleCreate(d.AfterSales, d.Idempotency, d.Pool))
	r.Method(http.MethodGet, "/v1/orders/{id}/after-sales", aftersales.HandleOfOrder(d.AfterSales))
	r.Method(http.MethodPost, "/v1/after-sales/{id}/escalate", aftersales.HandleEscalate(d.AfterSales))
}

// moneyRoutes are staff's routes of the ledger and after-sales requests.
func moneyRoutes(r chi.Router, d Deps, a string) {
	r.Method(http.MethodGet, a+"/orders/{id}/ledger", ledger.HandleOrder(d.Ledger))
	r.With(auth.RequireAdmin).Method(http.MethodPut, a+"/merchants/{id}/commission", ledger.HandleSetCommission(d.Ledger))
	r.With(auth.RequireAdmin).Method(http.MethodPut, a+"/merchants/{id}/sub-merchant", sharing.HandleSetSubMerchant(d.Pool))
	r.With(auth.RequireAdmin).Method(http.MethodGet, a+"/profit-sharing", sharing.HandleList(d.Sharing))
	r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/profit-sharing/{out_no}/retry", sharing.HandleRetry(d.Sharing))
	r.Method(http.MethodGet, a+"/merchants/{id}/statement", ledger.HandleStatement(d.Ledger))
	r.Method(http.MethodGet, a+"/after-sales", aftersales.HandleList(d.AfterSales))
	r.Method(http.MethodPost, a+"/after-sales/{id}/agree", aftersales.HandleAction(d.AfterSales, aftersales.ActionAgree))
	r.Method(http.MethodPost, a+"/after-sales/{id}/reject", aftersales.HandleAction(d.AfterSales, aftersales.ActionReject))
	r.With(auth.RequireAdmin).Method(http.MethodPost, a+"/after-sales/{id}/decide", aftersales.HandleAction(d.AfterSales, aftersales.ActionDecide))
}

// discountRoutes are staff's routes of promotions and voucher templates.
func discountRoutes(r chi.Router, d Deps, a string) {
	r.Method(http.MethodPost, a+"/merchants/{id}/promotions", promotion.HandleCreate(d.Promotions, d.Idempotency))
	r.Method(http.MethodGet, a+"/merchants/{id}/promotions", promotion.HandleList(d.Promotions))
	r.Method(http.MethodGet, a+"/promotions/{id}", promotion.HandleGet(d.Promotions))
	r.Method(http.MethodPatch, a+"/promotions/{id}", promotion.HandleUpdate(d.Promotions))
	r.Method(http.MethodPost, a+"/voucher-templates", voucher.HandleCreateTemplate(d.Vouchers, d.Idempotency))
	r.Method(http.MethodGet, a+"/voucher-templates", voucher.HandleListTemplates(d.Vouchers))
	r.Method(http.MethodGet, a+"/voucher-templates/{id}", voucher.HandleGetTemplate(d.Vouchers))
	r.Method(http.MethodPatch, a+"/voucher-templates/{id}", voucher.HandleUpdateTemplate(d.Vouchers))
}

// callbackRoutes are the providers' callbacks: never rate limited, and
// every refusal, an oversized body and a malformed query string included,
// in the provider's shape; each checked by its signature.
func callbackRoutes(r chi.Router, d Deps) {
	r.Method(http.MethodPost, "/v1/payments/wechat/notify", payment.HandleNotifyV3(d.Payments, d.MaxBodyBytes))
	r.Method(http.MethodPost, "/v1/payments/wechat/notify/v2", payment.HandleNotifyV2(d.Payments, d.MaxBodyBytes))
	r.Method(http.MethodPost, "/v1/printers/{provider}/callback", printing.HandleCallback(d.Printing, d.MaxBodyBytes))
	r.Method(http.MethodPost, "/v1/couriers/{provider}/callback", courier.HandleCallback(d.Couriers, d.MaxBodyBytes))
}

// courierRoutes are staff's routes of courier dispatch.
func courierRoutes(r chi.Router, d Deps, a string) {
	r.Method(http.MethodPut, a+"/merchants/{id}/courier", courier.HandleSetDispatch(d.Pool))
	r.Method(http.MethodGet, a+"/deliveries", courier.HandleList(d.Couriers))
}

// printingRoutes are staff's routes of printers and print tickets.
func printingRoutes(r chi.Router, d Deps, a string) {
	r.Method(http.MethodPost, a+"/merchants/{id}/printers", printing.HandleCreatePrinter(d.Printing, d.Idempotency))
	r.Method(http.MethodGet, a+"/merchants/{id}/printers", printing.HandleListPrinters(d.Printing))
	r.Method(http.MethodPatch, a+"/printers/{id}", printing.HandleUpdatePrinter(d.Printing))
	r.Method(http.MethodGet, a+"/prints", printing.HandleList(d.Printing))
	r.Method(http.MethodPost, a+"/prints/{id}/reprint", printing.HandleReprint(d.Printing, d.Idempotency))
}
