package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	machinecontroller "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecontroller"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machineutils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/machine-driver/adapter/mcmharness"
)

// MCM's own machine controller (its exported constructor, fake clientsets and
// informers as MCM's controller tests use, no target cluster) drives every
// provider's real sidecar on its embedded fake cloud through the adapter: the
// machine is created and initialized (phase Available: without a target
// cluster there is no Node to wait for) after MCM retried a throttled create,
// with exactly one VM live in the fake's inventory;
// an orphan VM is collected while the machine's own stays; then the machine is
// deleted, its VM gone, its finalizer removed and the object with it.
func TestMCMControllerDrivesTheSidecarOfEveryProvider(t *testing.T) {
	eachProvider(t, controllerFlow)
}

// The same with a target cluster (a fake clientset and informers for Nodes,
// Pods, PVs, PVCs, VolumeAttachments and PDBs, as MCM's controller reads
// them): MCM creates and initializes the VM and waits in phase Pending; the
// test plays the kubelet and registers the Node (named by the machine's `node`
// label, with its providerID and a Ready condition); MCM takes the node over
// and the machine reaches phase Running. Deleting the machine drains the node
// (cordon, then eviction of its pod), deletes the VM through DeleteMachine,
// then the Node object, and removes the machine, in that order.
func TestMCMControllerWithTargetClusterDrivesTheSidecarOfEveryProvider(t *testing.T) {
	eachProvider(t, targetClusterFlow)
}

const e2eNamespace = "shoot--e2e--cluster"

// e2e is one provider's sidecar on its embedded fake cloud with MCM's machine
// controller (adapter/mcmharness) in front of it.
type e2e struct {
	t        *testing.T
	d        *Driver
	admin    string // the fake cloud's admin API
	name     string // the Machine's
	class    *v1alpha1.MachineClass
	secret   *corev1.Secret
	machines *machinefake.Clientset
	target   *k8sfake.Clientset // nil without a target cluster
	h        *mcmharness.Harness

	mu sync.Mutex
	// Per observed call in the target cluster: the VMs of the machine live in
	// the fake cloud at that moment (-1 when the fake could not be asked).
	evictions     []int
	nodeDeletions []int
}

func newE2E(t *testing.T, binary, examples string, withTarget bool) *e2e {
	admin := freeAddr(t)
	e := &e2e{t: t, admin: admin, d: startSidecar(t, binary, "--embedded-fake-listen", admin)}
	spec, secretData := exampleClass(t, examples)
	e.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: e2eNamespace}, Data: secretData}
	if _, ok := e.secret.Data["userData"]; !ok {
		e.secret.Data["userData"] = []byte("#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>\n")
	}
	ref := &corev1.SecretReference{Name: e.secret.Name, Namespace: e2eNamespace}
	e.class = &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "class", Namespace: e2eNamespace},
		Provider:             e.d.Provider,
		ProviderSpec:         runtime.RawExtension{Raw: spec},
		SecretRef:            ref,
		CredentialsSecretRef: ref,
	}
	e.name = fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000)
	machine := &v1alpha1.Machine{
		// As the API server sets them (the fake clientset does not).
		ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e2eNamespace, UID: types.UID("uid-" + e.name), CreationTimestamp: metav1.Now()},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: e.class.Name}},
	}
	e.h = mcmharness.New(t, mcmharness.Options{
		Namespace:      e2eNamespace,
		Driver:         e.d,
		MachineObjects: []runtime.Object{e.class, machine},
		CoreObjects:    []runtime.Object{e.secret},
		TargetCluster:  withTarget,
		OnEviction:     func() { e.observe(&e.evictions) },
		OnNodeDeletion: func() { e.observe(&e.nodeDeletions) },
	})
	e.machines, e.target = e.h.Machines, e.h.Target
	return e
}

// run starts the informers and the controller; both stop when the test ends.
func (e *e2e) run() { e.h.Run() }

