// Command wxsim is the WeChat simulator for development and tests (see
// package wxsim), with the cloud printers' simulator (package printsim)
// under /yilianyun, /feie and /printsim, and the courier providers'
// (package couriersim) under /dada, /meituan and /couriersim. It listens on TAKEOUT_WXSIM_ADDR and accepts the app id
// and secret the API is configured with.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/couriersim"
	"github.com/takeout/takeout/internal/printsim"
	"github.com/takeout/takeout/internal/wxsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wxsim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.LoadWxsim(getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	keys, err := wxsim.LoadOrCreateKeys(cfg.Dir, cfg.MchID)
	if err != nil {
		return fmt.Errorf("TAKEOUT_WXSIM_DIR: %w", err)
	}
	sim := wxsim.New(cfg.AppID, string(cfg.AppSecret)).WithPayments(wxsim.PayOptions{
		MchID: cfg.MchID, MerchantKey: &keys.Merchant.PublicKey, PlatformKey: keys.Platform,
		PlatformSerial: keys.PlatformSerial, APIv3Key: keys.APIv3Key, Client: &http.Client{Timeout: 5 * time.Second}, Now: time.Now,
	})
	// The cloud printers' simulator shares the process and the address.
	printers := printsim.New(printsim.Options{
		YilianyunClientID: wxsim.YilianyunClientID, YilianyunSecret: keys.PrinterSecret, YilianyunCallbackURL: cfg.YilianyunCallbackURL,
		FeieUser: wxsim.FeieUser, FeieUKey: keys.PrinterSecret, FeieKey: keys.Feie, Client: &http.Client{Timeout: 5 * time.Second}, Now: time.Now,
	})
	// So does the courier providers' (package couriersim).
	couriers := couriersim.New(couriersim.Options{
		DadaAppKey: wxsim.DadaAppKey, DadaAppSecret: keys.CourierSecret, DadaSourceID: "73753",
		MeituanAppKey: wxsim.MeituanAppKey, MeituanAppSecret: keys.CourierSecret, MeituanCallbackURL: cfg.MeituanCallbackURL,
		Step: cfg.CourierStep, Client: &http.Client{Timeout: 5 * time.Second}, Now: time.Now,
	})
	defer couriers.Close()
	mux := http.NewServeMux()
	mux.Handle("/dada/", couriers)
	mux.Handle("/meituan/", couriers)
	mux.Handle("/couriersim/", couriers)
	mux.Handle("/yilianyun/", printers)
	mux.Handle("/feie/", printers)
	mux.Handle("/printsim/", printers)
	mux.Handle("/", sim)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("TAKEOUT_WXSIM_ADDR: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("wxsim listening", "addr", ln.Addr().String(), "appid", cfg.AppID, "mchid", cfg.MchID,
		"api_config", cfg.Dir+"/api.env (source it before starting the API)")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
