package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
