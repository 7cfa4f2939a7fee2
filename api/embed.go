// Package api embeds the OpenAPI description of takeout, api/openapi.yaml,
// so that tests validate every response against it.
package api

import _ "embed"

// OpenAPI is the contents of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