// observe appends the number of the machine's VMs live in the fake now.
func (e *e2e) observe(into *[]int) {
	live, err := liveVMs(e.admin, e.name)
	if err != nil {
		live = -1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	*into = append(*into, live)
}

func (e *e2e) observed(from *[]int) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(*from)
}

// machineState is the Machine's deletion and status, for failure messages.
func (e *e2e) machineState() string {
	m, err := e.machines.MachineV1alpha1().Machines(e2eNamespace).Get(context.Background(), e.name, metav1.GetOptions{})
	if err != nil {
		return "machine: " + err.Error()
	}
	return fmt.Sprintf("machine deletion %v, finalizers %v, %+v %+v", m.DeletionTimestamp, m.Finalizers, m.Status.CurrentStatus, m.Status.LastOperation)
}

func (e *e2e) machine() *v1alpha1.Machine {
	m, err := e.machines.MachineV1alpha1().Machines(e2eNamespace).Get(context.Background(), e.name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get machine: %v", err)
	}
	return m
}

// initialized tells whether the sidecar reports no pending step for m's VM.
func (e *e2e) initialized(m *v1alpha1.Machine) (bool, string) {
	_, err := e.d.GetMachineStatus(context.Background(), &mcmdriver.GetMachineStatusRequest{Machine: m, MachineClass: e.class, Secret: e.secret})
	return err == nil, fmt.Sprint(err)
}

// deleteMachine deletes the Machine as a user does (the API server keeps it,
// with a deletion timestamp, while it has finalizers).
func (e *e2e) deleteMachine() {
	if err := e.machines.MachineV1alpha1().Machines(e2eNamespace).Delete(context.Background(), e.name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) waitMachineGone(limit time.Duration) {
	eventually(e.t, limit, "machine's finalizer removed and the object gone", func() (bool, string) {
		m, err := e.machines.MachineV1alpha1().Machines(e2eNamespace).Get(context.Background(), e.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "gone"
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("finalizers %v, phase %s, %+v", m.Finalizers, m.Status.CurrentStatus.Phase, m.Status.LastOperation)
	})
}

func controllerFlow(t *testing.T, binary, examples string) {
	e := newE2E(t, binary, examples, false)
	d, admin, name, class, secret := e.d, e.admin, e.name, e.class, e.secret
	// The cloud throttles the first create and the sidecar's one resend: MCM gets
	// Unavailable and retries after its short period; exactly one VM results.
	adminPost(t, admin, "faults", `{"operation": "create", "kind": "throttle", "times": 2}`)
	adminPost(t, admin, "calls/reset", `{}`)
	e.run()

	// Without a target cluster MCM's flow ends in phase Available (Running needs a Node).
	eventually(t, 60*time.Second, "machine Available", func() (bool, string) {
		m := e.machine()
		phase := m.Status.CurrentStatus.Phase
		done := phase == v1alpha1.MachineAvailable || phase == v1alpha1.MachineRunning
		return done && m.Status.LastOperation.State == v1alpha1.MachineStateSuccessful,
			fmt.Sprintf("%+v %+v", m.Status.CurrentStatus, m.Status.LastOperation)
	})
	m := e.machine()
	if m.Spec.ProviderID == "" {
		t.Fatalf("created machine without providerID: %+v", m)
	}
	// The sidecar's addresses reached MCM's machine status (written without a target cluster).
	internal := false
	for _, a := range m.Status.Addresses {
		internal = internal || a.Type == corev1.NodeInternalIP
	}
	if !internal {
		t.Errorf("no InternalIP among the machine's addresses: %+v", m.Status.Addresses)
	}
	if live := liveInFake(t, admin, name); live != 1 {
		t.Fatalf("%d live VMs for the machine in the fake", live)
	}
	if creates := createCalls(t, admin); creates != 3 {
		t.Errorf("%d create calls reached the cloud, want 3 (two throttled, then one)", creates)
	}
	// MCM initialized it: the sidecar reports no pending step any more.
	eventually(t, 30*time.Second, "machine initialized", func() (bool, string) { return e.initialized(m) })

	// A VM of the cluster that no Machine owns (created through the sidecar for a
	// machine MCM does not know) is removed by MCM's orphan collection, through
	// ListMachines and DeleteMachine; the machine's own VM stays.
	orphan := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name + "-orphan", Namespace: e2eNamespace, UID: types.UID("uid-orphan-" + name)}}
	if _, err := d.CreateMachine(context.Background(), &mcmdriver.CreateMachineRequest{Machine: orphan, MachineClass: class, Secret: secret}); err != nil {
		t.Fatalf("creating the orphan VM: %v", err)
	}
	eventually(t, 60*time.Second, "orphan VM collected", func() (bool, string) {
		left := liveInFake(t, admin, orphan.Name)
		return left == 0, fmt.Sprintf("%d live orphan VMs", left)
	})
	if live := liveInFake(t, admin, name); live != 1 {
		t.Fatalf("orphan collection left %d live VMs for the machine that exists", live)
	}

	// Deletion as a user asks for it: the API server sets a deletion timestamp
	// and keeps the object until MCM removes its finalizer.
	e.deleteMachine()
	eventually(t, 60*time.Second, "VM gone", func() (bool, string) {
		live := liveInFake(t, admin, name)
		return live == 0, fmt.Sprintf("%d live VMs", live)
	})
	e.waitMachineGone(60 * time.Second)
}

