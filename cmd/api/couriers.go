package main

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/statemachine"
)

// lateOrders is the order service the couriers move orders with, given
// once it is built: the order service is built with the couriers (its
// effects call them), and they with it.
type lateOrders struct{ s *order.Service }

// ApplyTx implements courier.OrderMover.
func (l *lateOrders) ApplyTx(ctx context.Context, tx pgx.Tx, orderID int64, event statemachine.Event, actor order.Actor, reason string) (order.Applied, error) {
	return l.s.ApplyTx(ctx, tx, orderID, event, actor, reason)
}

// buildCouriers builds the courier side (a.couriers) with the providers
// configured, in the order of TAKEOUT_COURIER_ORDER, and returns what the
// order service calls of it (nil when no provider is on: no order goes to
// a courier) and the order service's place for it to move orders with.
func (a *app) buildCouriers(inserter *jobs.Client) (order.Couriers, *lateOrders, error) {
	cfg := a.cfg
	hc := a.client(cfg.CourierTimeout)
	var providers []courier.Provider
	for _, name := range strings.Split(cfg.CourierOrder, ",") {
		switch {
		case name == "dada" && cfg.DadaEnabled():
			providers = append(providers, &courier.Dada{Base: cfg.DadaAPIBase, AppKey: cfg.DadaAppKey, AppSecret: string(cfg.DadaAppSecret),
				SourceID: cfg.DadaSourceID, ShopNo: cfg.DadaShopNo, CityCode: "0755", HTTP: hc, Now: time.Now})
		case name == "meituan" && cfg.MeituanEnabled():
			providers = append(providers, &courier.Meituan{Base: cfg.MeituanAPIBase, AppKey: cfg.MeituanAppKey, AppSecret: string(cfg.MeituanAppSecret),
				ShopID: cfg.MeituanShopID, HTTP: hc, Now: time.Now})
		}
	}
	orders := &lateOrders{}
	s, err := courier.NewService(courier.Options{
		Pool: a.pool, Jobs: inserter, Orders: orders, Events: a.hub, Redis: a.rds, Providers: providers,
		CallbackBase: strings.TrimRight(cfg.CourierCallbackBase, "/"), AssignWithin: cfg.CourierAssignWithin, TipFen: cfg.CourierTipFen,
		LateAfter: cfg.CourierLateAfter, MaxAttempts: cfg.CourierMaxAttempts, QuoteTTL: cfg.CourierQuoteTTL,
		// A try makes at most a few calls (quote, place, a second quote
		// and place, a query) and a few cancels a second apart.
		PlaceLease: 10*cfg.CourierTimeout + 10*time.Second,
		Logger:     a.logger, Registerer: a.reg, Now: time.Now,
	})
	if err != nil {
		return nil, nil, err
	}
	a.couriers = s
	if !s.Enabled() {
		return nil, orders, nil
	}
	return s, orders, nil
}

// courierJobs registers the couriers' workers and sweep, when any
// provider is on.
func (a *app) courierJobs(workers *river.Workers, kinds []string, periodic []*river.PeriodicJob) ([]string, []*river.PeriodicJob) {
	if !a.couriers.Enabled() {
		return kinds, periodic
	}
	a.couriers.AddWorkers(workers)
	return append(kinds, courier.Kinds()...), append(periodic, jobs.Sweep(a.cfg.CourierSweepInterval, func() river.JobArgs { return courier.SweepArgs{} }, true))
}
