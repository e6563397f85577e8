// Package supervise runs the machine driver as a child process of the
// machine-controller, for the image that replaces Gardener's
// machine-controller-manager-provider-<cloud> container (deploy/gardener.md):
//
//   - the driver's socket lives in a private directory (mode 0700) that only
//     this process and its child use; the directory is removed at the end;
//   - the driver is ready once it answers Probe (IdentityService) with
//     ready=true; WaitReady blocks until the first time it does;
//   - a driver that exits, or stops answering Probe, is (killed and) started
//     again with exponential backoff, while Healthy reports false with the
//     reason, so that /healthz tells the kubelet the container is unhealthy
//     only for as long as the driver is not back;
//   - Stop sends SIGTERM at once (a Probe in flight is cancelled, not waited
//     for), waits for the driver to finish its in-flight calls (its shutdown
//     grace), and kills it when it has not exited StopTimeout after Stop was
//     called: Stop returns within StopTimeout + 250 ms whatever the driver
//     does (hangs, ignores SIGTERM);
//   - each start gets its own loopback metrics address, MetricsURL, which the
//     controller scrapes to serve the driver's series on its own /metrics.
//
// The driver is started with its server flags as environment variables (the
// driver reads each flag from MACHINE_DRIVER_*; see server/src/config.rs):
// MACHINE_DRIVER_ENDPOINT, MACHINE_DRIVER_SOCKET_MODE (0600),
// MACHINE_DRIVER_METRICS_LISTEN and MACHINE_DRIVER_SHUTDOWN_GRACE are set by
// the supervisor; every other variable of the container's environment is passed
// on unchanged.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// Config says how to run the driver. Zero durations take the defaults named
// on each field.
type Config struct {
	// Binary is the driver's executable (an absolute path).
	Binary string
	// Args are extra arguments for the driver (none in the Gardener image).
	Args []string
	// SocketDir is where the private socket directory is created (default os.TempDir()).
	SocketDir string
	// ShutdownGrace is the driver's --shutdown-grace: how long its in-flight
	// calls may take after SIGTERM (default 3s).
	ShutdownGrace time.Duration
	// StopTimeout is how long Stop waits, from the moment it is called, for
	// the driver to exit after SIGTERM before it kills it (default
	// ShutdownGrace + 1s). Stop returns within StopTimeout + 250 ms (killWait).
	StopTimeout time.Duration
	// InitialBackoff is the wait before the first restart (default 1s); it
	// doubles with every restart up to MaxBackoff (default 30s), and is reset
	// once a driver has been ready for StableAfter (default 1m).
	InitialBackoff, MaxBackoff, StableAfter time.Duration
	// StartTimeout is how long a started driver may take to answer Probe
	// before it is killed and started again (default 1m).
	StartTimeout time.Duration
	// ProbeInterval is the period of Probe once the driver is ready (default
	// 5s); ProbeTimeout bounds each Probe (default 2s); after ProbeFailures
	// failures in a row (default 3) the driver is killed and started again.
	ProbeInterval, ProbeTimeout time.Duration
	ProbeFailures               int
	// Stdout and Stderr receive the driver's output (default os.Stdout, os.Stderr).
	Stdout, Stderr io.Writer
	// Env is the environment passed on to the driver (default os.Environ()).
	Env []string
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.SocketDir == "" {
		c.SocketDir = os.TempDir()
	}
	def(&c.ShutdownGrace, 3*time.Second)
	def(&c.StopTimeout, c.ShutdownGrace+time.Second)
	def(&c.InitialBackoff, time.Second)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.StableAfter, time.Minute)
	def(&c.StartTimeout, time.Minute)
	def(&c.ProbeInterval, 5*time.Second)
	def(&c.ProbeTimeout, 2*time.Second)
	if c.ProbeFailures <= 0 {
		c.ProbeFailures = 3
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
}

