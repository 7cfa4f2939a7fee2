// Command api is the takeout REST service. `api serve` (the default) runs
// it; `api migrate` applies the schema; `api seed-demo` creates the demo
// merchant; `api token` mints a staff token for operators.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	// Merchants' hours are in their own time zones: the zone database goes
	// with the binary, so a host without tzdata still knows them.
	_ "time/tzdata"

	"github.com/redis/go-redis/v9"
)

// redisLogger adapts slog to go-redis's logging interface.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

func main() {
	// go-redis reports pool dial failures through a package-level logger;
	// route it into the JSON logs (only here: run may be called many times).
	redis.SetLogger(redisLogger{slog.New(slog.NewJSONHandler(os.Stderr, nil))})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

const usage = `usage: api [command]

commands:
  serve       run the HTTP service (default)
  migrate     apply pending schema migrations and exit
  seed-demo   create the demo merchant and menu (idempotent) and print its id
  token       print a staff token: api token -role admin|merchant:ID -subject NAME [-ttl 24h]
              (its id goes to stderr, for revoking it)
  token revoke  revoke a token on every instance: api token revoke -id ID | -token TOKEN

Configuration comes from TAKEOUT_* environment variables (see README.md).
`

// run is the whole program, testable: args without the program name, the
// environment through getenv, output to stdout and logs to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, getenv, stdout, stderr)
	case "migrate":
		return migrate(ctx, getenv, stdout, stderr)
	case "seed-demo":
		return seedDemo(ctx, getenv, stdout, stderr)
	case "token":
		if len(args) > 0 && args[0] == "revoke" {
			return revokeToken(ctx, args[1:], getenv, stdout, stderr)
		}
		return token(args, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
