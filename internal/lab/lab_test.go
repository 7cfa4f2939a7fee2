package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A tool names its binaries relative to the checkout (bin/api); the
// process runs from its log's directory, and must still be the one named.
func TestStartResolvesARelativeBinary(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho started in \"$(pwd)\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "hello"), []byte(script), 0o755); err != nil { //nolint:gosec // G306: an executable
		t.Fatal(err)
	}
	t.Chdir(dir)
	logPath := filepath.Join(dir, "logs", "hello.log")
	p, err := Start(context.Background(), logPath, filepath.Join("bin", "hello"), nil)
	if err != nil {
		t.Fatalf("Start with a relative binary: %v", err)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		p.Kill()
		t.Fatal("the process did not exit")
	}
	got, err := os.ReadFile(logPath) //nolint:gosec // G304: the test's own file
	if err != nil {
		t.Fatal(err)
	}
	if want := "started in " + filepath.Join(dir, "logs") + "\n"; string(got) != want {
		t.Errorf("log = %q, want %q", got, want)
	}
}