// The variables the supervisor sets for the driver, replacing any in Env.
const (
	envEndpoint      = "MACHINE_DRIVER_ENDPOINT"
	envSocketMode    = "MACHINE_DRIVER_SOCKET_MODE"
	envMetricsListen = "MACHINE_DRIVER_METRICS_LISTEN"
	envShutdownGrace = "MACHINE_DRIVER_SHUTDOWN_GRACE"
)

// startupProbePeriod is how often a started driver is probed until it is ready.
const startupProbePeriod = 200 * time.Millisecond

// killWait bounds the wait for a driver to be reaped after SIGKILL (a process
// in uninterruptible sleep can take longer; Stop returns anyway and the
// kernel kills it with the supervisor, Pdeathsig).
const killWait = 250 * time.Millisecond

// Supervisor runs one driver process at a time and restarts it when it dies.
type Supervisor struct {
	cfg    Config
	dir    string
	socket string

	stopping chan struct{} // closed by Stop
	// stopCtx is cancelled by Stop (before stopping is closed): every Probe
	// derives its context from it, so that a Probe in flight ends at once.
	stopCtx    context.Context
	cancelStop context.CancelFunc
	done       chan struct{} // closed when the run loop has ended
	ready      chan struct{} // closed the first time the driver is ready
	once       sync.Once

	mu          sync.Mutex
	healthy     bool
	reason      string
	pid         int
	metricsAddr string
	starts      int
	stopErr     error
	stopBy      time.Time // when Stop kills the driver (set by Stop before it cancels stopCtx)
}

// Start checks the binary, creates the private socket directory and starts
// the driver; it returns at once (see WaitReady).
func Start(cfg Config) (*Supervisor, error) {
	cfg.defaults()
	if !filepath.IsAbs(cfg.Binary) {
		return nil, fmt.Errorf("machine driver binary %q: must be an absolute path", cfg.Binary)
	}
	info, err := os.Stat(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("machine driver binary: %w", err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("machine driver binary %q is not an executable file", cfg.Binary)
	}
	dir, err := os.MkdirTemp(cfg.SocketDir, "machine-driver-")
	if err != nil {
		return nil, fmt.Errorf("private socket directory under %q (mount a writable volume there, or set --machine-driver-socket-dir): %w", cfg.SocketDir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("private socket directory %q: %w", dir, err)
	}
	socket := filepath.Join(dir, "driver.sock")
	// sun_path holds 108 bytes with the terminating NUL.
	if len(socket) > 107 {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("socket path %q is longer than a Unix socket allows (107 bytes): pick a shorter --machine-driver-socket-dir", socket)
	}
	stopCtx, cancelStop := context.WithCancel(context.Background())
	s := &Supervisor{
		cfg:        cfg,
		stopCtx:    stopCtx,
		cancelStop: cancelStop,
		dir:        dir,
		socket:     socket,
		stopping:   make(chan struct{}),
		done:       make(chan struct{}),
		ready:      make(chan struct{}),
		reason:     "machine driver starting",
	}
	go s.loop()
	return s, nil
}

// Socket is the absolute path of the driver's socket.
func (s *Supervisor) Socket() string { return s.socket }

// WaitReady blocks until the driver has answered Probe ready for the first
// time, ctx is done, or Stop was called.
func (s *Supervisor) WaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		why := s.reason
		s.mu.Unlock()
		return fmt.Errorf("machine driver not ready (%s): %w", why, ctx.Err())
	case <-s.stopping:
		return errors.New("machine driver stopped before it was ready")
	}
}

// Healthy tells whether the driver runs and answers Probe; when not, why.
func (s *Supervisor) Healthy() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthy, s.reason
}

// MetricsURL is the driver's current /metrics URL ("" while none runs).
func (s *Supervisor) MetricsURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metricsAddr == "" {
		return ""
	}
	return "http://" + s.metricsAddr + "/metrics"
}

