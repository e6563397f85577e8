package driver

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// eachProvider runs test once per provider found under ../../providers/*/examples, with
// the path of its sidecar binary in MACHINE_DRIVER_BIN_DIR (scripts/test.sh sets it; the
// binaries are built with `--features embedded-fake`) and its examples directory.
func eachProvider(t *testing.T, test func(t *testing.T, binary, examples string)) {
	binDir := os.Getenv("MACHINE_DRIVER_BIN_DIR")
	if binDir == "" {
		t.Skip("MACHINE_DRIVER_BIN_DIR not set (scripts/test.sh sets it)")
	}
	classes, err := filepath.Glob("../../providers/*/examples/machine-class.json")
	if err != nil || len(classes) == 0 {
		t.Fatalf("no provider examples found: %v", err)
	}
	for _, class := range classes {
		examples := filepath.Dir(class)
		cloud := filepath.Base(filepath.Dir(examples))
		t.Run(cloud, func(t *testing.T) { test(t, filepath.Join(binDir, "machine-driver-"+cloud), examples) })
	}
}

// startSidecar starts binary on its embedded fake cloud (plus args) and dials it;
// both are stopped when the test ends.
func startSidecar(t *testing.T, binary string, args ...string) *Driver {
	socket := filepath.Join(t.TempDir(), "driver.sock")
	cmd := exec.Command(binary, append([]string{"--embedded-fake", "--endpoint", "unix://" + socket}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	d, err := Dial(context.Background(), socket, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// exampleClass reads a provider's example providerSpec and secret data.
func exampleClass(t *testing.T, examples string) (spec []byte, secretData map[string][]byte) {
	spec, err := os.ReadFile(filepath.Join(examples, "machine-class.json"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]string
	raw, err := os.ReadFile(filepath.Join(examples, "secret.json"))
	if err != nil || json.Unmarshal(raw, &values) != nil {
		t.Fatalf("secret.json: %v", err)
	}
	secretData = make(map[string][]byte, len(values))
	for k, v := range values {
		secretData[k] = []byte(v)
	}
	return spec, secretData
}
