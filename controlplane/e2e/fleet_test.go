package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/machine-driver/controlplane/cluster"
)

// The knobs: a flag (go test ./e2e -args -providers=aws,gcp -machines=20) or its variable
// (CONTROLPLANE_E2E_PROVIDERS, CONTROLPLANE_E2E_MACHINES), the flag winning.
var (
	providersFlag = flag.String("providers", "", "comma-separated providers to run (default: every providers/*/examples; env CONTROLPLANE_E2E_PROVIDERS)")
	machinesFlag  = flag.Int("machines", 0, "replicas of the MachineDeployment (default 4; env CONTROLPLANE_E2E_MACHINES)")
	killsFlag     = flag.Bool("kills", true, "kill each process once mid-rollout (env CONTROLPLANE_E2E_KILLS=0 turns it off)")
)

// defaultMachines fits all five providers' scenarios in about 8 minutes on a 2-core machine
// (controlplane/README.md has the measurements, and what 20 costs).
const defaultMachines = 4

const (
	// The overlay's namespace and service account (deploy/overlays/<cloud>, deploy/base).
	namespace = "machine-controller-manager"
	account   = "machine-controller-manager"
	// The identity Gardener gives MCM in the shoot, as deploy/target renders it: the service
	// account machine-controller-manager of kube-system (gardener/gardener
	// pkg/component/nodemanagement/machinecontrollermanager, computeShootResourcesData and
	// newShootAccessSecret) and the name of its ClusterRole, Role and bindings.
	targetNamespace = "kube-system"
	targetAccount   = "machine-controller-manager"
	targetRBACName  = "gardener.cloud:target:machine-controller-manager"

	deploymentName = "worker-a"
	// The orphan collection period given to the machine-controller (Gardener: 30m, deploy/: 15m).
	orphanPeriod = 3 * time.Second
)

// gardenerProvider is MachineClass.provider as Gardener's extensions write it.
var gardenerProvider = map[string]string{
	"aws": "AWS", "gcp": "GCP", "azure": "Azure", "openstack": "OpenStack", "alicloud": "Alicloud",
}

// machineControllerBin is adapter/cmd/machine-controller built by TestMain from the checkout.
var machineControllerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// Every provider at once, unless -test.parallel was given (CONTROLPLANE_E2E_PARALLEL
	// overrides the default of 5).
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == "test.parallel" })
	if !given {
		parallel := os.Getenv("CONTROLPLANE_E2E_PARALLEL")
		if parallel == "" {
			parallel = "5"
		}
		if err := flag.Set("test.parallel", parallel); err != nil {
			fmt.Fprintln(os.Stderr, "CONTROLPLANE_E2E_PARALLEL:", err)
			os.Exit(2)
		}
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "controlplane-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	adapter, err := filepath.Abs(filepath.Join("..", "..", "adapter"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started := time.Now()
	bin := filepath.Join(dir, "machine-controller")
	build := exec.Command("go", "build", "-o", bin, "./cmd/machine-controller")
	build.Dir = adapter
	// The adapter's own module rules: never -mod=mod there (it would rewrite its go.mod).
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building adapter/cmd/machine-controller: %v\n%s", err, out)
		return 1
	}
	fmt.Printf("built adapter/cmd/machine-controller in %s\n", time.Since(started).Round(time.Millisecond))
	machineControllerBin = bin
	code := m.Run()
	printFailures()
	return code
}

// skipOrFail skips without what the test needs, unless CI is set: there it fails.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// driverBinDir is where the Rust binaries are: $MACHINE_DRIVER_BIN_DIR, or
// ${CARGO_TARGET_DIR:-~/.cache/machine-driver/target}/debug.
func driverBinDir() string {
	if d := os.Getenv("MACHINE_DRIVER_BIN_DIR"); d != "" {
		return d
	}
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		home, _ := os.UserHomeDir()
		target = filepath.Join(home, ".cache", "machine-driver", "target")
	}
	return filepath.Join(target, "debug")
}

