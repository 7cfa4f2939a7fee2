package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/lab"
)

// Patroni is a PostgreSQL cluster kept available by Patroni: members
// replicating from the leader with synchronous replication
// (synchronous_mode), on an etcd cluster of three members.
type Patroni struct {
	dir     string
	etcd    []*etcdMember
	members []*pgMember
	runAs   []string // runuser -u postgres -- when we are root
	client  *http.Client
}

type etcdMember struct {
	name, dir      string
	client, peer   int
	initialCluster string
	mu             sync.Mutex
	proc           *lab.Process
}

type pgMember struct {
	name, dir, config string
	port, api         int
	mu                sync.Mutex
	proc              *lab.Process
}

func (m *pgMember) apiURL() string { return "http://127.0.0.1:" + strconv.Itoa(m.api) }

// PatroniOptions configure StartPatroni.
type PatroniOptions struct {
	Dir     string // everything goes here; as root, the postgres user must reach it
	PGBin   string // PostgreSQL server programs (lab.PGBinDir when empty)
	Members int    // PostgreSQL members, at least 2
	// MaxConnections of each member.
	MaxConnections int
}

// StartPatroni starts three etcd members and opts.Members Patroni
// members, and waits until a leader accepts writes and every replica
// streams from it.
func StartPatroni(ctx context.Context, opts PatroniOptions) (*Patroni, error) {
	for _, tool := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: run `make ha` once (it installs patroni and etcd-server)", tool)
		}
	}
	pgBin, err := lab.PGBinDir(opts.PGBin)
	if err != nil {
		return nil, err
	}
	if opts.Members < 2 {
		opts.Members = 3
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 300
	}
	p := &Patroni{dir: opts.Dir, client: &http.Client{Timeout: 3 * time.Second}}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return p, err
	}
	if err := p.startEtcd(ctx); err != nil {
		return p, err
	}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if err := chownToPostgres(opts.Dir); err != nil {
			return p, err
		}
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	for i := range opts.Members {
		port, err := lab.FreePort()
		if err != nil {
			return p, err
		}
		api, err := lab.FreePort()
		if err != nil {
			return p, err
		}
		m := &pgMember{name: "pg" + strconv.Itoa(i+1), port: port, api: api}
		m.dir = filepath.Join(opts.Dir, m.name)
		m.config = filepath.Join(opts.Dir, m.name+".yml")
		if err := os.WriteFile(m.config, []byte(p.memberConfig(m, pgBin, opts.MaxConnections)), 0o644); err != nil { //nolint:gosec // G306: read by the postgres user
			return p, err
		}
		p.members = append(p.members, m)
	}
	// The first member bootstraps the cluster alone; the others then
	// clone it, so that none races it for the initialize key.
	if err := p.members[0].start(ctx, p.runAs, opts.Dir); err != nil {
		return p, err
	}
	if _, err := p.WaitPrimary(ctx, 90*time.Second); err != nil {
		return p, err
	}
	for _, m := range p.members[1:] {
		if err := m.start(ctx, p.runAs, opts.Dir); err != nil {
			return p, err
		}
	}
	return p, p.WaitHealthy(ctx, 120*time.Second)
}

func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres user to own the Patroni members: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
		if filepath.Dir(d) == os.TempDir() || strings.HasSuffix(filepath.Dir(d), "/.dev") {
			break
		}
	}
	return nil
}

func (p *Patroni) startEtcd(ctx context.Context) error {
	var peers []string
	for i := range 3 {
		c, err := lab.FreePort()
		if err != nil {
			return err
		}
		pp, err := lab.FreePort()
		if err != nil {
			return err
		}
		e := &etcdMember{name: "etcd" + strconv.Itoa(i+1), client: c, peer: pp}
		e.dir = filepath.Join(p.dir, e.name)
		p.etcd = append(p.etcd, e)
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", e.name, pp))
	}
	for _, e := range p.etcd {
		e.initialCluster = strings.Join(peers, ",")
		if err := e.start(ctx); err != nil {
			return err
		}
	}
	for _, e := range p.etcd {
		if err := lab.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", e.client), nil, 30*time.Second); err != nil {
			return fmt.Errorf("etcd %s: %w", e.name, err)
		}
	}
	return nil
}

