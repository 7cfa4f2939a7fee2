// Command gendiagram writes the order state diagram, generated from the
// transition table, between the markers in README.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/takeout/takeout/internal/statemachine"
)

const (
	begin = "<!-- BEGIN statemachine diagram (go generate ./internal/statemachine) -->"
	end   = "<!-- END statemachine diagram -->"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendiagram:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := os.ReadFile(path) //nolint:gosec // G304: go generate names the README
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the diagram markers", path)
	}
	out := s[:i] + begin + "\n```mermaid\n" + statemachine.Mermaid() + "```\n" + s[j:]
	return os.WriteFile(path, []byte(out), 0o644) //nolint:gosec // G306: the README is a public file
}
