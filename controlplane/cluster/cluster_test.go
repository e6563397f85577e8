package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// startForTest starts the control plane, stopped when the test ends (also when it fails);
// the processes' logs are printed when it failed. Without the binaries it skips, unless CI
// is set: there a missing build is a failure.
func startForTest(t *testing.T) *Cluster {
	t.Helper()
	bin, err := DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if !BinariesPresent(bin) {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: no etcd and kube-apiserver in %s: run controlplane/build.sh first", bin)
		}
		t.Skipf("no etcd and kube-apiserver in %s: run controlplane/build.sh", bin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := time.Now()
	c, err := Start(ctx, Options{BinDir: bin})
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Logf("etcd and kube-apiserver (%s) ready in %s at %s", bin, time.Since(started).Round(time.Millisecond), c.URL)
	pids := c.Pids()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTail(60))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
		for _, pid := range pids {
			// Signal 0 to the process group: ESRCH once every member is gone.
			if err := syscall.Kill(-pid, 0); err == nil {
				t.Errorf("process group %d still alive after Stop", pid)
			}
		}
	})
	return c
}

const (
	// The overlay's namespace and service account (deploy/overlays/aws, deploy/base).
	deployNamespace = "machine-controller-manager"
	deployAccount   = "machine-controller-manager"
)

// The control plane validates MCM's CRDs and deploy/'s manifests, and enforces deploy/'s RBAC
// on the controllers' service account: what the Role grants on Machines works (get, list,
// watch, update), what it does not grant is Forbidden, and the account is who the server
// says it is.
func TestRBACOfDeployIsEnforcedOnMachines(t *testing.T) {
	c := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	crds, err := c.InstallMCMCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(crds, "machines.machine.sapcloud.io") {
		t.Fatalf("MCM's CRDs installed: %v, machines.machine.sapcloud.io missing", crds)
	}

	rendered, err := Kustomize(filepath.Join("..", "..", "deploy", "overlays", "aws"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if o.GetNamespace() != deployNamespace {
			t.Fatalf("rendered %s %s is in namespace %q, not the overlay's %q", o.GetKind(), o.GetName(), o.GetNamespace(), deployNamespace)
		}
	}
	for _, want := range []string{"ServiceAccount/" + deployAccount, "Role/" + deployAccount, "RoleBinding/" + deployAccount} {
		if !slices.Contains(kinds, want) {
			t.Fatalf("deploy/overlays/aws renders %v, no %s", kinds, want)
		}
	}
	if err := c.EnsureNamespace(ctx, deployNamespace); err != nil {
		t.Fatal(err)
	}
	// Every rendered object, the Deployment included: the API server validates them all.
	if err := Apply(ctx, c.Admin, objs); err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %v", kinds)

	admin, err := machineclient.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	machine := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m-1", Namespace: deployNamespace, Labels: map[string]string{"node": "node-1"}},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "class-1"}},
	}
	if _, err := admin.MachineV1alpha1().Machines(deployNamespace).Create(ctx, machine, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a Machine: %v", err)
	}
	// The CRD's schema is enforced: a Machine whose class is not an object is refused.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine",
		"metadata": map[string]any{"name": "m-bad", "namespace": deployNamespace},
		"spec":     map[string]any{"class": "not-an-object"},
	}}
	dyn, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	machineGVR := schema.GroupVersionResource{Group: "machine.sapcloud.io", Version: "v1alpha1", Resource: "machines"}
	if _, err := dyn.Resource(machineGVR).Namespace(deployNamespace).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("a Machine with spec.class a string: %v, want Invalid from the CRD's schema", err)
	}

	saCfg, err := c.ServiceAccountConfig(ctx, deployNamespace, deployAccount)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := machineclient.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	saCore, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := saCore.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantUser := "system:serviceaccount:" + deployNamespace + ":" + deployAccount
	if got := who.Status.UserInfo.Username; got != wantUser {
		t.Fatalf("the token authenticates as %q, want %q", got, wantUser)
	}

	// Granted by the Role: get, list, watch, update.
	machines := sa.MachineV1alpha1().Machines(deployNamespace)
	got, err := machines.Get(ctx, "m-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("service account getting the Machine: %v", err)
	}
	list, err := machines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("service account listing Machines: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "m-1" {
		t.Fatalf("service account lists %d Machines, want m-1 only", len(list.Items))
	}
	w, err := machines.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("service account watching Machines: %v", err)
	}
	defer w.Stop()
	got.Labels["updated-by"] = "service-account"
	updated, err := machines.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("service account updating the Machine: %v", err)
	}
	if updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update kept resourceVersion %s", got.ResourceVersion)
	}
	select {
	case ev := <-w.ResultChan():
		m, ok := ev.Object.(*v1alpha1.Machine)
		if ev.Type != watch.Modified || !ok || m.Labels["updated-by"] != "service-account" || m.ResourceVersion != updated.ResourceVersion {
			t.Fatalf("watch delivered %s %T, want the update at resourceVersion %s", ev.Type, ev.Object, updated.ResourceVersion)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch delivered no event for the update")
	}

	// Not granted: deleting a namespace (no ClusterRole), Machines of another namespace (the
	// Role is namespaced), creating a Secret (the Role has secrets without create).
	forbidden := map[string]error{}
	forbidden["delete namespace default"] = saCore.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{})
	_, err = sa.MachineV1alpha1().Machines(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	forbidden["list machines in default"] = err
	_, err = saCore.CoreV1().Secrets(deployNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	forbidden["create secret"] = err
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("service account may not %s: got %v, want Forbidden", what, err)
		} else if !strings.Contains(err.Error(), wantUser) {
			t.Errorf("%s: Forbidden does not name %s: %v", what, wantUser, err)
		}
	}
	// The manifests are what is tested: the rendered Role without "update" on Machines,
	// applied, makes the same update Forbidden.
	var role *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetName() == deployAccount {
			role = o.DeepCopy()
		}
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	removed := 0
	for _, r := range rules {
		rule := r.(map[string]any)
		resources, _ := rule["resources"].([]any)
		if !slices.Contains(resources, any("machines")) {
			continue
		}
		verbs, _ := rule["verbs"].([]any)
		rule["verbs"] = slices.DeleteFunc(slices.Clone(verbs), func(v any) bool { return v == "update" })
		removed += len(verbs) - len(rule["verbs"].([]any))
	}
	if removed != 1 {
		t.Fatalf("the rendered Role grants update on machines %d times, want once", removed)
	}
	if err := unstructured.SetNestedSlice(role.Object, rules, "rules"); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, c.Admin, []*unstructured.Unstructured{role}); err != nil {
		t.Fatal(err)
	}
	// RBAC's authorizer reads Roles through an informer: poll until the change is seen.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := machines.Get(ctx, "m-1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("service account getting the Machine after the Role change: %v", err)
		}
		cur.Labels["updated-by"] = "again"
		_, err = machines.Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil && !apierrors.IsConflict(err) {
			t.Fatalf("update without the verb: %v, want Forbidden", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("update still allowed 10 s after the Role lost it (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The namespace is still there (the admin sees it).
	adminCore, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminCore.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace default after the forbidden delete: %v", err)
	}
}
