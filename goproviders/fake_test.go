package goproviders

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"k8s.io/klog/v2"
)

// klogBuffer keeps the Go providers' klog output; a failed test prints it, a passing
// one stays quiet (the providers log every request at level 0).
var klogBuffer = &syncBuffer{}

func TestMain(m *testing.M) {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	// Only the INFO stream: klog copies each line into every stream up to its severity.
	klog.SetOutputBySeverity("INFO", klogBuffer)
	os.Exit(m.Run())
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dumpKlogOnFailure prints the providers' log of this test when it fails.
func dumpKlogOnFailure(t *testing.T) {
	start := len(klogBuffer.String())
	t.Cleanup(func() {
		klog.Flush()
		if log := klogBuffer.String()[start:]; t.Failed() && log != "" {
			t.Logf("provider log (klog):\n%s", log)
		}
	})
}

// fake is one running fake cloud binary of this repository (tests/fake-*), started on a
// free loopback port and stopped when the test ends.
type fake struct {
	url  string // the cloud API root, e.g. http://127.0.0.1:41234
	http *http.Client
}

var listening = regexp.MustCompile(`listening on (http://[^ ]+) \(admin: `)

// startFake runs $MACHINE_DRIVER_BIN_DIR/<name> (built by `cargo build -p <name>`). A
// missing binary skips the test on a developer machine and fails it in CI (CI=true).
func startFake(t *testing.T, name string) *fake {
	t.Helper()
	binary := binaryPath(t, name, name)
	cmd := exec.Command(binary, "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if m := listening.FindStringSubmatch(scanner.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case url := <-found:
		return &fake{url: strings.TrimRight(url, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not say where it listens", name)
		return nil
	}
}

// admin sends an admin API request (docs/fake-admin-api.md) and decodes the JSON answer.
func (f *fake) admin(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	var payload io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		payload = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.url+"/_admin/"+path, payload)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	answer := map[string]any{}
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("admin %s %s: %v (%s)", method, path, err, raw)
	}
	return answer
}

// calls is the fake's call counter since the last reset: operation → count.
type calls map[string]int

func (c calls) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the operations in name order: "servers.create 1, servers.get 2".
func (c calls) String() string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, c[name]))
	}
	return strings.Join(parts, ", ")
}

// takeCalls reads `GET /_admin/calls` and resets the counters, so that each phase of a
// lifecycle is counted on its own.
func (f *fake) takeCalls(t *testing.T) calls {
	t.Helper()
	answer := f.admin(t, http.MethodGet, "calls", nil)
	out := calls{}
	byOp, _ := answer["calls"].(map[string]any)
	for name, n := range byOp {
		if v, ok := n.(float64); ok && v > 0 {
			out[name] = int(v)
		}
	}
	if total, ok := answer["total"].(float64); !ok || int(total) != out.total() {
		t.Fatalf("calls: total %v but the operations add up to %d: %v", answer["total"], out.total(), answer)
	}
	f.admin(t, http.MethodPost, "calls/reset", map[string]any{})
	return out
}

// inventoryEntry is one instance or dependent of `GET /_admin/inventory`.
type inventoryEntry struct {
	ID    string            `json:"id"`
	Name  string            `json:"name"`
	State string            `json:"state"`
	Live  bool              `json:"live"`
	Tags  map[string]string `json:"tags"`
	Kind  string            `json:"kind"`
	// AllowedAddressPairs of an OpenStack port.
	AllowedAddressPairs []map[string]any `json:"allowed_address_pairs"`
}

type inventory struct {
	Instances  []inventoryEntry `json:"instances"`
	Dependents []inventoryEntry `json:"dependents"`
}

func (f *fake) inventory(t *testing.T) inventory {
	t.Helper()
	resp, err := f.http.Get(f.url + "/_admin/inventory")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var inv inventory
	if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil {
		t.Fatal(err)
	}
	return inv
}

// live returns the live instances and dependents whose name satisfies match.
func (inv inventory) live(match func(name string) bool) (instances, dependents []inventoryEntry) {
	for _, i := range inv.Instances {
		if i.Live && match(i.Name) {
			instances = append(instances, i)
		}
	}
	for _, d := range inv.Dependents {
		if d.Live && match(d.Name) {
			dependents = append(dependents, d)
		}
	}
	return instances, dependents
}

// expectNothingLeft waits (a fake deletes dependents after its stop time) until no live
// instance or dependent matches, and fails with what is left otherwise.
func (f *fake) expectNothingLeft(t *testing.T, match func(name string) bool) {
	t.Helper()
	f.expectNothingLeftAfter(t, "DeleteMachine", match)
}

func (f *fake) expectNothingLeftAfter(t *testing.T, after string, match func(name string) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		instances, dependents := f.inventory(t).live(match)
		if len(instances) == 0 && len(dependents) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaked after %s: instances %+v, dependents %+v", after, instances, dependents)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setTiming sets how long the fake keeps an instance pending before running and stopping
// before gone (`POST /_admin/timing`; the fakes' default is 300 ms each). 0 makes every
// transition immediate: the OpenStack Go provider then finds its volume available, its
// server ACTIVE and DELETED at its first poll instead of 10 s later.
func (f *fake) setTiming(t *testing.T, bootMS, stopMS int) {
	t.Helper()
	f.admin(t, http.MethodPost, "timing", map[string]any{"boot_ms": bootMS, "stop_ms": stopMS})
}

// liveIDs is the set of ids of every live instance and dependent in the fake.
func (inv inventory) liveIDs() map[string]string {
	out := map[string]string{}
	for _, i := range inv.Instances {
		if i.Live {
			out[i.ID] = "instance " + i.Name
		}
	}
	for _, d := range inv.Dependents {
		if d.Live {
			out[d.ID] = d.Kind + " " + d.Name
		}
	}
	return out
}

// expectEmpty waits until nothing is live in the fake (no instance, no dependent: every
// test starts its own fake, so anything left is a leak), and fails with what is left.
func (f *fake) expectEmpty(t *testing.T, after string) {
	t.Helper()
	f.expectNothingLeftAfter(t, after, func(string) bool { return true })
}

// readJSON reads a JSON file of this repository (relative to goproviders/).
func readJSON(t *testing.T, path string, into any) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return raw
}

// secretData reads a provider example's secret.json (string values) as Secret data.
func secretData(t *testing.T, path string) map[string][]byte {
	t.Helper()
	var values map[string]string
	readJSON(t, path, &values)
	data := make(map[string][]byte, len(values))
	for k, v := range values {
		data[k] = []byte(v)
	}
	return data
}

// code is the machine error code of err ("OK" for nil).
func code(err error) string {
	if err == nil {
		return "OK"
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	return "Unknown"
}

// phase is one driver call of a lifecycle with the cloud calls it made.
type phase struct {
	name   string
	result string // the machine code the driver answered ("OK", "Unimplemented", ...)
	calls  calls
}
