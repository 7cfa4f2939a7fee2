package courier

//go:generate go run ./gendiagram ../../docs/delivery.md

// The markers around the generated diagram in docs/delivery.md.
const (
	DiagramBegin = "<!-- BEGIN delivery diagram (go generate ./internal/courier) -->"
	DiagramEnd   = "<!-- END delivery diagram -->"
)
