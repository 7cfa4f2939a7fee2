package testenv

import (
	"os"
	"regexp"
	"testing"
)

// make run keeps its orders and payments in the private PostgreSQL that
// scripts/dev/services.sh starts: it must be durable, so the options it
// starts the server with turn none of PostgreSQL's durability off.
func TestPrivatePostgreSQLIsDurable(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../../scripts/dev/services.sh")
	if err != nil {
		t.Fatal(err)
	}
	start := regexp.MustCompile(`pg_ctl" .* start[^\n]*\n[^\n]*-o "([^"]*)"`).FindSubmatch(script)
	if start == nil {
		t.Fatal("no pg_ctl start with -o options in scripts/dev/services.sh")
	}
	for _, off := range regexp.MustCompile(`-c (fsync|full_page_writes|synchronous_commit)=off`).FindAll(start[1], -1) {
		t.Errorf("make run's PostgreSQL starts with %s: an acknowledged order could be lost to a power cut", off)
	}
}
