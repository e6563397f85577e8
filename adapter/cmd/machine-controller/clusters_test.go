package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/machine-driver/controlplane/cluster"
)

// controlPlane is the package's one real control plane (controlplane/cluster): the
// control cluster (its own etcd, MCM's CRDs installed from MCM's module) and the
// target cluster (a second kube-apiserver on the same etcd under --etcd-prefix=/target),
// started by the first test that needs it and stopped by TestMain.
var controlPlane struct {
	once            sync.Once
	control, target *cluster.Cluster
	err             error
	started         time.Duration
}

// clusterSeq numbers the tests' namespaces and node names: the tests share one control
// plane, so each scenario gets names of its own.
var clusterSeq atomic.Int32

// startControlPlane starts the control and the target cluster (once per package run).
func startControlPlane() error {
	controlPlane.once.Do(func() {
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		control, err := cluster.Start(ctx, cluster.Options{})
		if err != nil {
			controlPlane.err = fmt.Errorf("control cluster: %w", err)
			return
		}
		controlPlane.control = control
		if _, err := control.InstallMCMCRDs(ctx); err != nil {
			controlPlane.err = fmt.Errorf("MCM's CRDs: %w", err)
			return
		}
		target, err := cluster.Start(ctx, cluster.Options{Etcd: control.EtcdURL, EtcdPrefix: "/target"})
		if err != nil {
			controlPlane.err = fmt.Errorf("target cluster: %w", err)
			return
		}
		controlPlane.target = target
		controlPlane.started = time.Since(began)
		fmt.Printf("control plane (control and target kube-apiservers, one etcd, MCM's CRDs) up in %s\n", controlPlane.started.Round(10*time.Millisecond))
	})
	return controlPlane.err
}

// stopControlPlane stops what startControlPlane started (the target first: it uses the
// control cluster's etcd).
func stopControlPlane() {
	for _, c := range []*cluster.Cluster{controlPlane.target, controlPlane.control} {
		if c != nil {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
			}
		}
	}
}

// skipOrFail skips without what the test needs, unless CI is set: there it fails.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// clusters is one scenario's share of the control plane.
type clusters struct {
	kc, tc *kubernetes.Clientset
	mc     *machineclient.Clientset
	// suffix makes the scenario's namespace and node names its own ("-<n>").
	suffix string
}

// startClusters gives t the package's real control plane (started on first use; skipped
// without the binaries controlplane/build.sh builds, failed then when CI is set), writes the
// admin kubeconfigs of the control and the target cluster to dir/control and dir/target (for
// --control-kubeconfig and --target-kubeconfig), and answers admin clients of both: kc and
// mc of the control cluster, tc of the target. Nodes t created are deleted when it ends.
func startClusters(t *testing.T, dir string) *clusters {
	t.Helper()
	bin, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if !cluster.BinariesPresent(bin) {
		skipOrFail(t, "no etcd and kube-apiserver in %s: run controlplane/build.sh (or set %s)", bin, cluster.EnvBinDir)
	}
	if err := startControlPlane(); err != nil {
		t.Fatal(err)
	}
	control, target := controlPlane.control, controlPlane.target
	for name, c := range map[string]*cluster.Cluster{"control": control, "target": target} {
		if err := cluster.WriteKubeconfig(c.Admin, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c := &clusters{suffix: fmt.Sprintf("-%d", clusterSeq.Add(1))}
	if c.kc, err = control.AdminClient(); err != nil {
		t.Fatal(err)
	}
	if c.tc, err = target.AdminClient(); err != nil {
		t.Fatal(err)
	}
	if c.mc, err = machineclient.NewForConfig(control.Admin); err != nil {
		t.Fatal(err)
	}
	return c
}

// createNode registers node in the target cluster as a kubelet would (its status through
// the status subresource) and deletes it when t ends, MCM's finalizer removed first.
func (c *clusters) createNode(t *testing.T, node *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	status := node.Status
	created, err := c.tc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n, err := c.tc.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err == nil && len(n.Finalizers) > 0 {
			n.Finalizers = nil
			_, _ = c.tc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		_ = c.tc.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
	})
	created.Status = status
	if _, err := c.tc.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningMachine is what (*clusters).createRunningMachine makes: namespace ns,
// the class secret (userData "#!/bin/sh"), the machine class (provider fake,
// providerSpec spec, the secret as its secretRef), a node of the target
// cluster whose Ready condition is ready (for reason), and a Running machine
// of the class on that node (its last operation a successful create), both
// with providerID.
type runningMachine struct {
	ns, secret, class, spec string
	node, providerID        string
	ready                   corev1.ConditionStatus
	readyReason             string
	name                    string
}

// createRunningMachine creates r's objects and answers the machine.
func (c *clusters) createRunningMachine(t *testing.T, r runningMachine) *v1alpha1.Machine {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kc.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.secret, Namespace: r.ns},
		Data: map[string][]byte{"userData": []byte("#!/bin/sh")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.mc.MachineV1alpha1().MachineClasses(r.ns).Create(ctx, &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: r.class, Namespace: r.ns, Finalizers: []string{"machine.sapcloud.io/machine-controller"}},
		Provider:     "fake",
		ProviderSpec: runtime.RawExtension{Raw: []byte(r.spec)},
		SecretRef:    &corev1.SecretReference{Name: r.secret, Namespace: r.ns},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createNode(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.node},
		Spec: corev1.NodeSpec{ProviderID: r.providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: r.ready,
			Reason: r.readyReason, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
	})
	m, err := c.mc.MachineV1alpha1().Machines(r.ns).Create(ctx, &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns, Labels: map[string]string{v1alpha1.NodeLabelKey: r.node}},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: r.class}, ProviderID: r.providerID},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.Now()}
	m.Status.LastOperation = v1alpha1.LastOperation{Description: "Machine " + r.name + " successfully joined the cluster",
		State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate, LastUpdateTime: metav1.Now()}
	if _, err := c.mc.MachineV1alpha1().Machines(r.ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// controllerArgs are the machine-controller's flags for the sidecar on
// socket, namespace ns, metrics on port and the kubeconfigs startClusters
// wrote to dir, then more.
func controllerArgs(socket, ns, port, dir string, more ...string) []string {
	return append([]string{"--machine-driver-socket=" + socket, "--namespace=" + ns, "--port=" + port,
		"--control-kubeconfig=" + filepath.Join(dir, "control"), "--target-kubeconfig=" + filepath.Join(dir, "target")}, more...)
}

// scrape is the body of the machine-controller's /metrics on port (empty
// when it does not answer).
func scrape(port string) string {
	resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
	if err != nil {
		return ""
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return string(body)
}
