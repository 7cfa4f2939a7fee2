package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/takeout/takeout/internal/config"
)

func secrets() map[string]string {
	return map[string]string{
		"TAKEOUT_SESSION_SECRET":    strings.Repeat("s", 32),
		"TAKEOUT_STAFF_SECRET":      strings.Repeat("a", 32),
		"TAKEOUT_WECHAT_APP_SECRET": "app",
		"TAKEOUT_CONFIRM_SECRET":    strings.Repeat("c", 32),
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	env := secrets()
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:8080" || cfg.RedisURL != "" || !cfg.MigrateOnStart || cfg.SessionTTL != 24*time.Hour || cfg.MaxBodyBytes != 65536 {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestSecretFromFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "staff")
	if err := os.WriteFile(path, []byte(strings.Repeat("f", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := secrets()
	delete(env, "TAKEOUT_STAFF_SECRET")
	env["TAKEOUT_STAFF_SECRET_FILE"] = path
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.StaffSecret) != strings.Repeat("f", 40) {
		t.Errorf("staff secret from file: %d bytes", len(cfg.StaffSecret))
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	env := secrets()
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{cfg.SessionSecret.String(), cfg.StaffSecret.String()} {
		if strings.Contains(s, "sss") || strings.Contains(s, "aaa") {
			t.Errorf("secret printed as %q", s)
		}
	}
}

// Every problem is reported at once, so an operator fixes them in one go.
func TestAllProblemsReported(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TAKEOUT_HTTP_IDLE_TIMEOUT": "x", "TAKEOUT_DATABASE_MAX_CONNS": "1"}
	_, err := config.Load(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("loaded without secrets")
	}
	for _, want := range []string{"TAKEOUT_HTTP_IDLE_TIMEOUT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	env = map[string]string{"TAKEOUT_DATABASE_MAX_CONNS": "1"}
	_, err = config.Load(func(k string) string { return env[k] })
	for _, want := range []string{"TAKEOUT_DATABASE_MAX_CONNS", "TAKEOUT_SESSION_SECRET", "TAKEOUT_STAFF_SECRET", "TAKEOUT_WECHAT_APP_SECRET"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// Every variable the configuration declares is documented in the README.
func TestREADMEListsEveryVariable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []any{&config.Config{}, &config.Wxsim{}} {
		params, err := env.GetFieldParams(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range params {
			if !strings.Contains(string(readme), "`"+p.Key+"`") {
				t.Errorf("README.md does not document %s", p.Key)
			}
		}
	}
}

// TAKEOUT_ENV=production refuses the development defaults, naming each
// variable; a complete production configuration starts, and development
// (the default) starts on the defaults as before.
func TestProductionRefusesDevelopmentDefaults(t *testing.T) {
	t.Parallel()
	env := secrets()
	env["TAKEOUT_ENV"] = "production"
	_, err := config.Load(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("production started on the development defaults")
	}
	for _, want := range []string{
		"TAKEOUT_WECHAT_API_BASE", "TAKEOUT_WXPAY_API_BASE", "TAKEOUT_WXPAY_NOTIFY_URL", "TAKEOUT_WECHAT_APPID", "TAKEOUT_WXPAY_MCHID",
		"TAKEOUT_WXPAY_MERCHANT_KEY", "TAKEOUT_WXPAY_APIV3_KEY", "TAKEOUT_SESSION_SECRET", "TAKEOUT_STAFF_SECRET", "TAKEOUT_CONFIRM_SECRET",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s:\n%v", want, err)
		}
	}

	random := func(tail string) string { return "Zq8vN3kLp0Wm7Rt2Xy5Bc9Hd4Jf6Gs1" + tail }
	prod := map[string]string{
		"TAKEOUT_ENV":                   "production",
		"TAKEOUT_SESSION_SECRET":        random("a1"),
		"TAKEOUT_STAFF_SECRET":          random("b2"),
		"TAKEOUT_CONFIRM_SECRET":        random("c3"),
		"TAKEOUT_WECHAT_APP_SECRET":     random("d4"),
		"TAKEOUT_WECHAT_API_BASE":       "https://api.weixin.qq.com",
		"TAKEOUT_WECHAT_APPID":          "wx8888888888888888",
		"TAKEOUT_WXPAY_API_BASE":        "https://api.mch.weixin.qq.com",
		"TAKEOUT_WXPAY_NOTIFY_URL":      "https://takeout.example.com/v1/payments/wechat/notify",
		"TAKEOUT_WXPAY_MCHID":           "1230000109",
		"TAKEOUT_WXPAY_MERCHANT_SERIAL": "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		"TAKEOUT_WXPAY_MERCHANT_KEY":    "-----BEGIN PRIVATE KEY-----",
		"TAKEOUT_WXPAY_PLATFORM_KEYS":   "PUB_KEY_ID_1=/etc/takeout/platform.pem",
		"TAKEOUT_WXPAY_APIV3_KEY":       "Zq8vN3kLp0Wm7Rt2Xy5Bc9Hd4Jf6Gs1Q",
	}
	if _, err := config.Load(func(k string) string { return prod[k] }); err != nil {
		t.Errorf("a production configuration was refused: %v", err)
	}
	for name, value := range map[string]string{
		"TAKEOUT_WECHAT_API_BASE":  "http://api.weixin.qq.com",
		"TAKEOUT_WXPAY_API_BASE":   "https://127.0.0.1:8090",
		"TAKEOUT_WXPAY_NOTIFY_URL": "https://localhost/notify",
		"TAKEOUT_STAFF_SECRET":     "my-staff-secret-for-the-shop-2026",
	} {
		bad := map[string]string{}
		for k, v := range prod {
			bad[k] = v
		}
		bad[name] = value
		if _, err := config.Load(func(k string) string { return bad[k] }); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want a refusal naming it", name, value, err)
		}
	}
}

// Tracing's settings: a trusted list of prefixes and addresses parses;
// an unknown exporter or a malformed entry is refused, naming the
// variable.
func TestTracingSettings(t *testing.T) {
	t.Parallel()
	env := secrets()
	env["OTEL_TRACES_EXPORTER"] = "console"
	env["TAKEOUT_TRACE_TRUSTED_NETS"] = "10.0.0.0/8, 127.0.0.1,::1"
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	nets, err := cfg.TrustedNets()
	if err != nil || len(nets) != 3 || nets[0].String() != "10.0.0.0/8" || nets[1].String() != "127.0.0.1/32" || nets[2].String() != "::1/128" {
		t.Errorf("trusted nets %v, %v", nets, err)
	}
	for name, bad := range map[string]map[string]string{
		"OTEL_TRACES_EXPORTER":       {"OTEL_TRACES_EXPORTER": "jaeger"},
		"TAKEOUT_TRACE_TRUSTED_NETS": {"TAKEOUT_TRACE_TRUSTED_NETS": "10.0.0.0/8,gateway"},
		"OTEL_BSP_SCHEDULE_DELAY":    {"OTEL_BSP_SCHEDULE_DELAY": "0"},
	} {
		env := secrets()
		for k, v := range bad {
			env[k] = v
		}
		if _, err := config.Load(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v does not name %s", bad, err, name)
		}
	}
}

// Live orders' settings: the templates parse by status; a bad entry, an
// unknown status, a status named twice and out-of-range values are
// refused naming the variable.
func TestLiveOrderSettings(t *testing.T) {
	t.Parallel()
	env := secrets()
	env["TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES"] = "ACCEPTED=tplA, REFUNDED=tpl-R_2"
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, err := cfg.SubscribeTemplateMap()
	if err != nil || len(m) != 2 || m["ACCEPTED"] != "tplA" || m["REFUNDED"] != "tpl-R_2" {
		t.Errorf("templates %v, %v", m, err)
	}
	for name, bad := range map[string]map[string]string{
		"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES":   {"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": "PAID=tpl"},
		"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES ":  {"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": "ACCEPTED=a,ACCEPTED=b"},
		"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES  ": {"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": "ACCEPTED"},
		"TAKEOUT_WECHAT_MINIPROGRAM_STATE":     {"TAKEOUT_WECHAT_MINIPROGRAM_STATE": "beta"},
		"TAKEOUT_STAFF_LOGIN_TTL":              {"TAKEOUT_STAFF_LOGIN_TTL": "2400h"},
		"TAKEOUT_LOGIN_LIMIT_ACCOUNT":          {"TAKEOUT_LOGIN_LIMIT_ACCOUNT": "-1"},
		"TAKEOUT_STREAM_BUFFER":                {"TAKEOUT_STREAM_BUFFER": "0"},
		"TAKEOUT_ORDER_EVENTS_RETENTION":       {"TAKEOUT_ORDER_EVENTS_RETENTION": "10m"},
	} {
		env := secrets()
		for k, v := range bad {
			env[k] = v
		}
		if _, err := config.Load(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(name)) {
			t.Errorf("%v: error %v does not name %s", bad, err, name)
		}
	}
}

// The group commit slots of placements and of payments each hold a pooled
// connection while their group commits: together they must leave the
// pool one for everything else, or the rest of the api waits on them.
func TestGroupCommitSlotsLeaveAConnection(t *testing.T) {
	t.Parallel()
	env := secrets()
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseGroupCommitSlots != 1 || cfg.DatabasePaymentGroupSlots != 2 {
		t.Errorf("slots: placements %d, payments %d; want 1 and 2", cfg.DatabaseGroupCommitSlots, cfg.DatabasePaymentGroupSlots)
	}
	for _, tc := range []struct {
		conns, placement, payment string
		ok                        bool
	}{
		{"4", "1", "2", true},
		{"3", "1", "2", false},
		{"4", "2", "2", false},
		{"6", "1", "0", false},
		{"6", "0", "1", false},
	} {
		env := secrets()
		env["TAKEOUT_DATABASE_MAX_CONNS"] = tc.conns
		env["TAKEOUT_DATABASE_GROUP_COMMIT_SLOTS"] = tc.placement
		env["TAKEOUT_DATABASE_PAYMENT_GROUP_SLOTS"] = tc.payment
		_, err := config.Load(func(k string) string { return env[k] })
		if tc.ok && err != nil {
			t.Errorf("pool %s, slots %s + %s: %v", tc.conns, tc.placement, tc.payment, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "SLOTS")) {
			t.Errorf("pool %s, slots %s + %s: error %v, want one naming the slots", tc.conns, tc.placement, tc.payment, err)
		}
	}
}