func machines() int {
	if *machinesFlag > 0 {
		return *machinesFlag
	}
	if n, err := strconv.Atoi(os.Getenv("CONTROLPLANE_E2E_MACHINES")); err == nil && n > 0 {
		return n
	}
	return defaultMachines
}

func kills() bool {
	if v := os.Getenv("CONTROLPLANE_E2E_KILLS"); v != "" {
		return v != "0" && v != "false"
	}
	return *killsFlag
}

// providers are the clouds to run: the knob's, or every providers/*/examples/conformance.json.
func providers(t *testing.T) []string {
	list := *providersFlag
	if list == "" {
		list = os.Getenv("CONTROLPLANE_E2E_PROVIDERS")
	}
	if list != "" {
		return strings.Split(list, ",")
	}
	found, err := filepath.Glob(filepath.Join("..", "..", "providers", "*", "examples", "conformance.json"))
	if err != nil || len(found) == 0 {
		t.Fatalf("no providers/*/examples/conformance.json: %v", err)
	}
	var out []string
	for _, f := range found {
		out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f))))
	}
	return out
}

// fleet is one provider's run: the two clusters, the four processes and the clients the test
// uses as admin (Gardener's part: the MachineDeployment and classes; the kubelet's: Nodes).
type fleet struct {
	t        *recordingT
	cloud    string
	examples string
	dir      string
	binDir   string // etcd, kube-apiserver, machine-controller-manager

	control, target *cluster.Cluster
	machines        machineclient.Interface // control cluster, admin
	core            kubernetes.Interface    // control cluster, admin
	nodes           kubernetes.Interface    // target cluster, admin (the kubelet)

	conformance map[string]json.RawMessage
	spec        json.RawMessage
	secretData  map[string][]byte

	fakeURL    string
	fake       *cluster.Process
	socket     string
	sidecarBin string
	sidecar    *cluster.Process
	mc         *cluster.Process // adapter/cmd/machine-controller
	mcMetrics  string           // its /metrics URL
	mcm        *cluster.Process // MCM's machine-controller-manager
	// Every process started, killed ones too: their logs are searched for Forbidden.
	all     []*cluster.Process
	started map[string]int // per name, for the log file of a restarted process

	class                               string // the MachineDeployment's MachineClass
	spotDeployment                      bool   // the Spot MachineDeployment exists (scenario 8)
	n                                   int    // its replicas
	controlKubeconfig, targetKubeconfig string
	kubelet                             *kubelet
	// The Deployment deploy/overlays/<cloud> renders: the processes' args and environment.
	deployment *unstructured.Unstructured
}

// TestFleetOnTheRealControlPlane runs the scenarios of issue 29 for every provider.
func TestFleetOnTheRealControlPlane(t *testing.T) {
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if !cluster.BinariesPresent(binDir) {
		skipOrFail(t, "no etcd and kube-apiserver in %s: run controlplane/build.sh", binDir)
	}
	if _, err := os.Stat(filepath.Join(binDir, "machine-controller-manager")); err != nil {
		skipOrFail(t, "no machine-controller-manager in %s: run controlplane/build.sh", binDir)
	}
	n := machines()
	total := time.Now()
	var mu sync.Mutex
	var summary []string
	t.Cleanup(func() {
		sort.Strings(summary)
		t.Logf("TIME all providers (%d machines, parallel %s): %s\n%s", n, flag.Lookup("test.parallel").Value,
			time.Since(total).Round(time.Second), strings.Join(summary, "\n"))
	})
	for _, cloud := range providers(t) {
		t.Run(cloud, func(t *testing.T) {
			// The processes mostly wait (MCM's deletion flow steps every 5 s): the providers
			// run side by side (-test.parallel, set by TestMain unless given).
			t.Parallel()
			started := time.Now()
			f := newFleet(t, cloud, binDir)
			f.scenarios(n)
			took := time.Since(started).Round(time.Second)
			t.Logf("TIME %s: all scenarios with %d machines took %s", cloud, n, took)
			mu.Lock()
			summary = append(summary, fmt.Sprintf("  %-10s %s", cloud, took))
			mu.Unlock()
		})
	}
}

