package goproviders

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"

	adapter "github.com/machine-driver/adapter/driver"
)

// startSidecar runs this repository's sidecar for cloud ($MACHINE_DRIVER_BIN_DIR/
// machine-driver-<cloud>, built by `cargo build -p machine-driver-<cloud>-bin`) against
// the running fake f (`--cloud-endpoint`, the flag the conformance suite's `--spawn-fake`
// uses: Keystone / ARM and the token endpoint at the fake) on a Unix socket, and dials it
// with the adapter (adapter/driver), as MCM's machine controller would. A missing binary
// skips the test on a developer machine and fails it in CI (CI=true). The sidecar's log
// is printed when the test fails.
func startSidecar(t *testing.T, cloud string, f *fake) *adapter.Driver {
	t.Helper()
	d, _ := launchSidecar(t, cloud, f)
	return d
}

// launchSidecar is startSidecar that also returns a function stopping the sidecar (and
// closing the connection) before the test ends.
func launchSidecar(t *testing.T, cloud string, f *fake) (*adapter.Driver, func()) {
	t.Helper()
	binary := binaryPath(t, "machine-driver-"+cloud, "machine-driver-"+cloud+"-bin")
	dir := t.TempDir()
	socket := filepath.Join(dir, "driver.sock")
	logPath := filepath.Join(dir, "sidecar.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--endpoint", "unix://"+socket, "--cloud-endpoint", f.url)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	var (
		once sync.Once
		d    *adapter.Driver
	)
	stop := func() {
		once.Do(func() {
			if d != nil {
				_ = d.Close()
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = logFile.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if raw, err := os.ReadFile(logPath); err == nil {
				lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
				if len(lines) > 60 {
					lines = lines[len(lines)-60:]
				}
				t.Logf("sidecar %s log (last %d lines):\n%s", cloud, len(lines), strings.Join(lines, "\n"))
			}
		}
	})
	d, err = adapter.Dial(context.Background(), socket, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return d, stop
}

// binaryPath is $MACHINE_DRIVER_BIN_DIR/name; a missing one skips the test, or fails it
// with CI=true.
func binaryPath(t *testing.T, name, pkg string) string {
	t.Helper()
	dir := os.Getenv("MACHINE_DRIVER_BIN_DIR")
	binary := filepath.Join(dir, name)
	if _, err := os.Stat(binary); dir == "" || err != nil {
		msg := fmt.Sprintf("%s not found (set MACHINE_DRIVER_BIN_DIR to the cargo target's debug directory; build it with `cargo build -p %s --all-features`)", binary, pkg)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return binary
}

// countingDriver is a driver.Driver that counts the calls made to the one it wraps (MCM's
// controller in front of the adapter: which RPCs MCM sent, with which answers).
type countingDriver struct {
	mcmdriver.Driver
	mu    sync.Mutex
	calls map[string]int // "GetMachineStatus OK", "CreateMachine ..." → count
}

func newCountingDriver(d mcmdriver.Driver) *countingDriver {
	return &countingDriver{Driver: d, calls: map[string]int{}}
}

func (c *countingDriver) note(method string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	c.calls[method+" "+code(err)]++
}

// count is the number of calls of method (any answer), or of "method CODE".
func (c *countingDriver) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

func (c *countingDriver) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return calls(c.calls).String()
}

func (c *countingDriver) CreateMachine(ctx context.Context, req *mcmdriver.CreateMachineRequest) (*mcmdriver.CreateMachineResponse, error) {
	resp, err := c.Driver.CreateMachine(ctx, req)
	c.note("CreateMachine", err)
	return resp, err
}

func (c *countingDriver) InitializeMachine(ctx context.Context, req *mcmdriver.InitializeMachineRequest) (*mcmdriver.InitializeMachineResponse, error) {
	resp, err := c.Driver.InitializeMachine(ctx, req)
	c.note("InitializeMachine", err)
	return resp, err
}

func (c *countingDriver) DeleteMachine(ctx context.Context, req *mcmdriver.DeleteMachineRequest) (*mcmdriver.DeleteMachineResponse, error) {
	resp, err := c.Driver.DeleteMachine(ctx, req)
	c.note("DeleteMachine", err)
	return resp, err
}

func (c *countingDriver) GetMachineStatus(ctx context.Context, req *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error) {
	resp, err := c.Driver.GetMachineStatus(ctx, req)
	c.note("GetMachineStatus", err)
	return resp, err
}

func (c *countingDriver) ListMachines(ctx context.Context, req *mcmdriver.ListMachinesRequest) (*mcmdriver.ListMachinesResponse, error) {
	resp, err := c.Driver.ListMachines(ctx, req)
	c.note("ListMachines", err)
	return resp, err
}
