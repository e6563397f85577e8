package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/handlers"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"google.golang.org/grpc"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// The test binary is also the machine-controller (MC_RUN=1: main's run with
// the arguments after "--") and, started by it, a fake driver (FAKE_DRIVER=ready|exit|hang
// and the MACHINE_DRIVER_ENDPOINT the supervisor sets: serves IdentityService
// there, or exits at once, or hangs: Probe never answers, SIGTERM is ignored,
// FAKE_DRIVER_PROBED is created at the first Probe). The real control plane the
// cluster tests share (clusters_test.go) is stopped once they all ran.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv("FAKE_DRIVER") != "" && os.Getenv("MACHINE_DRIVER_ENDPOINT") != "":
		os.Exit(fakeDriver(os.Getenv("FAKE_DRIVER")))
	case os.Getenv("MC_RUN") == "1":
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{os.Args[0]}, os.Args[i+1:]...)
				break
			}
		}
		os.Exit(run())
	}
	code := m.Run()
	stopControlPlane() // started by the first test that needed it (clusters_test.go)
	os.Exit(code)
}

// identity is the fake driver's IdentityService: ready, unless hang (then
// its Probe never answers).
type identity struct {
	sidecartest.Identity
	hang bool
}

func (i identity) Probe(context.Context, *pb.ProbeRequest) (*pb.ProbeResponse, error) {
	if i.hang {
		if probed := os.Getenv("FAKE_DRIVER_PROBED"); probed != "" {
			_ = os.WriteFile(probed, nil, 0o600)
		}
		select {} // hung: not even a cancelled call ends it
	}
	return &pb.ProbeResponse{Ready: true}, nil
}

func fakeDriver(mode string) int {
	if mode == "exit" {
		return 9
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	l, err := net.Listen("unix", strings.TrimPrefix(os.Getenv("MACHINE_DRIVER_ENDPOINT"), "unix://"))
	if err != nil {
		return 1
	}
	srv := grpc.NewServer()
	pb.RegisterIdentityServiceServer(srv, identity{hang: mode == "hang"})
	go func() { _ = srv.Serve(l) }()
	<-term
	if mode == "hang" {
		select {} // ignores SIGTERM: only SIGKILL ends it
	}
	srv.GracefulStop()
	return 0
}

// mcRun says how machineController runs the machine-controller.
type mcRun struct {
	driver string   // the fake driver's mode (FAKE_DRIVER)
	env    []string // more environment
	signal os.Signal
	// when returns when the signal is to be sent (default: at once).
	when func()
}

// machineController runs the machine-controller with args and returns its
// exit status, its output and how long it ran after the signal (if any).
func machineController(t *testing.T, r mcRun, args ...string) (int, string, time.Duration) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port := freePort(t)
	cmd := exec.Command(self, append([]string{"-test.run=^$", "--", "--port=" + port, "--address=127.0.0.1", "--machine-driver-socket-dir=" + dir}, args...)...)
	cmd.Env = append(append(os.Environ(), r.env...), "MC_RUN=1", "FAKE_DRIVER="+r.driver, "MACHINE_DRIVER_ENDPOINT=")
	out := &syncBuilder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var signalled time.Time
	if r.signal != nil {
		if r.when != nil {
			r.when()
		}
		signalled = time.Now()
		_ = cmd.Process.Signal(r.signal)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("machine-controller did not exit:\n%s", out.String())
	}
	var afterSignal time.Duration
	if !signalled.IsZero() {
		afterSignal = time.Since(signalled)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), afterSignal
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), afterSignal
}

