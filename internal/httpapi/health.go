package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/web"
)

func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		web.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready    bool   `json:"ready"`
	Postgres string `json:"postgres"`
	// PostgresServer is the server this instance writes to, as it names
	// itself (address:port): with a multi-host URL, the current primary.
	PostgresServer string          `json:"postgres_server,omitempty"`
	Migrations     MigrationStatus `json:"migrations"`
	// Constraints lists the problems with the required unique constraints;
	// empty when all are present and valid.
	Constraints []string `json:"constraints"`
	// Redis is up, partial (a cluster with masters missing), down or
	// disabled; takeout is ready without it.
	Redis string `json:"redis"`
	// RedisMode is standalone, cluster, sentinel or disabled.
	RedisMode string `json:"redis_mode"`
	// RedisMastersDown counts the cluster masters that missed the last
	// health check.
	RedisMastersDown int `json:"redis_masters_down"`
	// RedisBreaker is the idempotency layer's circuit breaker: closed
	// (using Redis), open (PostgreSQL alone) or half-open (probing).
	RedisBreaker string `json:"redis_breaker"`
}

// MigrationStatus compares the database's schema with the binary's.
type MigrationStatus struct {
	Current int64 `json:"current"`
	Target  int64 `json:"target"`
}

// handleReadyz reports 200 when PostgreSQL answers, the schema is current
// and the required constraints are valid; Redis is reported, not
// required.
func handleReadyz(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		res := Readiness{
			Postgres: "up", Redis: string(d.Redis.State()), RedisMode: string(d.Redis.Mode()), RedisMastersDown: d.Redis.MastersDown(),
			RedisBreaker: d.Idempotency.BreakerState(), Constraints: []string{},
		}
		ready := true
		if server, err := db.ServerName(ctx, d.Pool); err != nil {
			res.Postgres, ready = "down", false
		} else {
			res.PostgresServer = server
		}
		if ready {
			cur, target, err := d.Migrator.Versions(ctx)
			res.Migrations = MigrationStatus{Current: cur, Target: target}
			if err != nil || cur != target {
				ready = false
			}
			problems, err := db.ConstraintProblems(ctx, d.Pool)
			if err != nil {
				problems = []string{"check failed: " + err.Error()}
			}
			if len(problems) > 0 {
				res.Constraints, ready = problems, false
			}
		}
		res.Ready = ready
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "5")
		}
		web.JSON(w, status, res)
	}
}
