package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/takeout/takeout/internal/lab"
)

// postgres is the soak's private PostgreSQL cluster: it must be restarted
// during the run, which no one should do to a shared server.
type postgres struct {
	bin, data string
	port      int
	runAs     []string // runuser -u postgres -- when we are root
	logFile   string
}

func startPostgres(ctx context.Context, binDir, dir string, maxConns int) (*postgres, error) {
	port, err := lab.FreePort()
	if err != nil {
		return nil, err
	}
	p := &postgres{bin: binDir, data: filepath.Join(dir, "pg"), port: port, logFile: filepath.Join(dir, "pg", "server.log")}
	if err := os.MkdirAll(p.data, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to own the soak cluster: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for d := p.data; d != filepath.Dir(dir); d = filepath.Dir(d) {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := p.cmd(ctx, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	// fsync off is safe here: the soak crashes PostgreSQL, never the
	// machine, and the WAL reaches the kernel on every commit. Commits stay
	// synchronous: an acknowledged order must survive a crash.
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nmax_connections = %d\n"+
		"fsync = off\nfull_page_writes = off\nshared_buffers = 128MB\n", port, p.data, maxConns)
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	return p, p.start(ctx)
}

func (p *postgres) cmd(ctx context.Context, tool string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, p.runAs...), filepath.Join(p.bin, tool)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // G204: the soak's own server binaries
	// From the data directory (the postgres user's), not from the
	// checkout, which that user may not be allowed to enter.
	cmd.Dir = p.data
	return cmd
}

func (p *postgres) start(ctx context.Context) error {
	if out, err := p.cmd(ctx, "pg_ctl", "-D", p.data, "-l", p.logFile, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s (log: %s)", err, out, p.logFile)
	}
	return nil
}

// crashRestart stops the server the way a crash does (immediate: no
// checkpoint, every connection cut, recovery on start) and starts it again.
func (p *postgres) crashRestart(ctx context.Context, down time.Duration) error {
	if out, err := p.cmd(ctx, "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	time.Sleep(down)
	return p.start(ctx)
}

func (p *postgres) stop() {
	_ = p.cmd(context.Background(), "pg_ctl", "-D", p.data, "-m", "fast", "-w", "stop").Run()
}

func (p *postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// redisServer is the soak's private Redis, a child process so that it can
// be SIGKILLed.
type redisServer struct {
	dir  string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server not found: run `make services` (it installs it)")
	}
	port, err := lab.FreePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{dir: filepath.Join(dir, "redis"), port: port}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	return r, r.start(ctx)
}

func (r *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *redisServer) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.CommandContext(ctx, "redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", //nolint:gosec // G204: fixed arguments
		"--appendonly", "no", "--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd = cmd
	go func() { _ = cmd.Wait() }()
	return lab.WaitTCP(ctx, r.addr(), 10*time.Second)
}

// kill SIGKILLs the server: every key is gone (no persistence).
func (r *redisServer) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		r.cmd = nil
	}
}

// proxies puts toxiproxy (as a library) between the API instances and
// PostgreSQL and Redis, for latency, black holes and connection resets.
// With the HA stack, each PostgreSQL member and each Redis node has a
// proxy of its own, and a fault acts on all of one engine's at once.
type proxies struct {
	server     *toxiproxy.ApiServer
	pg, redis  []*toxiproxy.Proxy
	toxicMutex sync.Mutex
}

func newProxies() *proxies {
	return &proxies{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
}

func startProxies(pgUpstream, redisUpstream string) (*proxies, error) {
	px := newProxies()
	if _, err := px.addPG(pgUpstream); err != nil {
		return nil, err
	}
	if _, err := px.addRedis(redisUpstream); err != nil {
		return nil, err
	}
	return px, nil
}

// addPG starts a proxy to a PostgreSQL server and returns its address.
func (px *proxies) addPG(upstream string) (string, error) {
	p, err := startProxy(px.server, fmt.Sprintf("postgres-%d", len(px.pg)+1), upstream)
	if err != nil {
		return "", err
	}
	px.pg = append(px.pg, p)
	return p.Listen, nil
}

// addRedis starts a proxy to a Redis server and returns its address.
func (px *proxies) addRedis(upstream string) (string, error) {
	p, err := startProxy(px.server, fmt.Sprintf("redis-%d", len(px.redis)+1), upstream)
	if err != nil {
		return "", err
	}
	px.redis = append(px.redis, p)
	return p.Listen, nil
}

// addrs are the proxies' addresses, in list's order.
func addrs(list []*toxiproxy.Proxy) []string {
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = p.Listen
	}
	return out
}

