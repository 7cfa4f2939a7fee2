package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FreePort asks the kernel for a free loopback port. A tool keeps each of
// its servers on one port for a whole run, so that a restart comes back
// where the clients expect it.
func FreePort() (int, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as a loopback host:port.
func FreeAddr() (string, error) {
	p, err := FreePort()
	return fmt.Sprintf("127.0.0.1:%d", p), err
}

// Process is a started child process whose output goes to a log file.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs bin with args and env (KEY=value), appending its output to
// logPath (a restarted server keeps one log), from logPath's directory:
// a process started as another user must be able to read it.
func Start(ctx context.Context, logPath, bin string, env []string, args ...string) (*Process, error) {
	return start(ctx, false, logPath, bin, env, args)
}

// StartGroup is Start with the process leading a process group of its
// own, so that KillGroup takes its children with it: a server that
// forks (Patroni and its PostgreSQL) dies as a whole host would.
func StartGroup(ctx context.Context, logPath, bin string, env []string, args ...string) (*Process, error) {
	return start(ctx, true, logPath, bin, env, args)
}

func start(ctx context.Context, group bool, logPath, bin string, env, args []string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // G304: the tool's work directory
	if err != nil {
		return nil, err
	}
	// A binary named by a relative path is ours: the process starts in
	// another directory (below), where that path means nothing.
	if strings.ContainsRune(bin, filepath.Separator) && !filepath.IsAbs(bin) {
		if bin, err = filepath.Abs(bin); err != nil {
			logf.Close()
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the binaries the tool was given
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
	// The process runs from its log's directory, not from ours: one run
	// as another user (runuser -u postgres) could not enter a checkout
	// only its owner may (Patroni's workers chdir to it, and fail).
	cmd.Dir = filepath.Dir(logPath)
	if group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop asks for a graceful shutdown (SIGTERM) and kills the process if it
// has not exited within grace.
func (p *Process) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Kill SIGKILLs the process, with no graceful shutdown: in-flight
// requests and transactions are cut.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// KillGroup SIGKILLs the process and every process of its group (see
// StartGroup), and waits for the leader to exit.
func (p *Process) KillGroup() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// WaitHTTP polls url until it answers 200, the process behind it exits
// (exited, if not nil, is closed), ctx ends or within passes.
func WaitHTTP(ctx context.Context, url string, exited <-chan struct{}, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s: the server exited before it answered", url)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s", url, within)
		}
	}
}

// WaitTCP waits until something accepts connections on addr.
func WaitTCP(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not accept connections within %s: %w", addr, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Response is an answer as a tool reads it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call sends a request as takeout's clients do: body (when not nil) as
// JSON, token (when not "") as a bearer token, and the extra header
// fields; it reads at most 1 MiB of the answer.
func Call(ctx context.Context, client *http.Client, method, url, token string, body any, header map[string]string) (Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}
