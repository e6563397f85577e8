package supervise

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// The test binary doubles as a fake driver (FAKE_DRIVER=1): it serves
// IdentityService on MACHINE_DRIVER_ENDPOINT and /metrics on
// MACHINE_DRIVER_METRICS_LISTEN, as the real driver reads them, and writes
// what it was given to FAKE_DRIVER_RECORD. FAKE_DRIVER_MODE picks a behaviour:
// "" (serve; SIGTERM ends it with status 0 after FAKE_DRIVER_TERM_DELAY),
// "exit" (exit 7 at once), "ignore-term" (never ends on SIGTERM), "not-ready"
// (Probe answers ready=false), "hang" (Probe never answers, SIGTERM is
// ignored; FAKE_DRIVER_PROBED, when set, is created at the first Probe).
func TestMain(m *testing.M) {
	if os.Getenv("FAKE_DRIVER") == "1" {
		os.Exit(fakeDriver())
	}
	os.Exit(m.Run())
}

type fakeIdentity struct {
	pb.UnimplementedIdentityServiceServer
	ready, hang bool
}

func (f fakeIdentity) Probe(context.Context, *pb.ProbeRequest) (*pb.ProbeResponse, error) {
	if f.hang {
		if probed := os.Getenv("FAKE_DRIVER_PROBED"); probed != "" {
			_ = os.WriteFile(probed, nil, 0o600)
		}
		select {} // a hung driver: not even a cancelled call ends it
	}
	return &pb.ProbeResponse{Ready: f.ready}, nil
}

func fakeDriver() int {
	mode := os.Getenv("FAKE_DRIVER_MODE")
	if record := os.Getenv("FAKE_DRIVER_RECORD"); record != "" {
		var b strings.Builder
		for _, k := range []string{envEndpoint, envSocketMode, envMetricsListen, envShutdownGrace, "FAKE_DRIVER_PASSED"} {
			fmt.Fprintf(&b, "%s=%s\n", k, os.Getenv(k))
		}
		_ = os.WriteFile(record, []byte(b.String()), 0o600)
	}
	if mode == "exit" {
		return 7
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	socket := strings.TrimPrefix(os.Getenv(envEndpoint), "unix://")
	l, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := grpc.NewServer()
	pb.RegisterIdentityServiceServer(srv, fakeIdentity{ready: mode != "not-ready", hang: mode == "hang"})
	go func() { _ = srv.Serve(l) }()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE mcm_cloud_api_requests_total counter\nmcm_cloud_api_requests_total{provider=\"fake\",service=\"x\"} 1\n")
	})
	go func() { _ = http.ListenAndServe(os.Getenv(envMetricsListen), mux) }()
	for range signals {
		if mode == "ignore-term" || mode == "hang" {
			continue
		}
		if d, err := time.ParseDuration(os.Getenv("FAKE_DRIVER_TERM_DELAY")); err == nil {
			time.Sleep(d)
		}
		srv.Stop()
		return 0
	}
	return 0
}