func (e *etcdMember) start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", e.client)
	peer := fmt.Sprintf("http://127.0.0.1:%d", e.peer)
	proc, err := lab.Start(ctx, e.dir+".log", "etcd", nil,
		"--name", e.name, "--data-dir", e.dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", e.initialCluster, "--initial-cluster-state", "new",
		"--initial-cluster-token", "takeout-ha", "--heartbeat-interval", "100", "--election-timeout", "1000")
	if err != nil {
		return err
	}
	e.proc = proc
	return nil
}

// RestartEtcd SIGKILLs a random etcd member, waits a second and starts it
// again on its data: the other two keep a quorum meanwhile.
func (p *Patroni) RestartEtcd(ctx context.Context) (string, error) {
	e := p.etcd[rand.IntN(len(p.etcd))] //nolint:gosec // G404: picks a member
	e.mu.Lock()
	if e.proc != nil {
		e.proc.Kill()
		e.proc = nil
	}
	e.mu.Unlock()
	sleep(ctx, time.Second)
	if err := e.start(context.WithoutCancel(ctx)); err != nil {
		return e.name, err
	}
	return e.name, lab.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", e.client), nil, 30*time.Second)
}

// memberConfig is a member's Patroni configuration. The timings are
// tighter than Patroni's defaults (ttl 30, loop_wait 10) so that a
// failover takes seconds, not half a minute, on a loopback network.
func (p *Patroni) memberConfig(m *pgMember, pgBin string, maxConns int) string {
	var hosts []string
	for _, e := range p.etcd {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", e.client))
	}
	return fmt.Sprintf(`scope: takeout
name: %[1]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: %[3]s
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: %[7]d
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        # A killed primary rejoins by pg_rewind from its last checkpoint
        # before the fork: frequent checkpoints and WAL kept long enough
        # that the new primary still has what the rewound member replays.
        wal_keep_size: 2GB
        checkpoint_timeout: 60s
        # fsync off is safe here: faults kill processes, never the machine,
        # and the WAL reaches the kernel on every commit.
        fsync: "off"
        full_page_writes: "on"
        shared_buffers: 128MB
  initdb:
    - encoding: UTF8
    - locale: C
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[6]s
  pgpass: %[5]s.pgpass
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: %[8]s
`, m.name, m.api, strings.Join(hosts, ","), m.port, m.dir, pgBin, maxConns, p.dir)
}

func (m *pgMember) start(ctx context.Context, runAs []string, dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	argv := append(append([]string{}, runAs...), "patroni", m.config)
	proc, err := lab.StartGroup(ctx, filepath.Join(dir, m.name+".log"), argv[0], nil, argv[1:]...)
	if err != nil {
		return err
	}
	m.proc = proc
	return nil
}

// kill SIGKILLs the member's Patroni and its PostgreSQL, every backend
// included, at once, as on a host that lost power. Patroni starts the
// postmaster in a session of its own (so that PostgreSQL outlives a
// Patroni crash) and each backend calls setsid too, so neither process
// group holds them all: the postmaster's children are found by their
// parent. They are all stopped (SIGSTOP) before any is killed: a backend
// that outlived its postmaster by a moment would stop waiting for the
// synchronous standby and show its commit to the others, a commit the
// standby may not have, which no power cut does.
func (m *pgMember) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	frozen := m.freezePostgres()
	if m.proc != nil {
		m.proc.KillGroup()
		m.proc = nil
	}
	for _, pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// crashPostgres SIGKILLs the member's PostgreSQL, every backend included,
// and leaves its Patroni running: a crash of the database alone, which
// Patroni meets by starting it again (crash recovery) while it holds the
// leader key.
func (m *pgMember) crashPostgres() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	frozen := m.freezePostgres()
	if len(frozen) == 0 {
		return fmt.Errorf("%s: no postmaster to crash", m.name)
	}
	for _, pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// freezePostgres stops (SIGSTOP) the member's postmaster and its children