// step runs one scenario and prints its time.
func (f *fleet) step(name string, fn func()) {
	f.t.Helper()
	started := time.Now()
	fn()
	f.t.Logf("TIME %s / %s: %s", f.cloud, name, time.Since(started).Round(100*time.Millisecond))
}

func newFleet(raw *testing.T, cloud, binDir string) *fleet {
	t := &recordingT{T: raw}
	f := &fleet{t: t, cloud: cloud, binDir: binDir, dir: t.TempDir(),
		examples: filepath.Join("..", "..", "providers", cloud, "examples")}
	bins := driverBinDir()
	if err := readJSON(filepath.Join(f.examples, "conformance.json"), &f.conformance); err != nil {
		t.Fatal(err)
	}
	var fakeName string
	if err := json.Unmarshal(f.conformance["fake"], &fakeName); err != nil {
		t.Fatalf("conformance.json fake: %v", err)
	}
	for _, b := range []string{"machine-driver-" + cloud, fakeName} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			skipOrFail(raw, "no %s in %s (cargo build the workspace's binaries, or set MACHINE_DRIVER_BIN_DIR)", b, bins)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	started := time.Now()
	f.startClusters(ctx)
	f.installControl(ctx)
	f.installTarget(ctx)
	f.classAndSecret(ctx, "class-a")
	t.Logf("TIME %s / control and target clusters with CRDs, deploy/ and RBAC: %s", cloud, time.Since(started).Round(100*time.Millisecond))

	started = time.Now()
	f.startFake(filepath.Join(bins, fakeName))
	f.sidecarBin = filepath.Join(bins, "machine-driver-"+cloud)
	f.startSidecar(f.sidecarBin, true)
	f.startMachineController(true)
	f.startMCM(true)

	f.kubelet = startKubelet(t, f)
	t.Cleanup(func() {
		if t.Failed() {
			f.dumpLogs()
		}
	})
	t.Logf("TIME %s / fake, sidecar, machine-controller, machine-controller-manager started: %s", cloud, time.Since(started).Round(100*time.Millisecond))
	return f
}

func readJSON(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// startClusters starts the control cluster (its own etcd) and the target cluster (a second
// kube-apiserver on the same etcd, --etcd-prefix=/target); Cleanup stops the target first.
func (f *fleet) startClusters(ctx context.Context) {
	t := f.t
	control, err := cluster.Start(ctx, cluster.Options{BinDir: f.binDir})
	if err != nil {
		t.Fatalf("control cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(control.LogTail(30))
		}
		if err := control.Stop(); err != nil {
			t.Errorf("stopping the control cluster: %v", err)
		}
	})
	target, err := cluster.Start(ctx, cluster.Options{BinDir: f.binDir, Etcd: control.EtcdURL, EtcdPrefix: "/target"})
	if err != nil {
		t.Fatalf("target cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(target.LogTail(30))
		}
		if err := target.Stop(); err != nil {
			t.Errorf("stopping the target cluster: %v", err)
		}
	})
	f.control, f.target = control, target
	if f.machines, err = machineclient.NewForConfig(control.Admin); err != nil {
		t.Fatal(err)
	}
	if f.core, err = control.AdminClient(); err != nil {
		t.Fatal(err)
	}
	if f.nodes, err = target.AdminClient(); err != nil {
		t.Fatal(err)
	}
}

// renderedDeploy is deploy/overlays/<cloud> rendered with kustomize.
func (f *fleet) renderedDeploy() []*unstructured.Unstructured {
	rendered, err := cluster.Kustomize(filepath.Join("..", "..", "deploy", "overlays", f.cloud))
	if err != nil {
		f.t.Fatal(err)
	}
	objs, err := cluster.DecodeManifests(rendered)
	if err != nil {
		f.t.Fatal(err)
	}
	return objs
}