func start(t *testing.T, mode string, cfg Config) (*Supervisor, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "record")
	cfg.Binary = self
	// t.TempDir() is too long for a socket path with these test names.
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg.SocketDir = dir
	cfg.Env = append(append(os.Environ(), cfg.Env...), "FAKE_DRIVER=1", "FAKE_DRIVER_MODE="+mode, "FAKE_DRIVER_RECORD="+record,
		"FAKE_DRIVER_PASSED=yes", envShutdownGrace+"=99s", envEndpoint+"=unix:///elsewhere.sock")
	cfg.Args = []string{"-test.run=^$"}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s, record
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDriverStartsInAPrivateDirectoryAndIsReadyOnProbe(t *testing.T) {
	s, record := start(t, "", Config{ShutdownGrace: 1500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := s.Healthy(); !ok {
		t.Fatalf("not healthy after ready: %s", why)
	}
	dir := filepath.Dir(s.Socket())
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory %s: %v, mode %v; want 0700", dir, err, info.Mode().Perm())
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		envEndpoint + "=unix://" + s.Socket(),
		envSocketMode + "=0600",
		envShutdownGrace + "=1500ms", // the supervisor's, not the environment's 99s
		"FAKE_DRIVER_PASSED=yes",     // the rest of the environment is passed on
	} {
		if !strings.Contains(string(got), want+"\n") {
			t.Errorf("driver environment lacks %q:\n%s", want, got)
		}
	}
	resp, err := http.Get(s.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "mcm_cloud_api_requests_total") {
		t.Fatalf("metrics at %s: %q", s.MetricsURL(), body)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("socket directory %s left behind: %v", dir, err)
	}
	if ok, _ := s.Healthy(); ok {
		t.Fatal("healthy after stop")
	}
}

func TestKilledDriverIsRestartedAndUnhealthyMeanwhile(t *testing.T) {
	s, _ := start(t, "", Config{InitialBackoff: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	first := s.PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "unhealthy after the kill", func() bool { ok, _ := s.Healthy(); return !ok })
	if _, why := s.Healthy(); !strings.Contains(why, "signal killed") {
		t.Errorf("reason %q does not say the driver was killed", why)
	}
	waitFor(t, 10*time.Second, "healthy again", func() bool { ok, _ := s.Healthy(); return ok })
	if s.PID() == first || s.PID() == 0 || s.Starts() != 2 {
		t.Fatalf("pid %d (was %d), %d starts; want a new process, 2 starts", s.PID(), first, s.Starts())
	}
}

func TestCrashLoopBacksOff(t *testing.T) {
	s, _ := start(t, "exit", Config{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond})
	// Starts at about 0, 0.1, 0.3, 0.7, 1.1, 1.5 s: without backoff there would be hundreds.
	time.Sleep(1300 * time.Millisecond)
	n := s.Starts()
	if n < 3 || n > 6 {
		t.Fatalf("%d starts in 1.3 s, want 3-6 (backoff 100 ms doubling to 400 ms)", n)
	}
	if ok, why := s.Healthy(); ok || !strings.Contains(why, "exit status 7") {
		t.Fatalf("healthy %v (%q), want unhealthy with the exit status", ok, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.WaitReady(ctx); err == nil {
		t.Fatal("WaitReady succeeded for a driver that never answers")
	}
}

func TestNotReadyDriverKeepsItUnhealthy(t *testing.T) {
	s, _ := start(t, "not-ready", Config{})
	time.Sleep(700 * time.Millisecond)
	if ok, why := s.Healthy(); ok || !strings.Contains(why, "not ready") {
		t.Fatalf("healthy %v (%q), want unhealthy: Probe answers not ready", ok, why)
	}
}

func TestStopWaitsForTheGraceThenKills(t *testing.T) {
	s, _ := start(t, "", Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("clean stop took %s", took)
	}

	s, _ = start(t, "ignore-term", Config{StopTimeout: 500 * time.Millisecond})
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	began = time.Now()
	err := s.Stop()
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Stop of a driver ignoring SIGTERM: %v, want killed", err)
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Fatalf("Stop took %s, want the 500 ms stop timeout", took)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("driver %d still runs after Stop", pid)
	}
}

// A driver whose Probe hangs, and which ignores SIGTERM: Stop cancels the
// Probe in flight instead of waiting out its ProbeTimeout, and kills the
// driver StopTimeout after Stop was called.
func TestStopOfAHungDriverKeepsToTheStopTimeout(t *testing.T) {
	probed := filepath.Join(t.TempDir(), "probed")
	const stopTimeout = 500 * time.Millisecond
	s, _ := start(t, "hang", Config{StopTimeout: stopTimeout, ProbeTimeout: 3 * time.Second, Env: []string{"FAKE_DRIVER_PROBED=" + probed}})
	waitFor(t, 10*time.Second, "the driver received a Probe", func() bool { _, err := os.Stat(probed); return err == nil })
	pid := s.PID()
	if ok, _ := s.Healthy(); ok {
		t.Fatal("healthy while Probe hangs")
	}
	began := time.Now()
	err := s.Stop()
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Stop of a hung driver: %v, want killed", err)
	}
	// Without the cancellation Stop would begin only when the 3 s Probe timed out.
	if took < stopTimeout || took > stopTimeout+killWait+500*time.Millisecond {
		t.Fatalf("Stop took %s, want the %s stop timeout (+ at most %s to reap)", took, stopTimeout, killWait)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("driver %d still runs after Stop", pid)
	}
}

func TestStartRefusesAMissingBinary(t *testing.T) {
	if _, err := Start(Config{Binary: "/nonexistent/machine-driver"}); err == nil {
		t.Fatal("started a missing binary")
	}
	if _, err := Start(Config{Binary: "machine-driver"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative binary: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Config{Binary: self, SocketDir: long}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("socket path over 107 bytes: %v", err)
	}
}
