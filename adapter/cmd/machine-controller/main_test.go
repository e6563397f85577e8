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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/handlers"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"google.golang.org/grpc"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// The test binary is also the machine-controller (MC_RUN=1: main's run with
// the arguments after "--") and, started by it, a fake driver (FAKE_DRIVER=ready|exit
// and the MACHINE_DRIVER_ENDPOINT the supervisor sets: serves IdentityService
// there, or exits at once).
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
	os.Exit(m.Run())
}

type identity struct {
	pb.UnimplementedIdentityServiceServer
}

func (identity) Probe(context.Context, *pb.ProbeRequest) (*pb.ProbeResponse, error) {
	return &pb.ProbeResponse{Ready: true}, nil
}

func (identity) GetPluginInfo(context.Context, *pb.GetPluginInfoRequest) (*pb.GetPluginInfoResponse, error) {
	return &pb.GetPluginInfoResponse{Name: "fake", VendorVersion: "0", Provider: "fake"}, nil
}

func (identity) GetPluginCapabilities(context.Context, *pb.GetPluginCapabilitiesRequest) (*pb.GetPluginCapabilitiesResponse, error) {
	return &pb.GetPluginCapabilitiesResponse{}, nil
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
	pb.RegisterIdentityServiceServer(srv, identity{})
	go func() { _ = srv.Serve(l) }()
	<-term
	srv.GracefulStop()
	return 0
}

// machineController runs the machine-controller with args; signal, when set,
// is sent after delay.
func machineController(t *testing.T, driverMode string, sig os.Signal, delay time.Duration, args ...string) (int, string) {
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
	cmd.Env = append(os.Environ(), "MC_RUN=1", "FAKE_DRIVER="+driverMode, "MACHINE_DRIVER_ENDPOINT=")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if sig != nil {
		time.Sleep(delay)
		_ = cmd.Process.Signal(sig)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("machine-controller did not exit:\n%s", out.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

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
		{"driver binary missing", "", []string{"--machine-driver-binary=/nonexistent/machine-driver"}, exitDriver, "no such file"},
		{"driver never ready", "exit", []string{"--machine-driver-binary=" + self, "--machine-driver-wait=1500ms"}, exitDriver, "did not become ready"},
		{"controller cannot start", "ready", []string{"--machine-driver-binary=" + self, "--target-kubeconfig=/nonexistent/kubeconfig", "--control-kubeconfig=/nonexistent/kubeconfig"}, exitController, "kubeconfig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := machineController(t, c.driver, nil, 0, c.args...)
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
	code, out := machineController(t, "", nil, 0, "--machine-driver-socket="+socket,
		"--target-kubeconfig=/nonexistent/kubeconfig", "--control-kubeconfig=/nonexistent/kubeconfig")
	if code != exitController || !strings.Contains(out, "machine driver sidecar fake") {
		t.Fatalf("exit status %d, want %d after dialing the sidecar:\n%s", code, exitController, out)
	}
	code, out = machineController(t, "", nil, 0, "--machine-driver-socket="+dir+"/none.sock", "--machine-driver-wait=1s")
	if code != exitDriver {
		t.Fatalf("no sidecar: exit status %d, want %d:\n%s", code, exitDriver, out)
	}
}

func TestSIGTERMWhileWaitingForTheDriverExitsCleanly(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	code, out := machineController(t, "exit", syscall.SIGTERM, 700*time.Millisecond, "--machine-driver-binary="+self, "--machine-driver-wait=1m")
	if code != exitOK || time.Since(began) > 10*time.Second {
		t.Fatalf("exit status %d after %s, want 0 soon after SIGTERM:\n%s", code, time.Since(began), out)
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