// installControl: MCM's CRDs, the namespace, everything deploy/overlays/<cloud> renders (the
// Deployment too: no kubelet runs it, the server validates it), and the controllers' kubeconfig:
// a token of deploy/'s service account.
func (f *fleet) installControl(ctx context.Context) {
	t := f.t
	if _, err := f.control.InstallMCMCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.control.EnsureNamespace(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	objs := f.renderedDeploy()
	for _, o := range objs {
		if o.GetNamespace() == "" && o.GetKind() != "Namespace" && !strings.HasPrefix(o.GetKind(), "Cluster") {
			o.SetNamespace(namespace)
		}
	}
	if err := cluster.Apply(ctx, f.control.Admin, objs); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.control.ServiceAccountConfig(ctx, namespace, account)
	if err != nil {
		t.Fatal(err)
	}
	f.controlKubeconfig = filepath.Join(f.dir, "control.kubeconfig")
	if err := cluster.WriteKubeconfig(cfg, f.controlKubeconfig); err != nil {
		t.Fatal(err)
	}
}

// renderedTarget is deploy/target rendered with kustomize: the target cluster's service
// account kube-system/machine-controller-manager and what gardenlet grants it in the shoot
// (deploy/target/rbac.yaml).
func (f *fleet) renderedTarget() []*unstructured.Unstructured {
	rendered, err := cluster.Kustomize(filepath.Join("..", "..", "deploy", "target"))
	if err != nil {
		f.t.Fatal(err)
	}
	objs, err := cluster.DecodeManifests(rendered)
	if err != nil {
		f.t.Fatal(err)
	}
	return objs
}

// installTarget: everything deploy/target renders (the service account Gardener's shoot access
// secret names, its ClusterRole, Role and bindings), applied as is, and the controllers' target
// kubeconfig: a token of that service account.
func (f *fleet) installTarget(ctx context.Context) {
	t := f.t
	// The API server creates kube-system itself, soon after it is ready: not waited for.
	if err := f.target.EnsureNamespace(ctx, targetNamespace); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, f.target.Admin, f.renderedTarget()); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.target.ServiceAccountConfig(ctx, targetNamespace, targetAccount)
	if err != nil {
		t.Fatal(err)
	}
	f.targetKubeconfig = filepath.Join(f.dir, "target.kubeconfig")
	if err := cluster.WriteKubeconfig(cfg, f.targetKubeconfig); err != nil {
		t.Fatal(err)
	}
}

// classAndSecret creates (first call: with the Secret) the MachineClass name from the
// provider's example providerSpec, as Gardener's worker controller does (admin here).
func (f *fleet) classAndSecret(ctx context.Context, name string) {
	t := f.t
	if f.spec == nil {
		raw, err := os.ReadFile(filepath.Join(f.examples, "machine-class.json"))
		if err != nil {
			t.Fatal(err)
		}
		// With update.removable, the class has the tag the hot update removes.
		f.spec = f.withRemovable(raw)
		var values map[string]string
		if err := readJSON(filepath.Join(f.examples, "secret.json"), &values); err != nil {
			t.Fatal(err)
		}
		f.secretData = map[string][]byte{}
		for k, v := range values {
			f.secretData[k] = []byte(v)
		}
		if _, ok := f.secretData["userData"]; !ok {
			f.secretData["userData"] = []byte("#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>\n")
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: namespace}, Data: f.secretData}
		if _, err := f.core.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref := &corev1.SecretReference{Name: "cloudprovider", Namespace: namespace}
	class := &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name, Namespace: namespace},
		Provider:             gardenerProvider[f.cloud],
		ProviderSpec:         runtime.RawExtension{Raw: f.spec},
		SecretRef:            ref,
		CredentialsSecretRef: ref,
	}
	if _, err := f.machines.MachineV1alpha1().MachineClasses(namespace).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// freePort is a loopback port no other process of this test got (cluster.FreePort).