func targetClusterFlow(t *testing.T, binary, examples string) {
	e := newE2E(t, binary, examples, true)
	ctx := context.Background()
	adminPost(t, e.admin, "calls/reset", `{}`)
	e.run()

	// MCM creates the VM (a bootstrap token in the target cluster for its user
	// data), initializes it and waits for its Node in phase Pending.
	eventually(t, 60*time.Second, "VM created and initialized, machine Pending", func() (bool, string) {
		m := e.machine()
		state := fmt.Sprintf("providerID %q, node label %q, %+v %+v", m.Spec.ProviderID, m.Labels[v1alpha1.NodeLabelKey], m.Status.CurrentStatus, m.Status.LastOperation)
		if m.Spec.ProviderID == "" || m.Labels[v1alpha1.NodeLabelKey] == "" || m.Status.CurrentStatus.Phase != v1alpha1.MachinePending {
			return false, state
		}
		if live := liveInFake(t, e.admin, e.name); live != 1 {
			return false, fmt.Sprintf("%s; %d live VMs", state, live)
		}
		ok, status := e.initialized(m)
		return ok, state + "; status: " + status
	})
	if creates := createCalls(t, e.admin); creates != 1 {
		t.Errorf("%d create calls reached the cloud, want 1", creates)
	}
	if tokens := e.bootstrapTokens(); tokens != 1 {
		t.Errorf("%d bootstrap token secrets in the target cluster's kube-system, want 1", tokens)
	}
	m := e.machine()
	// Without its Node the machine stays Pending (no Available with a target cluster).
	time.Sleep(time.Second)
	if phase := e.machine().Status.CurrentStatus.Phase; phase != v1alpha1.MachinePending {
		t.Fatalf("phase %s before a Node registered, want Pending", phase)
	}

	// The kubelet registers the Node, named as the sidecar named it, with the
	// VM's providerID, Ready; a workload pod runs on it.
	nodeName, providerID := m.Labels[v1alpha1.NodeLabelKey], m.Spec.ProviderID
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelHostname: nodeName}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
		}},
	}
	if _, err := e.target.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: "default", UID: "uid-workload",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "workload", UID: "uid-rs", Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if _, err := e.target.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// MCM takes the Node over (its finalizer, the machine-name label), the
	// machine turns Running and its bootstrap token is deleted.
	eventually(t, 60*time.Second, "machine Running on its Node", func() (bool, string) {
		m := e.machine()
		n, err := e.target.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("%+v %+v; node finalizers %v, labels %v", m.Status.CurrentStatus, m.Status.LastOperation, n.Finalizers, n.Labels)
		return m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning &&
			m.Status.LastOperation.State == v1alpha1.MachineStateSuccessful &&
			slices.Contains(n.Finalizers, machinecontroller.NodeFinalizerName) &&
			n.Labels[machineutils.MachineLabelKey] == e.name, state
	})
	eventually(t, 10*time.Second, "bootstrap token deleted after the join", func() (bool, string) {
		tokens := e.bootstrapTokens()
		return tokens == 0, fmt.Sprintf("%d bootstrap tokens", tokens)
	})
	if ev := e.observed(&e.evictions); len(ev) != 0 {
		t.Fatalf("pod evicted before the machine was deleted: %v", ev)
	}

	// Deletion: drain (cordon, evict), VM, Node, machine, in that order.
	e.deleteMachine()
	eventually(t, 60*time.Second, "pod evicted by MCM's drain", func() (bool, string) {
		_, err := e.target.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		ev := e.observed(&e.evictions)
		return apierrors.IsNotFound(err) && len(ev) > 0, fmt.Sprintf("pod: %v; evictions %v; %s", err, ev, e.machineState())
	})
	if ev := e.observed(&e.evictions); len(ev) != 1 || ev[0] != 1 {
		t.Errorf("evictions (live VMs at each): %v, want one with the VM still live", ev)
	}
	if !e.cordoned(nodeName) {
		t.Errorf("node %s was not cordoned before the drain", nodeName)
	}
	eventually(t, 60*time.Second, "VM deleted through DeleteMachine", func() (bool, string) {
		live := liveInFake(t, e.admin, e.name)
		m := e.machine()
		return live == 0, fmt.Sprintf("%d live VMs; %+v", live, m.Status.LastOperation)
	})
	eventually(t, 60*time.Second, "Node object deleted", func() (bool, string) {
		n, err := e.target.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "gone"
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("finalizers %v, deletion %v", n.Finalizers, n.DeletionTimestamp)
	})
	if nd := e.observed(&e.nodeDeletions); len(nd) == 0 || nd[0] != 0 {
		t.Errorf("node deletions (live VMs at each): %v, want the first after the VM was gone", nd)
	}
	e.waitMachineGone(60 * time.Second)
}

