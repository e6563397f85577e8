package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	machinecontroller "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecontroller"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machineutils"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/machine-driver/controlplane/cluster"
)

// machineName is how a MachineSet of the class names its machines (plus 5
// random characters; MCM derives the bootstrap token id from the last five).
const machineName = "shoot--podtest-worker-a-z1-5d8b7-"

// gardenerProvider is the class's provider as Gardener's extensions write it.
var gardenerProvider = map[string]string{"aws": "AWS", "gcp": "GCP", "azure": "Azure", "openstack": "OpenStack", "alicloud": "Alicloud"}

func renderCommand(args []string) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	provider := fs.String("provider", "", "provider (a folder under providers/)")
	image := fs.String("image", "", "the provider image (imageVectorOverwrite's machine-controller-manager-provider-<provider>)")
	namespace := fs.String("namespace", "", "the shoot's namespace in the seed (default shoot--podtest--<provider>)")
	wi := fs.Bool("workload-identity", false, "the cloudprovider secret is a workload identity token requestor")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *provider == "" || *image == "" {
		return errors.New("render needs --provider and --image")
	}
	if *namespace == "" {
		*namespace = "shoot--podtest--" + *provider
	}
	sa, d := renderDeployment(*namespace, *provider, *image, *wi)
	role, binding := renderSeedRBAC(*namespace, sa.Name)
	for i, obj := range []any{sa, role, binding, d} {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Print(string(out))
	}
	return nil
}

// test is one run's state.
type test struct {
	provider, ns, pod, ctr, work, podman string
	examples, fakeBin                    string
	deployment                           *appsv1.Deployment
	deploymentFile, targetManifests      string
	rendered                             []*unstructured.Unstructured // every object of deploymentFile
	workloadIdentity                     bool
	evicted                              bool // the workload's pod was evicted (podEvicted)

	servers      *apiServers
	kc, tc       kubernetes.Interface
	mc           machineclient.Interface
	fake         *exec.Cmd
	admin        string // the fake cloud's admin API
	fakeEndpoint string
	base         string // http://127.0.0.1:10259
	began        time.Time
}

func runCommand(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	t := &test{}
	deployment := fs.String("deployment", "", "the rendered Deployment (render's output)")
	fs.StringVar(&t.provider, "provider", "", "provider")
	fs.StringVar(&t.examples, "examples", "", "the provider's examples directory (machine-class.json, secret.json)")
	fs.StringVar(&t.fakeBin, "fake", "", "the provider's fake cloud binary (conformance.json's fake)")
	fs.StringVar(&t.work, "work", "", "a scratch directory")
	fs.StringVar(&t.podman, "podman", "podman", "podman binary")
	fs.StringVar(&t.targetManifests, "target-manifests", "deploy/target", "the kustomization applied to the shoot (MCM's identity and RBAC there)")
	keep := fs.Bool("keep", false, "leave the pod and the fake cloud running at the end (debugging; the API servers end with this process)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if t.provider == "" || *deployment == "" || t.examples == "" || t.fakeBin == "" || t.work == "" {
		return errors.New("run needs --provider, --deployment, --examples, --fake and --work")
	}
	d, err := readDeployment(*deployment)
	if err != nil {
		return err
	}
	if t.rendered, err = readRendered(*deployment); err != nil {
		return err
	}
	t.deploymentFile = *deployment
	t.deployment, t.ns = d, d.Namespace
	for _, v := range d.Spec.Template.Spec.Volumes {
		t.workloadIdentity = t.workloadIdentity || v.Name == "workload-identity"
	}
	t.pod = "mcm-gardener-" + t.provider + "-test"
	t.ctr = t.pod + "-machine-controller-manager-" + t.provider
	t.base = "http://127.0.0.1:" + strconv.Itoa(portProviderMetrics)
	t.began = time.Now()
	if !*keep {
		defer t.cleanup()
	}
	err = t.run()
	if err != nil {
		t.dumpLogs()
	}
	fmt.Printf("=== %s: %s after %s\n", t.provider, map[bool]string{true: "PASS", false: "FAIL"}[err == nil], time.Since(t.began).Round(100*time.Millisecond))
	return err
}