func freePort(t testing.TB) int {
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// start starts a process whose log stays in f.dir; Cleanup stops it (SIGTERM, then SIGKILL).
func (f *fleet) start(name string, env []string, binary string, args ...string) *cluster.Process {
	f.t.Helper()
	if f.started == nil {
		f.started = map[string]int{}
	}
	f.started[name]++
	if n := f.started[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	p, err := cluster.StartProcess(f.dir, name, env, binary, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.all = append(f.all, p)
	f.t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	return p
}

func waitFor(t testing.TB, what string, timeout time.Duration, p *cluster.Process, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s: %s exited (%v) before it was ready\n%s", what, p.Name(), err, tail(p.Log(), 30))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after %s\n%s", what, timeout, tail(p.Log(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// An answer from the port is no proof that this process gave it: had another process
	// taken the port, this one would exit at once, unable to listen.
	time.Sleep(readyGrace)
	if exited, err := p.Exited(); exited {
		t.Fatalf("%s: %s exited (%v) although its port answered: another process has the port\n%s", what, p.Name(), err, tail(p.Log(), 30))
	}
}

// readyGrace is how long a process that answered its readiness check must live on: one that
// cannot listen exits well within it.
const readyGrace = 300 * time.Millisecond

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startFake starts the fake cloud as the conformance suite's --spawn-fake does
// (tests/conformance/src/spawn_fake.rs: --listen 127.0.0.1:<port>, ready on /_admin/calls), on
// its own, so that its state outlives the sidecar.
func (f *fleet) startFake(binary string) {
	port := freePort(f.t)
	f.fakeURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	f.fake = f.start("fake", nil, binary, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	waitFor(f.t, "fake cloud", 30*time.Second, f.fake, func() bool { return httpOK(f.fakeURL + "/_admin/calls") })
}

// container is the container (or init container) name of the Deployment deploy/overlays/<cloud>
// renders: its args and its environment (the literal values; valueFrom ones are left out).
func (f *fleet) container(name string) (args []string, env map[string]string) {
	t := f.t
	t.Helper()
	if f.deployment == nil {
		f.deployment = findObject(t, f.renderedDeploy(), "Deployment", account, "deploy/overlays/"+f.cloud)
	}
	for _, field := range []string{"initContainers", "containers"} {
		list, _, err := unstructured.NestedSlice(f.deployment.Object, "spec", "template", "spec", field)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			m, _ := c.(map[string]any)
			if m["name"] != name {
				continue
			}
			args, _, _ = unstructured.NestedStringSlice(m, "args")
			env = map[string]string{}
			vars, _, _ := unstructured.NestedSlice(m, "env")
			for _, v := range vars {
				e, _ := v.(map[string]any)
				if value, ok := e["value"].(string); ok {
					env[e["name"].(string)] = value
				}
			}
			return args, env
		}
	}
	t.Fatalf("deploy/overlays/%s renders no container %s in Deployment %s", f.cloud, name, account)
	return nil, nil
}

// processArgs is the rendered container's args, $(NAMESPACE) expanded (the Downward API's
// metadata.namespace), with the flags of overrides given their value here (kubeconfig files
// instead of inClusterConfig and the mounted Secret, a free port, the test's socket); a flag of
// overrides the container lacks is an error, so a renamed flag is noticed.
func (f *fleet) processArgs(name string, overrides map[string]string) []string {
	t := f.t
	t.Helper()
	args, _ := f.container(name)
	seen := map[string]bool{}
	out := make([]string, 0, len(args))
	for _, a := range args {
		a = strings.ReplaceAll(a, "$(NAMESPACE)", namespace)
		flagName, _, _ := strings.Cut(a, "=")
		if v, ok := overrides[flagName]; ok {
			a = flagName + "=" + v
			seen[flagName] = true
		}
		out = append(out, a)
	}
	for flagName := range overrides {
		if !seen[flagName] {
			t.Fatalf("deploy/overlays/%s: container %s has no %s", f.cloud, name, flagName)
		}
	}
	return out
}

// startSidecar starts the provider's sidecar with the environment of the rendered Deployment's
// machine-driver container (socket mode, JSON logs, shutdown grace: as rendered; the endpoint a
// socket in f.dir; metrics on a free loopback port) and --cloud-endpoint on the fake (as the
// conformance suite's --spawn with --spawn-fake).
func (f *fleet) startSidecar(binary string, wait bool) {
	if f.socket == "" {
		f.socket = filepath.Join(f.dir, "driver.sock")
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(f.t))
	_, rendered := f.container("machine-driver")
	overrides := map[string]string{
		"MACHINE_DRIVER_ENDPOINT":       "unix://" + f.socket,
		"MACHINE_DRIVER_METRICS_LISTEN": metrics,
	}
	var env []string
	for k, v := range rendered {
		if o, ok := overrides[k]; ok {
			v = o
		}
		env = append(env, k+"="+v)
	}
	for k := range overrides {
		if _, ok := rendered[k]; !ok {
			f.t.Fatalf("deploy/overlays/%s: container machine-driver has no %s", f.cloud, k)
		}
	}
	sort.Strings(env)
	f.sidecar = f.start("machine-driver", env, binary, "--cloud-endpoint", f.fakeURL)
	if !wait {
		return
	}
	// deploy/'s startup probe: /healthz on the metrics port.
	waitFor(f.t, "sidecar", 60*time.Second, f.sidecar, func() bool { return httpOK("http://" + metrics + "/healthz") })
}

// startMachineController starts adapter/cmd/machine-controller with the args of the rendered
// Deployment's machine-controller container (kubeconfig files instead of inClusterConfig and the
// mounted secret; the test's socket; its own port; the orphan period short).
func (f *fleet) startMachineController(wait bool) {
	port := freePort(f.t)
	args := f.processArgs("machine-controller", map[string]string{
		"--control-kubeconfig":               f.controlKubeconfig,
		"--target-kubeconfig":                f.targetKubeconfig,
		"--machine-driver-socket":            f.socket,
		"--machine-safety-orphan-vms-period": orphanPeriod.String(),
		"--port":                             strconv.Itoa(port),
	})
	f.mcMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	// The hot-update reconciler (off by default, not in deploy/): scenario 7.
	f.mc = f.start("machine-controller", nil, machineControllerBin, append(args, "--hot-update")...)
	if !wait {
		return
	}
	waitFor(f.t, "machine-controller", 60*time.Second, f.mc, func() bool { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)) })
}

// startMCM starts MCM's machine-controller-manager with the args of the rendered Deployment's
// machine-controller-manager container (Gardener's, gardener
// pkg/component/nodemanagement/machinecontrollermanager, plus leader election; kubeconfig files,
// its own port).
func (f *fleet) startMCM(wait bool) {
	port := freePort(f.t)
	f.mcm = f.start("machine-controller-manager", nil, filepath.Join(f.binDir, "machine-controller-manager"),
		f.processArgs("machine-controller-manager", map[string]string{
			"--control-kubeconfig": f.controlKubeconfig,
			"--target-kubeconfig":  f.targetKubeconfig,
			"--port":               strconv.Itoa(port),
		})...)
	if !wait {
		return
	}
	waitFor(f.t, "machine-controller-manager", 60*time.Second, f.mcm, func() bool { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)) })
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (f *fleet) dumpLogs() {
	for _, p := range f.all {
		f.t.Logf("--- %s (pid %d), last lines of %s\n%s", p.Name(), p.Pid(), p.LogPath(), tail(p.Log(), 40))
	}
}