// syncBuilder is a strings.Builder for the output of a running process.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gardenerGrace is the pod's terminationGracePeriodSeconds in Gardener: the
// kubelet sends SIGKILL that long after SIGTERM.
const gardenerGrace = 5 * time.Second

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestExitStatusSaysWhichProcessFailed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, driver string
		args         []string
		want         int
		log          string
	}{
		{"flag that does not parse", "", []string{"--no-such-flag"}, exitUsage, "unknown flag"},
		{"shutdown timeout shorter than the driver's grace", "", []string{"--machine-driver-binary=" + self, "--shutdown-timeout=2s"}, exitUsage, "must exceed"},
		{"spot reclaim check period not positive", "", []string{"--spot-reclaim-check-period=0s"}, exitUsage, "--spot-reclaim-check-period"},
		{"hot update concurrency not positive", "", []string{"--hot-update-concurrency=0"}, exitUsage, "--hot-update-concurrency"},
		{"driver binary missing", "", []string{"--machine-driver-binary=/nonexistent/machine-driver"}, exitDriver, "no such file"},
		{"driver never ready", "exit", []string{"--machine-driver-binary=" + self, "--machine-driver-wait=1500ms"}, exitDriver, "did not become ready"},
		{"controller cannot start", "ready", []string{"--machine-driver-binary=" + self, "--target-kubeconfig=/nonexistent/kubeconfig", "--control-kubeconfig=/nonexistent/kubeconfig"}, exitController, "kubeconfig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, _ := machineController(t, mcRun{driver: c.driver}, c.args...)
			if code != c.want || !strings.Contains(out, c.log) {
				t.Fatalf("exit status %d, want %d, and a log naming %q:\n%s", code, c.want, c.log, out)
			}
		})
	}
}