// PID is the process id of the running driver (0 while none runs).
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Starts is how many times the driver was started (1 + restarts).
func (s *Supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// Stop sends SIGTERM to the driver and waits for it to exit, killing it when
// it has not exited StopTimeout after this call; it removes the private
// directory. It returns within StopTimeout + 250 ms (killWait). The error tells how
// the driver ended when that was not a clean exit: killed, or a non-zero
// status. Stop may be called more than once; later calls return the first
// result.
func (s *Supervisor) Stop() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopBy = time.Now().Add(s.cfg.StopTimeout)
		s.mu.Unlock()
		s.cancelStop()
		close(s.stopping)
	})
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopErr
}

func (s *Supervisor) set(healthy bool, reason string) {
	s.mu.Lock()
	changed := s.healthy != healthy
	s.healthy, s.reason = healthy, reason
	s.mu.Unlock()
	if healthy {
		select {
		case <-s.ready:
		default:
			close(s.ready)
		}
	}
	if changed && healthy {
		klog.Infof("machine driver ready (pid %d)", s.PID())
	} else if changed {
		klog.Warningf("machine driver not ready: %s", reason)
	}
}

func (s *Supervisor) loop() {
	// The driver gets SIGKILL when the thread that started it ends
	// (Pdeathsig): keep this goroutine on one thread for the driver's life.
	runtime.LockOSThread()
	defer close(s.done)
	defer func() { _ = os.RemoveAll(s.dir) }()
	backoff := s.cfg.InitialBackoff
	for {
		readyFor, stopped := s.runOnce()
		if stopped {
			return
		}
		if readyFor >= s.cfg.StableAfter {
			backoff = s.cfg.InitialBackoff
		}
		klog.Infof("restarting the machine driver in %s", backoff)
		select {
		case <-s.stopping:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

// runOnce starts the driver and watches it until it exits (or is killed);
// it returns how long the driver was ready, and whether Stop ended it.
func (s *Supervisor) runOnce() (readyFor time.Duration, stopped bool) {
	select {
	case <-s.stopping:
		return 0, true
	default:
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		s.set(false, fmt.Sprintf("no loopback port for the driver's metrics: %v", err))
		return 0, false
	}
	_ = os.Remove(s.socket) // a stale socket of a killed driver
	cmd := exec.Command(s.cfg.Binary, s.cfg.Args...)
	cmd.Env = append(without(s.cfg.Env, envEndpoint, envSocketMode, envMetricsListen, envShutdownGrace),
		envEndpoint+"=unix://"+s.socket,
		envSocketMode+"=0600",
		envMetricsListen+"="+addr,
		envShutdownGrace+"="+strconv.FormatInt(s.cfg.ShutdownGrace.Milliseconds(), 10)+"ms",
	)
	cmd.Stdout, cmd.Stderr = s.cfg.Stdout, s.cfg.Stderr
	// Wait must not block on output pipes a grandchild keeps open (a Writer
	// that is no *os.File is fed through a pipe).
	cmd.WaitDelay = killWait
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		s.set(false, fmt.Sprintf("starting %s: %v", s.cfg.Binary, err))
		return 0, false
	}
	s.mu.Lock()
	s.pid, s.metricsAddr = cmd.Process.Pid, addr
	s.starts++
	starts := s.starts
	s.mu.Unlock()
	klog.Infof("machine driver %s started (pid %d, start %d), socket %s", s.cfg.Binary, cmd.Process.Pid, starts, s.socket)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := func(err error) {
		s.mu.Lock()
		s.pid, s.metricsAddr = 0, ""
		s.mu.Unlock()
		s.set(false, fmt.Sprintf("machine driver exited: %s", describeExit(err)))
	}

	conn, err := grpc.NewClient("unix://"+s.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = cmd.Process.Kill()
		ended(<-exited)
		return 0, false
	}
	defer func() { _ = conn.Close() }()
	identity := pb.NewIdentityServiceClient(conn)

	stop := func() {
		s.set(false, "machine driver stopping")
		err := s.terminate(cmd, exited)
		s.mu.Lock()
		s.stopErr = err
		s.mu.Unlock()
	}
	started := time.Now()
	var readySince time.Time
	failures := 0
	timer := time.NewTimer(startupProbePeriod)
	defer timer.Stop()
	for {
		select {
		case err := <-exited:
			if !readySince.IsZero() {
				readyFor = time.Since(readySince)
			}
			ended(err)
			return readyFor, false
		case <-s.stopping:
			stop()
			return 0, true
		case <-timer.C:
		}
		err := s.probe(identity)
		if s.stopCtx.Err() != nil {
			// Stop was called during the Probe (which it cancelled): a
			// failure now says nothing about the driver.
			stop()
			return 0, true
		}
		switch {
		case err == nil:
			failures = 0
			if readySince.IsZero() {
				readySince = time.Now()
			}
			s.set(true, "")
		case readySince.IsZero() && time.Since(started) > s.cfg.StartTimeout:
			klog.Warningf("machine driver (pid %d) not ready after %s (%v): killing it", cmd.Process.Pid, s.cfg.StartTimeout, err)
			_ = cmd.Process.Kill()
		case !readySince.IsZero():
			failures++
			s.set(false, fmt.Sprintf("Probe failed %d time(s): %v", failures, err))
			if failures >= s.cfg.ProbeFailures {
				klog.Warningf("machine driver (pid %d) failed Probe %d times: killing it", cmd.Process.Pid, failures)
				_ = cmd.Process.Kill()
			}
		default:
			s.set(false, fmt.Sprintf("machine driver starting: %v", err))
		}
		if readySince.IsZero() {
			timer.Reset(startupProbePeriod)
		} else {
			timer.Reset(s.cfg.ProbeInterval)
		}
	}
}

// probe asks the driver whether it is ready; Stop cancels it.
func (s *Supervisor) probe(identity pb.IdentityServiceClient) error {
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.ProbeTimeout)
	defer cancel()
	resp, err := identity.Probe(ctx, &pb.ProbeRequest{})
	if err != nil {
		return err
	}
	if !resp.GetReady() {
		return errors.New("Probe answered not ready")
	}
	return nil
}

// terminate sends SIGTERM and waits until the stop deadline (StopTimeout
// after Stop was called), then kills and waits at most killWait more.
func (s *Supervisor) terminate(cmd *exec.Cmd, exited <-chan error) error {
	began := time.Now()
	s.mu.Lock()
	stopBy := s.stopBy
	s.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		klog.Warningf("SIGTERM to the machine driver (pid %d): %v", cmd.Process.Pid, err)
	}
	deadline := time.NewTimer(time.Until(stopBy))
	defer deadline.Stop()
	select {
	case err := <-exited:
		klog.Infof("machine driver (pid %d) stopped after %s: %s", cmd.Process.Pid, time.Since(began).Round(time.Millisecond), describeExit(err))
		if err != nil {
			return fmt.Errorf("machine driver ended with %s", describeExit(err))
		}
		return nil
	case <-deadline.C:
	}
	_ = cmd.Process.Kill()
	reaped := time.NewTimer(killWait)
	defer reaped.Stop()
	select {
	case <-exited:
	case <-reaped.C:
		klog.Warningf("machine driver (pid %d) not reaped within %s of SIGKILL", cmd.Process.Pid, killWait)
	}
	klog.Warningf("machine driver (pid %d) did not stop within %s of Stop: killed %s after SIGTERM",
		cmd.Process.Pid, s.cfg.StopTimeout, time.Since(began).Round(time.Millisecond))
	return fmt.Errorf("machine driver did not stop within %s of Stop (SIGTERM) and was killed", s.cfg.StopTimeout)
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", exit.ExitCode())
	}
	return err.Error()
}

// without drops the variables named from env.
func without(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// freeLoopbackAddr picks a free TCP port on 127.0.0.1 for the driver's metrics.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