// stop stops every proxy.
func (px *proxies) stop() {
	for _, p := range append(slices.Clone(px.pg), px.redis...) {
		p.Stop()
	}
}

func startProxy(srv *toxiproxy.ApiServer, name, upstream string) (*toxiproxy.Proxy, error) {
	port, err := lab.FreePort()
	if err != nil {
		return nil, err
	}
	p := toxiproxy.NewProxy(srv, name, fmt.Sprintf("127.0.0.1:%d", port), upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy %s: %w", name, err)
	}
	return p, nil
}

// toxic adds a toxic to every proxy of ps for d, then removes it. cut
// also drops every connection open through them when the toxic goes on,
// so that pooled connections meet it too.
func (px *proxies) toxic(ctx context.Context, ps []*toxiproxy.Proxy, spec string, d time.Duration, cut bool) error {
	px.toxicMutex.Lock()
	defer px.toxicMutex.Unlock()
	names := make([]string, len(ps))
	for i, p := range ps {
		t, err := p.Toxics.AddToxicJson(strings.NewReader(spec))
		if err != nil {
			return fmt.Errorf("toxic %s: %w", spec, err)
		}
		names[i] = t.Name
		if cut {
			p.Stop()
			if err := p.Start(); err != nil {
				return err
			}
		}
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	var errs []error
	for i, p := range ps {
		if err := p.Toxics.RemoveToxic(context.WithoutCancel(ctx), names[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		if cut {
			// Connections that sat in a black hole are useless; drop them.
			p.Stop()
			errs = append(errs, p.Start())
		}
	}
	return errors.Join(errs...)
}

// instance is one running api process, always on the same port.
type instance struct {
	n       int
	addr    string
	ops     string // its operations listener (metrics, pprof)
	bin     string
	env     []string
	logPath string
	mu      sync.Mutex
	proc    *lab.Process
}

func (in *instance) baseURL() string { return "http://" + in.addr }

// start runs the instance and waits until /readyz answers 200.
func (in *instance) start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	p, err := lab.Start(ctx, in.logPath, in.bin, in.env, "serve")
	if err != nil {
		return err
	}
	in.proc = p
	return lab.WaitHTTP(ctx, in.baseURL()+"/readyz", p.Exited(), 90*time.Second)
}

// take hands over the running process, if any, to stop or kill it.
func (in *instance) take() *lab.Process {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.proc
	in.proc = nil
	return p
}

// kill SIGKILLs the process: no graceful shutdown, in-flight requests and
// transactions are cut.
func (in *instance) kill() {
	if p := in.take(); p != nil {
		p.Kill()
	}
}

// stop asks for a graceful shutdown.
func (in *instance) stop() {
	if p := in.take(); p != nil {
		p.Stop(30 * time.Second)
	}
}

// gateway is the load balancer in front of the instances for the payment
// platform's callbacks (their notify URL must not name one instance): it
// sends each request to a random instance and tries another when that one
// does not accept the connection.
type gateway struct {
	instances []*instance
	srv       *http.Server
	url       string
}

func startGateway(instances []*instance) (*gateway, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gateway{instances: instances, url: "http://" + ln.Addr().String()}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	order := rand.Perm(len(g.instances))
	for _, i := range order {
		target, _ := url.Parse(g.instances[i].baseURL())
		failed := false
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.ErrorLog = log.New(io.Discard, "", 0)
		rp.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { failed = true }
		rec := &bufferedResponse{header: http.Header{}}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(strings.NewReader(string(body)))
		r2.ContentLength = int64(len(body))
		rp.ServeHTTP(rec, r2)
		if failed {
			continue
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
		return
	}
	http.Error(w, "no instance answered", http.StatusBadGateway)
}

// bufferedResponse holds an upstream answer until the gateway knows the
// attempt succeeded.
type bufferedResponse struct {
	header http.Header
	status int
	body   []byte
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(s int)   { b.status = s }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.body = append(b.body, p...)
	return len(p), nil
}
