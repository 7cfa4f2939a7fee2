// Package migrations holds the SQL schema migrations, embedded into the
// binary so that `api migrate` and start-up need no files on disk.
package migrations

import "embed"

// FS holds every goose migration file of this directory.
//
//go:embed *.sql
var FS embed.FS
