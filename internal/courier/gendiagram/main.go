// Command gendiagram writes the delivery state diagram, generated from
// the courier package's table, between the markers in docs/delivery.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/takeout/takeout/internal/courier"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendiagram:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := os.ReadFile(path) //nolint:gosec // G304: go generate names the document
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, courier.DiagramBegin), strings.Index(s, courier.DiagramEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the diagram markers", path)
	}
	out := s[:i] + courier.DiagramBegin + "\n```mermaid\n" + courier.Mermaid() + "```\n" + s[j:]
	return os.WriteFile(path, []byte(out), 0o644) //nolint:gosec // G306: a public document
}
