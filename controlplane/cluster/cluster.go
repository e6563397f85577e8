// Package cluster starts a real Kubernetes control plane for tests: etcd and kube-apiserver,
// built from their Go modules by controlplane/build.sh, on loopback (free ports, a temporary
// directory), with a token file for the admin, RBAC authorization, a service-account key pair
// (so that TokenRequest mints tokens) and its own CA and serving certificate. It installs
// MCM's CRDs from MCM's module, applies manifests server-side, and hands out rest.Configs:
// the admin's, and one per service account (a token from TokenRequest), authorized by RBAC
// only.
//
// Every process is started on a goroutine locked to its OS thread with a parent-death
// signal, in its own process group: Stop (or the test process's own death) ends them.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// EnvBinDir names the directory of the etcd and kube-apiserver binaries, overriding the cache
// directory build.sh builds into.
const EnvBinDir = "CONTROLPLANE_BIN_DIR"

// Options configure Start.
type Options struct {
	// BinDir holds etcd and kube-apiserver; DefaultBinDir() when empty.
	BinDir string
	// ReadyTimeout bounds the wait for etcd and for the API server's /readyz (default 90 s).
	ReadyTimeout time.Duration
	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string
	// Etcd, when set, is the client URL of a running etcd (another Cluster's EtcdURL) that
	// this API server stores into instead of starting an etcd of its own; give it an
	// EtcdPrefix of its own so that the two clusters share no key.
	Etcd string
	// EtcdPrefix is kube-apiserver's --etcd-prefix (its default, /registry, when empty).
	EtcdPrefix string
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// URL is the API server's https URL on loopback.
	URL string
	// Admin is the admin's config (a token of the group system:masters).
	Admin *rest.Config
	// Dir is the temporary directory of data, certificates and logs (removed by Stop).
	Dir string
	// EtcdURL is the client URL of the etcd this API server stores into.
	EtcdURL string

	caPEM    []byte
	procs    []*process // started order; stopped in reverse
	stopOnce sync.Once
	stopErr  error
}

// DefaultBinDir is $CONTROLPLANE_BIN_DIR, or where build.sh builds the versions pinned in
// controlplane/binaries/go.mod: ${MACHINE_DRIVER_CACHE:-$HOME/.cache/machine-driver}/controlplane/<k8s>-etcd-<etcd>.
func DefaultBinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate controlplane/binaries/go.mod")
	}
	gomod, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "binaries", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading controlplane/binaries/go.mod: %w", err)
	}
	k8s, err := required(gomod, "k8s.io/kubernetes")
	if err != nil {
		return "", err
	}
	etcd, err := required(gomod, "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", err
	}
	cache := os.Getenv("MACHINE_DRIVER_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "machine-driver")
	}
	return filepath.Join(cache, "controlplane", k8s+"-etcd-"+etcd), nil
}