func readDeployment(path string) (*appsv1.Deployment, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var probe metav1.TypeMeta
		if yaml.Unmarshal([]byte(doc), &probe) != nil || probe.Kind != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &d, nil
	}
	return nil, fmt.Errorf("%s: no Deployment", path)
}

func (t *test) step(name string, f func() error) error {
	began := time.Now()
	err := f()
	state := "ok"
	if err != nil {
		state = "FAILED"
	}
	fmt.Printf("--- %s %s (%.1f s)\n", state, name, time.Since(began).Seconds())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (t *test) run() error {
	if err := t.step("API servers (seed, shoot: kube-apiserver), fake cloud "+filepath.Base(t.fakeBin)+", files as the kubelet mounts them", t.setUp); err != nil {
		return err
	}
	if err := t.step("pod played with podman: /healthz on :10259 healthy", t.startPod); err != nil {
		return err
	}
	var m *v1alpha1.Machine
	if err := t.step("machine created: one VM, phase Pending", func() (err error) { m, err = t.createMachine(machineName + "x7k2p"); return err }); err != nil {
		return err
	}
	var nodeName string
	if err := t.step("node registered: machine Running", func() (err error) { nodeName, err = t.joinNode(m); return err }); err != nil {
		return err
	}
	if err := t.step("scrape of :10259: MCM's and the driver's series, each once", func() error { return t.checkMetrics(true) }); err != nil {
		return err
	}
	if err := t.step("driver killed in the container: /healthz unhealthy, then healthy; controller kept", t.crashDriver); err != nil {
		return err
	}
	if err := t.step("machine deleted: pod evicted, VM, Node and Machine gone", func() error { return t.deleteMachine(m, nodeName) }); err != nil {
		return err
	}
	if err := t.step("scrape of :10259 after the driver's restart", func() error { return t.checkMetrics(false) }); err != nil {
		return err
	}
	if err := t.step("SIGTERM with a CreateMachine in flight: exit 0 within the 5 s grace", t.sigterm); err != nil {
		return err
	}
	return t.step("no Forbidden in the container's log (the seed's Role as gardenlet grants it, deploy/target's RBAC in the shoot)", t.noForbidden)
}

// noForbidden fails on any line of the container's log that says forbidden: every request of
// the run had to be authorized by the RBAC applied in startAPIServers.
func (t *test) noForbidden() error {
	logs, err := exec.Command(t.podman, "logs", t.ctr).CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman logs: %v: %s", err, logs)
	}
	var forbidden []string
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			forbidden = append(forbidden, line)
		}
	}
	if len(forbidden) > 0 {
		return fmt.Errorf("%d log lines say forbidden, the first: %s", len(forbidden), strings.Join(forbidden[:min(3, len(forbidden))], "\n"))
	}
	fmt.Printf("    %d log lines, none forbidden\n", strings.Count(string(logs), "\n"))
	return nil
}

// --- setting up ------------------------------------------------------------

