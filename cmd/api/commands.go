package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/redisconn"
)

// migrate applies pending migrations and reports the schema version.
func migrate(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2, db.Limits{})
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := db.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer m.Close()
	applied, err := m.Up(ctx)
	if err != nil {
		return err
	}
	cur, _, err := m.Versions(ctx)
	if err != nil {
		return err
	}
	if err := db.CheckConstraints(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied: %v; schema version %d; required constraints valid\n", applied, cur)
	return nil
}

// demoMerchant is the name seed-demo looks for, so that it runs once.
const demoMerchant = "Takeout Demo Kitchen"

// seedDemo creates the demo merchant and its menu unless it exists, and
// prints the merchant's id.
func seedDemo(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2, db.Limits{})
	if err != nil {
		return err
	}
	defer pool.Close()
	q := dbsqlc.New()
	id, err := db.WithTxV(ctx, pool, func(tx pgx.Tx) (int64, error) {
		// Serialise concurrent seeders so that the check-then-insert holds.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('takeout.seed-demo'))"); err != nil {
			return 0, err
		}
		m, err := q.MerchantGetByName(ctx, tx, demoMerchant)
		if err == nil {
			return m.ID, nil
		}
		if !errors.Is(err, db.ErrNotFound) {
			return 0, err
		}
		m, err = q.MerchantInsert(ctx, tx, dbsqlc.MerchantInsertParams{Name: demoMerchant, Status: "open", DeliveryFeeFen: 300, MinOrderFen: 2000})
		if err != nil {
			return 0, err
		}
		return m.ID, seedDemoMenu(ctx, tx, q, m.ID)
	})
	if err != nil {
		return fmt.Errorf("seed demo: %w", err)
	}
	fmt.Fprintln(stdout, id)
	return nil
}

// seedDemoMenu writes the demo merchant's menu: two categories, dishes
// with packaging fees, and one dish with options (a required size and
// spice, optional extras).
func seedDemoMenu(ctx context.Context, tx pgx.Tx, q *dbsqlc.Queries, merchantID int64) error {
	var cats [2]int64
	for i, name := range []string{"Mains", "Rice and Soup"} {
		c, err := q.CategoryInsert(ctx, tx, dbsqlc.CategoryInsertParams{MerchantID: merchantID, Name: name, Position: int32(i + 1)}) //nolint:gosec // G115: two
		if err != nil {
			return err
		}
		cats[i] = c.ID
	}
	type choice struct {
		name  string
		delta int64
	}
	type group struct {
		name     string
		min, max int32
		choices  []choice
	}
	for _, d := range []struct {
		dbsqlc.DishInsertParams
		category int
		stock    int32
		options  []group
	}{
		{dbsqlc.DishInsertParams{Name: "Kung Pao Chicken", PriceFen: 3200, OnSale: true, PackagingFeeFen: 100}, 0, 100, []group{
			{"Size", 1, 1, []choice{{"Regular", 0}, {"Large", 600}}},
			{"Spice", 1, 1, []choice{{"Mild", 0}, {"Medium", 0}, {"Fiery", 0}}},
			{"Extras", 0, 2, []choice{{"Peanuts", 200}, {"Fried egg", 300}}},
		}},
		{dbsqlc.DishInsertParams{Name: "Mapo Tofu", PriceFen: 2200, OnSale: true, PackagingFeeFen: 100}, 0, 100, nil},
		{dbsqlc.DishInsertParams{Name: "Egg Fried Rice", PriceFen: 1500, OnSale: true, PackagingFeeFen: 50}, 1, 200, nil},
		{dbsqlc.DishInsertParams{Name: "Hot and Sour Soup", PriceFen: 1200, OnSale: true, PackagingFeeFen: 50}, 1, 50, nil},
		{dbsqlc.DishInsertParams{Name: "Peking Duck (half)", PriceFen: 8800, OnSale: false, PackagingFeeFen: 200}, 0, 10, nil},
	} {
		d.MerchantID, d.CategoryID = merchantID, &cats[d.category]
		id, err := q.DishInsert(ctx, tx, d.DishInsertParams)
		if err != nil {
			return err
		}
		if _, err := inventory.Restock(ctx, tx, id, inventory.Change{SetOnHand: &d.stock, Opening: true, Actor: "seed-demo"}); err != nil {
			return err
		}
		for gi, g := range d.options {
			gid, err := q.OptionGroupInsert(ctx, tx, dbsqlc.OptionGroupInsertParams{DishID: id, Name: g.name, Position: int32(gi), MinChoices: g.min, MaxChoices: g.max}) //nolint:gosec // G115: three
			if err != nil {
				return err
			}
			for ci, c := range g.choices {
				if _, err := q.OptionChoiceInsert(ctx, tx, dbsqlc.OptionChoiceInsertParams{GroupID: gid, Name: c.name, Position: int32(ci), PriceDeltaFen: c.delta, Available: true}); err != nil { //nolint:gosec // G115: three
					return err
				}
			}
		}
	}
	return nil
}

// token prints a staff token for an operator or merchant staff member.
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roleFlag := fs.String("role", "", "admin or merchant:ID")
	subject := fs.String("subject", "", "who the token is for (shown in logs)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	role, err := auth.ParseRole(*roleFlag)
	if err != nil {
		return err
	}
	if *subject == "" {
		return errors.New("token: -subject is required")
	}
	if *ttl <= 0 || *ttl > auth.MaxStaffTTL {
		return errors.New("token: -ttl must be between 1s and 2160h")
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	tokens := auth.NewTokens(cfg.SessionSecret.Bytes(), cfg.StaffSecret.Bytes(), cfg.SessionTTL, time.Now)
	tok, id, exp, err := tokens.IssueStaffWithID(*subject, role, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "token id %s, expires %s (revoke: api token revoke -id %s)\n", id, exp.Format(time.RFC3339), id)
	return nil
}

// revokeToken revokes a token by id or as itself: stored in the database,
// announced over Redis when it is configured (else every instance picks
// it up at its next reload, TAKEOUT_REVOCATION_RELOAD_INTERVAL).
func revokeToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "the token's id (as api token printed it)")
	tok := fs.String("token", "", "the token itself")
	by := fs.String("by", "cli", "who revokes it (kept with the revocation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*id == "") == (*tok == "") {
		return errors.New("token revoke: give -id or -token")
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2, db.Limits{})
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := newLogger(cfg, stderr, nil)
	rds, err := redisconn.New(redisconn.Options{URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, Logger: logger})
	if err != nil {
		return fmt.Errorf("TAKEOUT_REDIS_URL: %w", err)
	}
	defer rds.Close()
	tokens := auth.NewTokens(cfg.SessionSecret.Bytes(), cfg.StaffSecret.Bytes(), cfg.SessionTTL, time.Now)
	rv, err := tokens.RevocationOf(*tok, *id)
	if err != nil {
		return err
	}
	rv.By = *by
	if err := auth.NewRevocations(pool, rds, logger).Revoke(ctx, rv); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s (%s %s, until %s)\n", rv.TokenID, rv.Kind, rv.Subject, rv.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}
