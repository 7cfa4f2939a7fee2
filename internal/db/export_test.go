package db

import "context"

// ApplyLiveCode installs the files of db/functions that changed, as Up
// does after the migrations.
func (m *Migrator) ApplyLiveCode(ctx context.Context) error { return m.applyLiveCode(ctx) }