// and returns their pids.
func (m *pgMember) freezePostgres() []int {
	var frozen []int
	if raw, err := os.ReadFile(filepath.Join(m.dir, "postmaster.pid")); err == nil {
		first, _, _ := strings.Cut(string(raw), "\n")
		if pm, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pm > 1 {
			// A stopped postmaster forks no more children.
			_ = syscall.Kill(pm, syscall.SIGSTOP)
			frozen = append(frozen, pm)
			for _, c := range childrenOf(pm) {
				_ = syscall.Kill(c, syscall.SIGSTOP)
				frozen = append(frozen, c)
			}
		}
	}
	return frozen
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")) //nolint:gosec // G304: /proc
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so read after ')'.
		_, rest, ok := strings.Cut(string(stat), ") ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) > 1 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				out = append(out, n)
			}
		}
	}
	return out
}

// URL is the multi-host TAKEOUT_DATABASE_URL of the cluster: libpq's (and
// pgx's) target_session_attrs=read-write picks whichever member is the
// primary, on every new connection. connect_timeout (per member) must
// leave a loaded server time to accept: at 2 s, the reconnects of every
// pool after a failover took longer than that on the soak's saturated 2
// cores, each abandoned attempt still cost the new primary a backend, and
// the storm kept it unreachable for a minute after its promotion.
func (p *Patroni) URL(db string) string {
	var hosts []string
	for _, m := range p.members {
		hosts = append(hosts, "127.0.0.1:"+strconv.Itoa(m.port))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5", strings.Join(hosts, ","), db)
}

// MemberURL is the URL of one member by name (the checker reads the
// primary directly).
func (p *Patroni) MemberURL(name, db string) string {
	for _, m := range p.members {
		if m.name == name {
			return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", m.port, db)
		}
	}
	return ""
}

// memberStatus is one member in Patroni's GET /cluster.
type memberStatus struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
	Lag   any    `json:"lag"`
}

