package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/testenv"
)

func cmpIgnore(fields ...string) cmp.Option {
	return cmpopts.IgnoreFields(catalog.Merchant{}, fields...)
}

func testenvEmptyDB(t *testing.T) string { return testenv.NewEmptyDatabaseURL(t) }