func required(gomod []byte, module string) (string, error) {
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`)
	m := re.FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("controlplane/binaries/go.mod requires no %s", module)
	}
	return string(m[1]), nil
}

// BinariesPresent tells whether dir holds both executables.
func BinariesPresent(dir string) bool {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Start starts etcd and kube-apiserver and returns once /readyz answers ok. On error
// everything started is stopped again. A process that exits before it is ready (e.g. a port
// of freePorts taken by another process in between, when clusters start side by side) is
// retried twice, on new ports.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	var err error
	for range 3 {
		var c *Cluster
		if c, err = start(ctx, o); err == nil || !errors.Is(err, errExitedEarly) || ctx.Err() != nil {
			return c, err
		}
	}
	return nil, err
}

// errExitedEarly marks a process that exited before it answered ready.
var errExitedEarly = errors.New("exited before it was ready")

func start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.BinDir == "" {
		if o.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if !BinariesPresent(o.BinDir) {
		return nil, fmt.Errorf("no etcd and kube-apiserver in %s (run controlplane/build.sh)", o.BinDir)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	dir, err := os.MkdirTemp("", "controlplane-")
	if err != nil {
		return nil, err
	}
	// started, not c: a `return nil, err` has set c to nil before this runs.
	started := &Cluster{Dir: dir}
	c = started
	defer func() {
		if err != nil {
			if logs := started.LogTail(40); logs != "" {
				err = fmt.Errorf("%w\n%s", err, logs)
			}
			_ = started.Stop()
			c = nil
		}
	}()

	pki, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	c.caPEM = pki.caPEM
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := o.Etcd
	if etcdClient == "" {
		etcdClient = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		etcd, err := startProcess(dir, "etcd", nil, filepath.Join(o.BinDir, "etcd"),
			"--name=controlplane",
			"--data-dir="+filepath.Join(dir, "etcd"),
			"--listen-client-urls="+etcdClient,
			"--advertise-client-urls="+etcdClient,
			"--listen-peer-urls="+etcdPeer,
			"--initial-advertise-peer-urls="+etcdPeer,
			"--initial-cluster=controlplane="+etcdPeer,
			"--unsafe-no-fsync",
			"--log-level=warn",
		)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, etcd)
		if err := waitHTTP(ctx, etcd, http.DefaultClient, etcdClient+"/health", o.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
	}
	c.EtcdURL = etcdClient

	c.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	args := []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPublic,
		"--service-account-signing-key-file=" + pki.saPrivate,
		"--service-cluster-ip-range=10.96.0.0/24",
		// No endpoints for the kubernetes Service: its address would be loopback, which
		// Endpoints refuse; nothing here reaches the API server through the Service.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=1",
	}
	if o.EtcdPrefix != "" {
		args = append(args, "--etcd-prefix="+o.EtcdPrefix)
	}
	apiserver, err := startProcess(dir, "kube-apiserver", nil, filepath.Join(o.BinDir, "kube-apiserver"), append(args, o.ExtraAPIServerArgs...)...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, apiserver)
	c.Admin = &rest.Config{
		Host:            c.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
		QPS:             100,
		Burst:           200,
	}
	httpClient, err := rest.HTTPClientFor(c.Admin)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, apiserver, httpClient, c.URL+"/readyz", o.ReadyTimeout); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	return c, nil
}

// AdminClient is a typed clientset for the admin.
func (c *Cluster) AdminClient() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.Admin)
}

// CAData is the PEM of the CA that signed the API server's serving certificate.
func (c *Cluster) CAData() []byte { return append([]byte(nil), c.caPEM...) }

// Stop ends the API server, then etcd when it started one (SIGTERM, SIGKILL after 10 s), and
// removes Dir. Stop a cluster that shares another's etcd (Options.Etcd) before that one.
// It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for i := len(c.procs) - 1; i >= 0; i-- {
			if err := c.procs[i].stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if c.Dir != "" {
			errs = append(errs, os.RemoveAll(c.Dir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Pids are the process ids of the running processes (etcd unless shared, kube-apiserver).
func (c *Cluster) Pids() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.pid)
	}
	return pids
}

// LogTail is the last n lines of each process's log (empty once Stop removed them).
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		data, err := os.ReadFile(p.log)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s (last %d lines of %s)\n%s\n", p.name, len(lines), p.log, strings.Join(lines, "\n"))
	}
	return b.String()
}

func randomToken() (string, error) {
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(buf), nil
}

// handedOut are the ports FreePort and freePorts gave out in this process. A port is released
// between the moment it is picked and the moment its process binds it; the kernel may pick it
// again for the next caller meanwhile (seen with five providers' fleets starting side by side:
// a sidecar's metrics port went to another process, whose /healthz then answered for it). So
// no port is handed out twice in one process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort is a free loopback port that no earlier FreePort or Start of this process got.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts reserves n distinct loopback ports (held together so that none repeats, then
// released), none of them handed out before in this process.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	var ports []int
	var releases []func()
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no loopback port that was not handed out before after %d tries", tries)
		}
		port, release, err := pickPort()
		if err != nil {
			return nil, err
		}
		releases = append(releases, release) // held: the kernel picks another for the next try
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// pickPort is a port the kernel picks on loopback, held until release (a variable for tests).
var pickPort = func() (port int, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	return l.Addr().(*net.TCPAddr).Port, func() { _ = l.Close() }, nil
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func waitHTTP(ctx context.Context, p *process, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: %s did not answer: %v", errExitedEarly, url, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %s", url, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
