// Package functions holds the database's live code: every function,
// trigger and view, one file each, written as CREATE OR REPLACE so that
// applying a file again installs the body it holds. db.Migrator applies
// them after the migrations (which keep only tables, indexes and data
// moves), at start and by `api migrate`; db/schema.sql shows what is
// installed.
package functions

import "embed"

// FS holds every file of this directory that defines database code.
//
//go:embed *.sql
var FS embed.FS
