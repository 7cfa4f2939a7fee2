package main

import (
	"strings"
	"testing"
)

// The pgbench scripts bind every parameter of the service's own queries:
// a query that gains a parameter fails here, not in the middle of a
// bench run.
func TestPgbenchScriptsBindTheServicesQueries(t *testing.T) {
	t.Parallel()
	queries, err := namedQueries("../../db/queries")
	if err != nil {
		t.Fatal(err)
	}
	submit, err := submitScript(queries, 7, []int64{1, 2})
	if err != nil {
		t.Fatalf("submit script: %v", err)
	}
	callback, err := callbackScript(queries, "1900000109")
	if err != nil {
		t.Fatalf("callback script: %v", err)
	}
	for name, script := range map[string]string{"submit": submit, "callback": callback} {
		if strings.Contains(script, "@") || strings.Contains(script, "sqlc.") {
			t.Errorf("%s script has an unbound parameter:\n%s", name, script)
		}
	}
}