// freePort is a loopback port the API servers of this process were not given (cluster.FreePort).
func freePort() (int, error) { return cluster.FreePort() }

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		// 0644: the projected volumes' defaultMode 420, readable by the image's user.
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (t *test) setUp() error {
	if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(portProviderMetrics)); err != nil {
		return fmt.Errorf("port %d is taken on this host (the pod uses host networking): %w", portProviderMetrics, err)
	} else {
		_ = ln.Close()
	}
	if err := t.startAPIServers(); err != nil {
		return err
	}
	seedPort, err := t.servers.seedPort()
	if err != nil {
		return err
	}

	// The fake cloud on its own, so that its state outlives the driver's restart.
	port, err := freePort()
	if err != nil {
		return err
	}
	t.fakeEndpoint = "http://127.0.0.1:" + strconv.Itoa(port)
	t.admin = t.fakeEndpoint + "/_admin"
	log, err := os.Create(filepath.Join(t.work, "fake.log"))
	if err != nil {
		return err
	}
	t.fake = exec.Command(t.fakeBin, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	t.fake.Stdout, t.fake.Stderr = log, log
	if err := t.fake.Start(); err != nil {
		return err
	}
	if err := eventually(20*time.Second, "fake cloud answers", func() (bool, string) {
		resp, err := http.Get(t.admin + "/calls")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}); err != nil {
		return err
	}

	// What the kubelet mounts: the service account token volume
	// (gardener-resource-manager's), the generic kubeconfig (gardenlet's),
	// the workload identity token (the extension's).
	hostDirs := map[string]string{
		"kube-api-access-gardener": filepath.Join(t.work, "serviceaccount"),
		"kubeconfig":               filepath.Join(t.work, "generic-kubeconfig"),
		"workload-identity":        filepath.Join(t.work, "workload-identity"),
	}
	if err := writeFiles(hostDirs["kube-api-access-gardener"], map[string][]byte{
		"token": []byte(t.servers.seedToken), "ca.crt": t.servers.seed.CAData(), "namespace": []byte(t.ns),
	}); err != nil {
		return err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: shoot
clusters:
- name: shoot
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: shoot
  context:
    cluster: shoot
    user: machine-controller-manager
users:
- name: machine-controller-manager
  user:
    tokenFile: %s/token
`, t.servers.shoot.URL, base64.StdEncoding.EncodeToString(t.servers.shoot.CAData()), mountGenericKubeconfig)
	if err := writeFiles(hostDirs["kubeconfig"], map[string][]byte{"kubeconfig": []byte(kubeconfig), "token": []byte(t.servers.shootToken)}); err != nil {
		return err
	}
	if t.workloadIdentity {
		if err := writeFiles(hostDirs["workload-identity"], map[string][]byte{"token": []byte(workloadIdentityJWT(t.ns))}); err != nil {
			return err
		}
	}
	pod, err := admittedPod(t.deployment, t.provider, t.pod, hostDirs, []corev1.EnvVar{
		// The kubelet's, for the seed's API server (rest.InClusterConfig).
		{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: seedPort},
		// The test's only addition: the fake cloud instead of the real one.
		{Name: "MACHINE_DRIVER_CLOUD_ENDPOINT", Value: t.fakeEndpoint},
	})
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(t.work, "pod.yaml"), out, 0o644); err != nil {
		return err
	}
	return t.seed()
}

// workloadIdentityJWT is a token of the shape Gardener issues (the fake STS
// checks its claims and expiry, not its signature).
func workloadIdentityJWT(ns string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"iss": "https://issuer.gardener.cloud.example", "sub": "gardener.cloud:workloadidentity:garden-" + ns + ":cloudprovider",
			"aud": []string{"gardener"}, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}) + "." +
		base64.RawURLEncoding.EncodeToString([]byte("signature"))
}

// seed creates the cloudprovider secret, the class's user data secret and the class.
func (t *test) seed() error {
	ctx := context.Background()
	spec, err := os.ReadFile(filepath.Join(t.examples, "machine-class.json"))
	if err != nil {
		return err
	}
	var values map[string]string
	raw, err := os.ReadFile(filepath.Join(t.examples, "secret.json"))
	if err != nil || json.Unmarshal(raw, &values) != nil {
		return fmt.Errorf("secret.json: %v", err)
	}
	userData := values["userData"]
	delete(values, "userData")
	if userData == "" {
		userData = "#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>\n"
	}
	credentials := map[string][]byte{}
	for k, v := range values {
		credentials[k] = []byte(v)
	}
	if t.workloadIdentity {
		if t.provider != "aws" {
			return fmt.Errorf("workload identity is tested for aws only, not %s", t.provider)
		}
		// As extension-aws writes the secret for a workload identity (pkg/aws/types.go).
		credentials = map[string][]byte{
			"workloadIdentityTokenFile": []byte(mountWorkloadIdentity + "/token"),
			"roleARN":                   []byte("arn:aws:iam::123456789012:role/" + t.ns),
		}
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: t.ns}, Data: credentials},
		{ObjectMeta: metav1.ObjectMeta{Name: "shoot--podtest-worker-a-z1-0a1b2", Namespace: t.ns}, Data: map[string][]byte{"userData": []byte(userData)}},
	}
	for _, s := range secrets {
		if _, err := t.kc.CoreV1().Secrets(t.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: secrets[1].Name, Namespace: t.ns},
		Provider:             gardenerProvider[t.provider],
		ProviderSpec:         runtime.RawExtension{Raw: spec},
		SecretRef:            &corev1.SecretReference{Name: secrets[1].Name, Namespace: t.ns},
		CredentialsSecretRef: &corev1.SecretReference{Name: "cloudprovider", Namespace: t.ns},
	}
	_, err = t.mc.MachineV1alpha1().MachineClasses(t.ns).Create(ctx, class, metav1.CreateOptions{})
	return err
}

func (t *test) startPod() error {
	_ = exec.Command(t.podman, "pod", "rm", "-f", "-t", "0", t.pod).Run()
	if out, err := exec.Command(t.podman, "kube", "play", "--quiet", filepath.Join(t.work, "pod.yaml")).CombinedOutput(); err != nil {
		return fmt.Errorf("podman kube play: %v: %s", err, out)
	}
	user, _ := exec.Command(t.podman, "inspect", "--format", "{{.Config.User}}", t.ctr).Output()
	fmt.Printf("    container %s runs as user %q (the image's; Gardener sets none)\n", t.ctr, strings.TrimSpace(string(user)))
	return eventually(90*time.Second, "/healthz 200", func() (bool, string) {
		code, body := t.healthz()
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// --- the lifecycle ---------------------------------------------------------

func (t *test) machine(name string) (*v1alpha1.Machine, error) {
	return t.mc.MachineV1alpha1().Machines(t.ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (t *test) createMachine(name string) (*v1alpha1.Machine, error) {
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.ns},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "shoot--podtest-worker-a-z1-0a1b2"}},
	}
	if _, err := t.mc.MachineV1alpha1().Machines(t.ns).Create(context.Background(), m, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var got *v1alpha1.Machine
	err := eventually(90*time.Second, "VM created, machine Pending", func() (bool, string) {
		m, err := t.machine(name)
		if err != nil {
			return false, err.Error()
		}
		got = m
		state := fmt.Sprintf("providerID %q, node %q, %+v %+v", m.Spec.ProviderID, m.Labels[v1alpha1.NodeLabelKey], m.Status.CurrentStatus, m.Status.LastOperation)
		if m.Spec.ProviderID == "" || m.Labels[v1alpha1.NodeLabelKey] == "" || m.Status.CurrentStatus.Phase != v1alpha1.MachinePending {
			return false, state
		}
		live, err := t.liveVMs(name)
		return err == nil && live == 1, fmt.Sprintf("%s; %d live VMs (%v)", state, live, err)
	})
	return got, err
}

func (t *test) joinNode(m *v1alpha1.Machine) (string, error) {
	ctx := context.Background()
	nodeName := m.Labels[v1alpha1.NodeLabelKey]
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelHostname: nodeName}},
		Spec:       corev1.NodeSpec{ProviderID: m.Spec.ProviderID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: now, LastHeartbeatTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
		}},
	}
	// As the kubelet registers: the Node, then its status (the status subresource).
	status := node.Status
	created, err := t.tc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	created.Status = status
	// MCM's machine-controller adds its finalizer to the Node as soon as it sees it: the real
	// API server then refuses a status update of the older version (a conflict), as it would
	// the kubelet's, which reads the Node again and retries.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := t.tc.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			latest, getErr := t.tc.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			latest.Status = status
			created = latest
		}
		return err
	})
	if err != nil {
		return "", err
	}
	if err := t.startWorkload(ctx, nodeName); err != nil {
		return "", err
	}
	return nodeName, eventually(90*time.Second, "machine Running on its Node", func() (bool, string) {
		m, err := t.machine(m.Name)
		if err != nil {
			return false, err.Error()
		}
		n, err := t.tc.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning &&
				slices.Contains(n.Finalizers, machinecontroller.NodeFinalizerName) &&
				n.Labels[machineutils.MachineLabelKey] == m.Name,
			fmt.Sprintf("%+v %+v; node finalizers %v, labels %v", m.Status.CurrentStatus, m.Status.LastOperation, n.Finalizers, n.Labels)
	})
}

func (t *test) deleteMachine(m *v1alpha1.Machine, nodeName string) error {
	ctx := context.Background()
	if err := t.mc.MachineV1alpha1().Machines(t.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	began := time.Now()
	var marks []string
	mark := func(what string) { marks = append(marks, fmt.Sprintf("%s %.1f s", what, time.Since(began).Seconds())) }
	defer func() { fmt.Printf("    %s\n", strings.Join(marks, ", ")) }()
	if err := eventually(90*time.Second, "pod evicted", t.podEvicted); err != nil {
		return err
	}
	if !t.evicted {
		return errors.New("the pod was deleted, not evicted: it never had the DisruptionTarget condition (reason EvictionByEvictionAPI) an eviction sets")
	}
	mark("evicted")
	if err := eventually(90*time.Second, "VM deleted", func() (bool, string) {
		live, err := t.liveVMs(m.Name)
		return err == nil && live == 0, fmt.Sprintf("%d live VMs (%v)", live, err)
	}); err != nil {
		return err
	}
	mark("VM gone")
	if err := eventually(90*time.Second, "Node deleted", func() (bool, string) {
		_, err := t.tc.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	}); err != nil {
		return err
	}
	mark("Node gone")
	defer mark("Machine gone")
	return eventually(90*time.Second, "Machine gone", func() (bool, string) {
		got, err := t.machine(m.Name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("%+v", got.Status.LastOperation)
	})
}

// --- the fake cloud --------------------------------------------------------

func (t *test) liveVMs(name string) (int, error) {
	resp, err := http.Get(t.admin + "/inventory")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var inv struct {
		Instances []struct {
			Name string `json:"name"`
			Live bool   `json:"live"`
		} `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil {
		return 0, err
	}
	n := 0
	for _, i := range inv.Instances {
		if i.Live && i.Name == name {
			n++
		}
	}
	return n, nil
}

func (t *test) adminPost(path, body string) error {
	resp, err := http.Post(t.admin+"/"+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}

// --- health, metrics -------------------------------------------------------

func (t *test) healthz() (int, string) {
	c := http.Client{Timeout: 5 * time.Second} // the probe's timeoutSeconds
	resp, err := c.Get(t.base + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func (t *test) scrape() (string, error) {
	resp, err := http.Get(t.base + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(body), err
}

// The families the scrape must have: MCM's (its controller's and the driver
// calls the adapter records) and the driver's (the cloud calls it made).
var (
	mcmFamilies    = []string{"mcm_cloud_api_driver_request_duration_seconds", "mcm_machine_controller_frozen", "mcm_workqueue_adds_total", "process_open_fds"}
	driverFamilies = []string{"mcm_cloud_api_requests_total", "mcm_cloud_api_api_request_duration_seconds"}
)

func checkScrape(text string) (families map[string]bool, err error) {
	types, series := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			types[strings.Fields(rest)[0]]++
		} else if line != "" && !strings.HasPrefix(line, "#") {
			series[line[:strings.LastIndex(line, " ")]]++
		}
	}
	var dups []string
	for name, n := range types {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("family %s %d times", name, n))
		}
	}
	for s, n := range series {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("series %s %d times", s, n))
		}
	}
	if len(dups) > 0 {
		slices.Sort(dups)
		return nil, errors.New(strings.Join(dups, "; "))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		return nil, fmt.Errorf("the scrape does not parse: %w", err)
	}
	families = map[string]bool{}
	for name := range types {
		families[name] = true
	}
	return families, nil
}