// bootstrapTokens counts the bootstrap token secrets in the target cluster.
func (e *e2e) bootstrapTokens() int {
	list, err := e.target.CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if s.Type == corev1.SecretTypeBootstrapToken {
			n++
		}
	}
	return n
}

// cordoned tells whether an update to the target cluster made the node unschedulable.
func (e *e2e) cordoned(nodeName string) bool {
	for _, a := range e.target.Actions() {
		update, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetResource().Resource != "nodes" {
			continue
		}
		if n, ok := update.GetObject().(*corev1.Node); ok && n.Name == nodeName && n.Spec.Unschedulable {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func eventually(t *testing.T, limit time.Duration, what string, check func() (bool, string)) string {
	t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	for {
		ok, state := check()
		if ok {
			t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return state
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, limit, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// liveInFake counts the live instances named name in the fake's inventory.
func liveInFake(t *testing.T, admin, name string) int {
	t.Helper()
	n, err := liveVMs(admin, name)
	if err != nil {
		t.Fatalf("fake inventory: %v", err)
	}
	return n
}

// liveVMs counts the live instances named name in the fake's inventory.
func liveVMs(admin, name string) (int, error) {
	resp, err := http.Get("http://" + admin + "/_admin/inventory")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
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

// adminPost posts body to the fake's admin API.
func adminPost(t *testing.T, admin, path, body string) {
	resp, err := http.Post("http://"+admin+"/_admin/"+path, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("fake admin %s: %v %v", path, err, resp)
	}
	_ = resp.Body.Close()
}

// createCalls is the number of create-class cloud calls since the last reset.
func createCalls(t *testing.T, admin string) int {
	resp, err := http.Get("http://" + admin + "/_admin/calls")
	if err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	defer resp.Body.Close()
	var calls struct {
		Classes map[string]int `json:"classes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	return calls.Classes["create"]
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
