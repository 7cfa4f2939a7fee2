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
