// Command ha runs takeout's highly available stack on this machine for
// development and demos: a Redis Cluster of three masters with a replica
// each, and three PostgreSQL members managed by Patroni (synchronous
// replication) on three etcd members, all under .dev/ha. It creates the
// takeout database, writes the URLs the API needs to .dev/ha/env, prints
// them, and runs until Ctrl-C, when it stops everything.
//
//	make ha        # this, in one terminal
//	make run-ha    # the API and wxsim on it, in another
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/lab/ha"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ha:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ha", flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(".dev", "ha"), "where the servers keep their data and logs (emptied first)")
	members := fs.Int("members", 3, "PostgreSQL members (2 or 3)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return err
	}
	rc, err := ha.StartRedisCluster(ctx, filepath.Join(abs, "redis"), 3, 1)
	if rc != nil {
		defer rc.Stop()
	}
	if err != nil {
		return err
	}
	pat, err := ha.StartPatroni(ctx, ha.PatroniOptions{Dir: filepath.Join(abs, "pg"), Members: *members})
	if pat != nil {
		defer pat.Stop()
	}
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pat.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE takeout")
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("create database takeout: %w", err)
	}
	primary, err := pat.Primary(ctx)
	if err != nil {
		return err
	}
	env := fmt.Sprintf("export TAKEOUT_DATABASE_URL='%s'\nexport TAKEOUT_REDIS_URL='%s'\n", pat.URL("takeout"), rc.URL())
	envPath := filepath.Join(abs, "env")
	if err := os.WriteFile(envPath, []byte(env), 0o600); err != nil {
		return err
	}
	defer os.Remove(envPath) // the stack it names is going away
	fmt.Fprintf(stdout, "HA stack up (PostgreSQL primary %s, synchronous replication; Redis Cluster %d nodes).\n%s\n"+
		"Written to %s; `make run-ha` runs the API on it. Logs under %s. Ctrl-C stops everything.\n",
		primary, len(rc.Addrs()), env, envPath, abs)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping the HA stack")
	return nil
}