func (t *test) checkMetrics(save bool) error {
	text, err := t.scrape()
	if err != nil {
		return err
	}
	if save {
		_ = os.WriteFile(filepath.Join(t.work, "metrics.txt"), []byte(text), 0o644)
	}
	families, err := checkScrape(text)
	if err != nil {
		return err
	}
	var missing []string
	for _, f := range append(append([]string{}, mcmFamilies...), driverFamilies...) {
		if !families[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the scrape lacks %v", missing)
	}
	// The labels Gardener's dashboards group by.
	re := regexp.MustCompile(`(?m)^mcm_cloud_api_requests_total\{[^}]*provider="[^"]+"[^}]*service="[^"]+"`)
	if !re.MatchString(text) {
		return errors.New("mcm_cloud_api_requests_total has no series with provider and service labels")
	}
	if t.workloadIdentity && save {
		// The driver read the token Gardener mounts and exchanged it (one STS call, counted).
		sts := regexp.MustCompile(`(?m)^mcm_cloud_api_requests_total\{[^}]*service="sts.AssumeRoleWithWebIdentity"[^}]*\} [1-9]`)
		if !sts.MatchString(text) {
			return errors.New("workload identity: no sts.AssumeRoleWithWebIdentity call counted")
		}
		fmt.Printf("    workload identity: the token at %s/token exchanged (sts.AssumeRoleWithWebIdentity counted)\n", mountWorkloadIdentity)
	}
	cloud := 0
	for name := range families {
		if strings.HasPrefix(name, "mcm_cloud_api_") {
			cloud++
		}
	}
	fmt.Printf("    %d families, %d of them mcm_cloud_api_*, none twice\n", len(families), cloud)
	return nil
}

// --- the driver's crash ----------------------------------------------------

// containerPID is the host pid of the container's PID 1 (the machine-controller).
func (t *test) containerPID() (int, error) {
	out, err := exec.Command(t.podman, "inspect", "--format", "{{.State.Pid}}", t.ctr).Output()
	if err != nil {
		return 0, fmt.Errorf("podman inspect: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// childPID is the host pid of the process whose parent is pid (the driver).
func childPID(parent int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child of %d", parent)
}

func (t *test) crashDriver() error {
	controller, err := t.containerPID()
	if err != nil {
		return err
	}
	driver, err := childPID(controller)
	if err != nil {
		return err
	}
	if err := syscall.Kill(driver, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %d: %w", driver, err)
	}
	killed := time.Now()
	var unhealthy string
	if err := eventually(10*time.Second, "/healthz unhealthy", func() (bool, string) {
		code, body := t.healthz()
		unhealthy = fmt.Sprintf("%d %s", code, body)
		return code != http.StatusOK, unhealthy
	}); err != nil {
		return err
	}
	fmt.Printf("    driver (host pid %d) killed; %.1f s later /healthz: %s\n", driver, time.Since(killed).Seconds(), unhealthy)
	if err := eventually(60*time.Second, "/healthz healthy again", func() (bool, string) {
		code, body := t.healthz()
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	}); err != nil {
		return err
	}
	now, err := t.containerPID()
	if err != nil || now != controller {
		return fmt.Errorf("the machine-controller is pid %d now (%v), was %d: it did not stay up", now, err, controller)
	}
	restarted, err := childPID(controller)
	if err != nil || restarted == driver {
		return fmt.Errorf("driver pid %d after the restart (%v), was %d", restarted, err, driver)
	}
	fmt.Printf("    healthy again %.1f s after the kill: controller pid %d kept, driver restarted as pid %d\n", time.Since(killed).Seconds(), controller, restarted)
	return nil
}

// --- SIGTERM ---------------------------------------------------------------

var inFlightLine = regexp.MustCompile(`(?m)^machine_controller_driver_calls_in_flight (\S+)$`)

func (t *test) callsInFlight() float64 {
	text, err := t.scrape()
	if err != nil {
		return -1
	}
	m := inFlightLine.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

var (
	shutdownLine = regexp.MustCompile(`driver calls in flight at shutdown: (\d+); still open after (\S+): (\d+)`)
	stoppedLine  = regexp.MustCompile(`machine-controller stopped after (\S+)`)
)

func (t *test) sigterm() error {
	// The cloud takes 2.5 s to create a VM: the CreateMachine is in flight that
	// long, less than the driver's shutdown grace (3 s).
	if err := t.adminPost("latency", `{"operation": "create", "ms": 2500}`); err != nil {
		return err
	}
	if _, err := t.mc.MachineV1alpha1().Machines(t.ns).Create(context.Background(), &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: machineName + "q4m9z", Namespace: t.ns},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "shoot--podtest-worker-a-z1-0a1b2"}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// In flight on two polls 200 ms apart: the slow create, not a quick status call.
	seen := 0
	if err := eventually(60*time.Second, "a driver call in flight", func() (bool, string) {
		v := t.callsInFlight()
		if v >= 1 {
			seen++
		} else {
			seen = 0
		}
		time.Sleep(200 * time.Millisecond)
		return seen >= 2, fmt.Sprintf("%v in flight", v)
	}); err != nil {
		return err
	}
	// What the kubelet does at the pod's deletion: SIGTERM to the container's
	// main process, SIGKILL when it still runs after the grace (5 s).
	began := time.Now()
	if out, err := exec.Command(t.podman, "kill", "--signal", "TERM", t.ctr).CombinedOutput(); err != nil {
		return fmt.Errorf("podman kill --signal TERM: %v: %s", err, out)
	}
	waited := make(chan []byte, 1)
	go func() {
		out, _ := exec.Command(t.podman, "wait", t.ctr).CombinedOutput()
		waited <- out
	}()
	var took time.Duration
	select {
	case <-waited:
		took = time.Since(began)
	case <-time.After(5 * time.Second):
		_ = exec.Command(t.podman, "kill", "--signal", "KILL", t.ctr).Run()
		<-waited
		return errors.New("the container still ran 5 s after SIGTERM: killed, as the kubelet would")
	}
	code, err := exec.Command(t.podman, "inspect", "--format", "{{.State.ExitCode}}", t.ctr).Output()
	if err != nil {
		return err
	}
	logs, _ := exec.Command(t.podman, "logs", t.ctr).CombinedOutput()
	m := shutdownLine.FindSubmatch(logs)
	stopped := stoppedLine.FindSubmatch(logs)
	live, _ := t.liveVMs(machineName + "q4m9z")
	fmt.Printf("    exited %.2f s after SIGTERM (podman wait), exit status %s; log: %q, %q; the second machine's VM created: %v\n",
		took.Seconds(), strings.TrimSpace(string(code)), m, stopped, live == 1)
	switch {
	case strings.TrimSpace(string(code)) != "0":
		return fmt.Errorf("exit status %s, want 0 (137: killed at the end of the grace)", strings.TrimSpace(string(code)))
	case m == nil || stopped == nil:
		return errors.New("no shutdown summary in the log")
	case string(m[1]) == "0":
		return errors.New("no driver call was in flight at SIGTERM")
	case string(m[3]) != "0":
		return fmt.Errorf("%s driver calls still open at exit", m[3])
	}
	return nil
}

// --- plumbing --------------------------------------------------------------

func eventually(limit time.Duration, what string, check func() (bool, string)) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		ok, state := check()
		if ok {
			return nil
		}
		last = state
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s; last: %s", what, limit, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (t *test) dumpLogs() {
	out, _ := exec.Command(t.podman, "logs", "--tail", "80", t.ctr).CombinedOutput()
	fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", t.ctr, out)
	if fake, err := os.ReadFile(filepath.Join(t.work, "fake.log")); err == nil {
		lines := strings.Split(strings.TrimSpace(string(fake)), "\n")
		fmt.Fprintf(os.Stderr, "--- last lines of the fake cloud:\n%s\n", strings.Join(lines[max(0, len(lines)-20):], "\n"))
	}
}

func (t *test) cleanup() {
	_ = exec.Command(t.podman, "pod", "rm", "-f", "-t", "0", t.pod).Run()
	if t.fake != nil && t.fake.Process != nil {
		_ = t.fake.Process.Kill()
		_ = t.fake.Wait()
	}
	if t.servers != nil {
		t.servers.stop()
	}
}