// The three-container layout: the driver on a socket of another container.
func TestSocketModeDialsTheDriverThenRunsTheController(t *testing.T) {
	dir, err := os.MkdirTemp("", "mcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := dir + "/driver.sock"
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterIdentityServiceServer(srv, identity{})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	code, out, _ := machineController(t, mcRun{}, "--machine-driver-socket="+socket,
		"--target-kubeconfig=/nonexistent/kubeconfig", "--control-kubeconfig=/nonexistent/kubeconfig")
	if code != exitController || !strings.Contains(out, "machine driver sidecar fake") {
		t.Fatalf("exit status %d, want %d after dialing the sidecar:\n%s", code, exitController, out)
	}
	code, out, _ = machineController(t, mcRun{}, "--machine-driver-socket="+dir+"/none.sock", "--machine-driver-wait=1s")
	if code != exitDriver {
		t.Fatalf("no sidecar: exit status %d, want %d:\n%s", code, exitDriver, out)
	}
}

func TestSIGTERMWhileWaitingForTheDriverExitsCleanly(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code, out, took := machineController(t, mcRun{driver: "exit", signal: syscall.SIGTERM, when: func() { time.Sleep(700 * time.Millisecond) }},
		"--machine-driver-binary="+self, "--machine-driver-wait=1m")
	if code != exitOK || took >= gardenerGrace {
		t.Fatalf("exit status %d %s after SIGTERM, want 0 within %s:\n%s", code, took, gardenerGrace, out)
	}
}

// A driver that hangs (its Probe never answers, it ignores SIGTERM): the
// Probe in flight at SIGTERM is cancelled, the driver killed at
// --shutdown-timeout - 0.6 s, and the process exits with status 3 (the
// driver did not stop cleanly) within --shutdown-timeout (4.5 s), before
// Gardener's SIGKILL at 5 s.
func TestSIGTERMWithAHungDriverExitsWithinTheGrace(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(t.TempDir(), "probed")
	// SIGTERM just after a Probe began: it would hold the supervisor for its 2 s timeout.
	waitProbed := func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(probed); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	code, out, took := machineController(t, mcRun{driver: "hang", env: []string{"FAKE_DRIVER_PROBED=" + probed}, signal: syscall.SIGTERM, when: waitProbed},
		"--machine-driver-binary="+self, "--machine-driver-wait=1m")
	if _, err := os.Stat(probed); err != nil {
		t.Fatalf("the driver never received a Probe:\n%s", out)
	}
	if code != exitDriver || took >= 4500*time.Millisecond+200*time.Millisecond || !strings.Contains(out, "killed") {
		t.Fatalf("exit status %d %s after SIGTERM, want %d (driver killed) within the 4.5 s shutdown timeout (Gardener kills at %s):\n%s",
			code, took, exitDriver, gardenerGrace, out)
	}
}

// shutdown keeps to --shutdown-timeout even when stopping the driver never
// returns: it gives the driver up, releases the lease and reports the driver.
func TestShutdownGivesAStuckDriverUpAndStillReleasesTheLease(t *testing.T) {
	released := make(chan struct{})
	leDone := make(chan struct{})
	c := &controller{stop: make(chan struct{}), failed: make(chan error, 2), leDone: leDone,
		leCancel: func() { close(released); close(leDone) }}
	calls := newTracked(slow{release: make(chan struct{})})
	stuck := make(chan struct{})
	defer close(stuck)
	f := flags{grace: 300 * time.Millisecond, shutdown: 1500 * time.Millisecond}
	began := time.Now()
	code := shutdown(f, c, calls, func() error { <-stuck; return nil })
	took := time.Since(began)
	if code != exitDriver {
		t.Fatalf("exit status %d, want %d for a driver that never stopped", code, exitDriver)
	}
	if took < f.shutdown-releaseMargin-50*time.Millisecond || took > f.shutdown {
		t.Fatalf("shutdown took %s, want about %s (the driver's wait ends %s before the %s deadline)", took, f.shutdown-releaseMargin, releaseMargin, f.shutdown)
	}
	select {
	case <-released:
	default:
		t.Fatal("the lease was not released")
	}
	select {
	case <-c.stop:
	default:
		t.Fatal("the controllers were not stopped")
	}
}

// slow is a driver whose calls take until release is closed.
type slow struct {
	mcmdriver.Driver
	release chan struct{}
}

func (s slow) GetMachineStatus(context.Context, *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error) {
	<-s.release
	return &mcmdriver.GetMachineStatusResponse{ProviderID: "p"}, nil
}

func TestShutdownWaitsForCallsInFlightAndRefusesNewOnes(t *testing.T) {
	d := slow{release: make(chan struct{})}
	tr := newTracked(d)
	answered := make(chan error, 1)
	go func() {
		_, err := tr.GetMachineStatus(context.Background(), &mcmdriver.GetMachineStatusRequest{})
		answered <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for {
		tr.mu.Lock()
		n := tr.n
		tr.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never entered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := tr.refuse(); n != 1 {
		t.Fatalf("%d calls in flight at refuse, want 1", n)
	}
	_, err := tr.GetMachineStatus(context.Background(), &mcmdriver.GetMachineStatusRequest{})
	if s, ok := status.FromError(err); !ok || s.Code() != codes.Unavailable {
		t.Fatalf("a call after shutdown began: %v, want MCM's Unavailable", err)
	}
	if open := tr.wait(time.Now().Add(100 * time.Millisecond)); open != 1 {
		t.Fatalf("wait returned with %d open, want 1 (still in flight)", open)
	}
	close(d.release)
	if open := tr.wait(time.Now().Add(2 * time.Second)); open != 0 {
		t.Fatalf("%d calls open after the answer", open)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the call in flight: %v, want its answer", err)
	}
}

func TestHealthzIsUnhealthyWhileTheDriverIsDown(t *testing.T) {
	driverUp := false
	h := healthz(func() (bool, string) { return driverUp, "machine driver exited: signal killed" })
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	handlers.UpdateHealth(true)
	if code, body := get(); code != http.StatusInternalServerError || !strings.Contains(body, "signal killed") {
		t.Fatalf("driver down: %d %q, want 500 naming why", code, body)
	}
	driverUp = true
	if code, _ := get(); code != http.StatusOK {
		t.Fatalf("driver up: %d, want 200", code)
	}
	handlers.UpdateHealth(false) // MCM's controllers stopped
	if code, _ := get(); code != http.StatusInternalServerError {
		t.Fatalf("controllers stopped: %d, want 500", code)
	}
	if code, _ := func() (int, string) {
		rec := httptest.NewRecorder()
		handlers.UpdateHealth(true)
		healthz(nil)(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, ""
	}(); code != http.StatusOK {
		t.Fatalf("socket mode (no supervised driver): %d, want MCM's 200", code)
	}
}