// Members asks any live member's REST API for the cluster's members.
func (p *Patroni) Members(ctx context.Context) ([]memberStatus, error) {
	var last error
	for _, m := range p.members {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.apiURL()+"/cluster", nil)
		if err != nil {
			return nil, err
		}
		resp, err := p.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		var body struct {
			Members []memberStatus `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		return body.Members, nil
	}
	return nil, fmt.Errorf("no patroni member answered: %w", last)
}

// Primary names the member that is the leader, running.
func (p *Patroni) Primary(ctx context.Context) (string, error) {
	ms, err := p.Members(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return m.Name, nil
		}
	}
	return "", errors.New("no running leader")
}

// WaitPrimary waits until a connection through URL can write, and names
// the member that took it.
func (p *Patroni) WaitPrimary(ctx context.Context, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		name, err := p.writable(ctx)
		if err == nil {
			return name, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no writable primary within %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writable connects through the multi-host URL and commits a write.
func (p *Patroni) writable(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, p.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var port int
	if err := conn.QueryRow(cctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		return "", err
	}
	// A write that commits needs the synchronous standby too: this is
	// the moment orders can be placed again.
	if _, err := conn.Exec(cctx, "SELECT txid_current()"); err != nil {
		return "", err
	}
	for _, m := range p.members {
		if m.port == port {
			return m.name, nil
		}
	}
	return strconv.Itoa(port), nil
}

// WaitHealthy waits for a running leader and every other member
// streaming, one of them as the synchronous standby.
func (p *Patroni) WaitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := p.healthy(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("patroni cluster not healthy within %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (p *Patroni) healthy(ctx context.Context) error {
	ms, err := p.Members(ctx)
	if err != nil {
		return err
	}
	var leader, sync, streaming int
	for _, m := range ms {
		switch {
		case m.Role == "leader" && m.State == "running":
			leader++
		case m.Role == "sync_standby" && (m.State == "streaming" || m.State == "running"):
			sync++
			streaming++
		case m.Role == "replica" && (m.State == "streaming" || m.State == "running"):
			streaming++
		}
	}
	if leader != 1 || sync < 1 || streaming != len(p.members)-1 {
		return fmt.Errorf("members %+v: want one running leader, a sync standby and every other member streaming", ms)
	}
	_, err = p.writable(ctx)
	return err
}

// KillPrimary SIGKILLs the primary's Patroni and PostgreSQL together, as
// a host crash would, and waits until a writable primary is back (the
// synchronous standby, promoted once the leader key expires). It then
// starts the old member again, which rejoins as a replica (pg_rewind when
// its timeline diverged), and waits until the cluster is whole. It
// returns the killed member and the seconds without a writable primary.
func (p *Patroni) KillPrimary(ctx context.Context) (string, time.Duration, error) {
	name, err := p.Primary(ctx)
	if err != nil {
		return "", 0, err
	}
	m := p.member(name)
	killed := time.Now()
	m.kill()
	newPrimary, werr := p.WaitPrimary(ctx, 90*time.Second)
	gap := time.Since(killed)
	if err := m.start(context.WithoutCancel(ctx), p.runAs, p.dir); err != nil {
		return name, gap, err
	}
	if werr != nil {
		return name, gap, werr
	}
	if newPrimary == name {
		return name, gap, fmt.Errorf("%s is primary again: no failover happened", name)
	}
	return name, gap, p.WaitHealthy(ctx, rejoinWithin)
}

// CrashPrimaryPostgres SIGKILLs the primary's PostgreSQL alone (its
// Patroni lives on and starts it again, recovering from its WAL) and
// waits until a writable primary is back and the cluster is whole. It
// returns the member and the seconds without a writable primary.
func (p *Patroni) CrashPrimaryPostgres(ctx context.Context) (string, time.Duration, error) {
	name, err := p.Primary(ctx)
	if err != nil {
		return "", 0, err
	}
	crashed := time.Now()
	if err := p.member(name).crashPostgres(); err != nil {
		return name, 0, err
	}
	_, err = p.WaitPrimary(ctx, 90*time.Second)
	gap := time.Since(crashed)
	if err != nil {
		return name, gap, err
	}
	return name, gap, p.WaitHealthy(ctx, rejoinWithin)
}

// MemberAddrs are the members' PostgreSQL addresses, in URL's order.
func (p *Patroni) MemberAddrs() []string {
	var out []string
	for _, m := range p.members {
		out = append(out, "127.0.0.1:"+strconv.Itoa(m.port))
	}
	return out
}

// rejoinWithin bounds how long a member that was killed or switched away
// may take to stream again. It first replays (after pg_rewind) the WAL
// since its last checkpoint before the fork: several hundred megabytes
// under the soak's write load, which took a killed primary 2 min 3 s on
// the saturated 2-core soak machine.
const rejoinWithin = 5 * time.Minute

// Switchover asks Patroni for a planned switchover from the primary to
// its synchronous standby, and waits until the new primary takes
// writes. It returns "old -> new" and the seconds without a writable
// primary.
func (p *Patroni) Switchover(ctx context.Context) (string, time.Duration, error) {
	ms, err := p.Members(ctx)
	if err != nil {
		return "", 0, err
	}
	var leader, candidate string
	for _, m := range ms {
		switch m.Role {
		case "leader":
			leader = m.Name
		case "sync_standby":
			candidate = m.Name
		}
	}
	if leader == "" || candidate == "" {
		return "", 0, fmt.Errorf("switchover needs a leader and a sync standby: %+v", ms)
	}
	body, _ := json.Marshal(map[string]string{"leader": leader, "candidate": candidate})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.member(leader).apiURL()+"/switchover", bytes.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	started := time.Now()
	// Patroni answers once the switchover is done: seconds, not the
	// REST client's usual few.
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("switchover: %w", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("switchover: %s: %s", resp.Status, msg)
	}
	desc := leader + " -> " + candidate
	if _, err := p.WaitPrimary(ctx, 60*time.Second); err != nil {
		return desc, time.Since(started), err
	}
	gap := time.Since(started)
	return desc, gap, p.WaitHealthy(ctx, rejoinWithin)
}

func (p *Patroni) member(name string) *pgMember {
	for _, m := range p.members {
		if m.name == name {
			return m
		}
	}
	return p.members[0]
}

// Stop stops every member (Patroni stops its PostgreSQL) and etcd.
func (p *Patroni) Stop() {
	for _, m := range p.members {
		m.mu.Lock()
		if m.proc != nil {
			m.proc.Stop(20 * time.Second)
		}
		m.mu.Unlock()
		m.kill()
	}
	for _, e := range p.etcd {
		e.mu.Lock()
		if e.proc != nil {
			e.proc.Stop(5 * time.Second)
			e.proc = nil
		}
		e.mu.Unlock()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
