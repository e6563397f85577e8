package goproviders

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	machinecontroller "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecontroller"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machineutils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	adapter "github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/mcmharness"
)

// env is one cloud's Go provider and this repository's sidecar for it on one running fake,
// with one class and secret for both (the sidecar's example, which is gardener's
// providerSpec and the Go provider's secret keys).
type env struct {
	title    string // "OpenStack", in the table rows
	cloud    string // "openstack": the sidecar is machine-driver-<cloud>
	goClient string // "Go provider v0.27.1"
	f        *fake
	goDriver mcmdriver.Driver
	class    *v1alpha1.MachineClass
	secret   *corev1.Secret
	// goStatus: the Go provider implements GetMachineStatus (OpenStack v0.27.1 answers Unimplemented).
	goStatus bool
	// goListsLeftovers: the Go provider's ListMachines (MCM's orphan collection) lists a
	// machine by a leftover NIC or disk whose VM is gone (Azure: Resource Graph over VMs,
	// NICs and disks by tag keys). OpenStack's lists servers only; its DeleteMachine removes
	// the machine's port and volume by name.
	goListsLeftovers bool
	// owns tells whether an inventory entry (VM, NIC, disk, port, volume) named name is machine's.
	owns func(machine, name string) bool
	// makes are the cloud operations that make a VM or one of its NICs, ports, disks, volumes.
	makes []string
	// removes are the cloud operations that delete one.
	removes []string
	// checkCreated checks the fake's inventory right after a create of machine (the VM with
	// the class's tags, its NIC and disks / port and volume).
	checkCreated func(t *testing.T, e *env, machine, providerID string)
	// leaveLeftover removes a sidecar-made machine's VM as an operator would, so that its
	// NIC/disk (Azure) or port (OpenStack) is left behind.
	leaveLeftover func(t *testing.T, e *env, machine, providerID string)
}

// machine is a Machine of the class's namespace as the API server returns it (uid,
// creation time), without providerID.
func (e *env) machine(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: e.class.Namespace, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now(),
	}}
}

// known is machine name with the VM's providerID and its node label, as MCM keeps a Machine
// after its create.
func (e *env) known(name, providerID string) *v1alpha1.Machine {
	m := e.machine(name)
	m.Spec.ProviderID = providerID
	m.Labels = map[string]string{v1alpha1.NodeLabelKey: name}
	return m
}

func (e *env) statusReq(m *v1alpha1.Machine) *mcmdriver.GetMachineStatusRequest {
	return &mcmdriver.GetMachineStatusRequest{Machine: m, MachineClass: e.class, Secret: e.secret}
}

// createAll creates the machines through d, parallel at a time, and returns name →
// providerID. Any failure fails the test.
func (e *env) createAll(t *testing.T, d mcmdriver.Driver, names []string, parallel int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		out     = map[string]string{}
		errs    []string
		wg      sync.WaitGroup
		gate    = make(chan struct{}, parallel)
		started = time.Now()
	)
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gate <- struct{}{}
			defer func() { <-gate }()
			resp, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: e.machine(name), MachineClass: e.class, Secret: e.secret})
			mu.Lock()
			defer mu.Unlock()
			if err != nil || resp.ProviderID == "" {
				errs = append(errs, fmt.Sprintf("%s: %v %+v", name, err, resp))
				return
			}
			out[name] = resp.ProviderID
		}()
	}
	wg.Wait()
	t.Logf("created %d machines (%d at a time) in %s", len(names), parallel, time.Since(started).Round(time.Millisecond))
	if len(errs) > 0 {
		sort.Strings(errs)
		t.Fatalf("CreateMachine failed for %d of %d machines: %s", len(errs), len(names), strings.Join(errs, "; "))
	}
	return out
}

// deleteWithRetry deletes m through d, retrying Unavailable (MCM retries it) for up to 30 s.
func (e *env) deleteWithRetry(t *testing.T, d mcmdriver.Driver, m *v1alpha1.Machine) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.DeleteMachine(context.Background(), &mcmdriver.DeleteMachineRequest{Machine: m, MachineClass: e.class, Secret: e.secret})
		if err == nil {
			return
		}
		if code(err) != "Unavailable" || time.Now().After(deadline) {
			t.Fatalf("DeleteMachine %s (providerID %q): %v", m.Name, m.Spec.ProviderID, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// expectNone fails when c holds any of ops.
func expectNone(t *testing.T, c calls, ops []string, what string) {
	t.Helper()
	var seen []string
	for _, op := range ops {
		if c[op] > 0 {
			seen = append(seen, fmt.Sprintf("%s %d", op, c[op]))
		}
	}
	if len(seen) > 0 {
		t.Errorf("%s: %s reached the cloud (want none): %s", what, strings.Join(seen, ", "), c)
	}
}

// sameInventory fails unless the fake's live VMs, NICs, disks, ports and volumes are
// exactly before (nothing replaced, made or removed).
func (e *env) sameInventory(t *testing.T, before map[string]string, what string) {
	t.Helper()
	after := e.f.inventory(t).liveIDs()
	for id, entry := range after {
		if _, ok := before[id]; !ok {
			t.Errorf("%s: a new resource appeared in the fake: %s (%s)", what, entry, id)
		}
	}
	for id, entry := range before {
		if _, ok := after[id]; !ok {
			t.Errorf("%s: a resource is gone from the fake: %s (%s)", what, entry, id)
		}
	}
}

func (c calls) add(other calls) {
	for k, v := range other {
		c[k] += v
	}
}

func eventually(t *testing.T, limit time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	start := time.Now()
	for {
		ok, state := check()
		if ok {
			t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s; last: %s", what, limit, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func testName(prefix string) string {
	return fmt.Sprintf("%s-%05d", prefix, time.Now().UnixNano()/1000%100_000)
}

// migration: machines the Go provider made on the fake are handled by the sidecar
// (through the adapter on its socket): status by providerID and by name answers the Go
// VM's providerID, InitializeMachine keeps it, ListMachines lists it, and the fake's
// inventory stays exactly as the Go provider left it (no VM, NIC, disk, port or volume
// made or replaced); then DeleteMachine (one by providerID, one by name) leaves nothing.
func migration(t *testing.T, e *env) {
	dumpKlogOnFailure(t)
	ctx := context.Background()
	prefix := testName("mig")
	names := []string{prefix + "-a", prefix + "-b"}
	made := e.createAll(t, e.goDriver, names, 2)
	before := e.f.inventory(t).liveIDs()
	d := startSidecar(t, e.cloud, e.f)
	e.f.takeCalls(t)
	total := calls{}

	for _, name := range names {
		pid := made[name]
		st, err := d.GetMachineStatus(ctx, e.statusReq(e.known(name, pid)))
		first := code(err)
		if (first != "OK" && first != "Uninitialized") || st == nil || st.ProviderID != pid {
			t.Fatalf("%s: sidecar status by providerID of the Go VM: %s %+v (want OK or Uninitialized with providerID %s)", name, first, st, pid)
		}
		init, err := d.InitializeMachine(ctx, &mcmdriver.InitializeMachineRequest{Machine: e.known(name, pid), MachineClass: e.class, Secret: e.secret})
		switch code(err) {
		case "OK":
			if init.ProviderID != pid {
				t.Errorf("%s: InitializeMachine answered providerID %q, the Go VM is %q", name, init.ProviderID, pid)
			}
		case "Unimplemented":
			if d.Has(pb.Capability_CAPABILITY_INITIALIZE_MACHINE) {
				t.Errorf("%s: Unimplemented from a sidecar that advertises InitializeMachine", name)
			}
		default:
			t.Fatalf("%s: InitializeMachine of the Go VM: %v", name, err)
		}
		st, err = d.GetMachineStatus(ctx, e.statusReq(e.known(name, pid)))
		if err != nil || st.ProviderID != pid || st.NodeName != name {
			t.Errorf("%s: status by providerID after initialize: %v %+v (want OK, %s, node %s)", name, err, st, pid, name)
		}
		st, err = d.GetMachineStatus(ctx, e.statusReq(e.machine(name)))
		if err != nil || st.ProviderID != pid || st.NodeName != name {
			t.Errorf("%s: status by name: %v %+v (want OK, %s, node %s)", name, err, st, pid, name)
		}
		t.Logf("%s: first status %s, then initialized, status by providerID and by name OK", name, first)
	}
	listed, err := d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: e.class, Secret: e.secret})
	if err != nil {
		t.Fatalf("sidecar ListMachines: %v", err)
	}
	for _, name := range names {
		if listed.MachineList[made[name]] != name {
			t.Errorf("sidecar ListMachines misses the Go VM %s → %s: %v", made[name], name, listed.MachineList)
		}
	}
	adopted := e.f.takeCalls(t)
	total.add(adopted)
	expectNone(t, adopted, e.makes, "adopting Go-made machines")
	expectNone(t, adopted, e.removes, "adopting Go-made machines")
	e.sameInventory(t, before, "after status, initialize and list of the Go-made machines")

	e.deleteWithRetry(t, d, e.known(names[0], made[names[0]]))
	e.deleteWithRetry(t, d, e.machine(names[1])) // by name: no providerID recorded
	e.f.expectEmpty(t, "the sidecar's DeleteMachine of the Go-made machines")
	deleted := e.f.takeCalls(t)
	total.add(deleted)
	expectNone(t, deleted, e.makes, "deleting Go-made machines")
	t.Logf("sidecar calls on 2 Go-made machines: adoption (status ×3, initialize, list) %d: %s; delete %d: %s",
		adopted.total(), adopted, deleted.total(), deleted)
}

// takeover: MCM's own machine controller (adapter/mcmharness, with a target cluster), on
// the sidecar through the adapter, is given the Machines and Nodes as the Go provider's
// controller left them: one Running (providerID, node label, finalizer, its Node with
// MCM's finalizer and machine-name label), one whose create was interrupted after MCM
// recorded the providerID and node label but before its status (phase empty, the kubelet's
// Node registered). MCM adopts the second through the sidecar's GetMachineStatus (and
// InitializeMachine when it reports a pending step), both reach Running, its orphan
// collection lists both through the sidecar and keeps them; no VM (or NIC, disk, port,
// volume) is made or deleted, MCM sends no CreateMachine or DeleteMachine.
func takeover(t *testing.T, e *env) {
	dumpKlogOnFailure(t)
	prefix := testName("take")
	running, interrupted := prefix+"-running", prefix+"-interrupted"
	made := e.createAll(t, e.goDriver, []string{running, interrupted}, 2)
	before := e.f.inventory(t).liveIDs()
	d := newCountingDriver(startSidecar(t, e.cloud, e.f))

	ns := e.class.Namespace
	secret := e.secret.DeepCopy()
	secret.ObjectMeta = metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}
	if _, ok := secret.Data["userData"]; !ok {
		secret.Data["userData"] = []byte("#!/bin/sh\necho <<BOOTSTRAP_TOKEN>>\n")
	}
	ref := &corev1.SecretReference{Name: secret.Name, Namespace: ns}
	class := e.class.DeepCopy()
	class.SecretRef, class.CredentialsSecretRef = ref, ref
	class.Finalizers = []string{machinecontroller.MCMFinalizerName}

	now := metav1.Now()
	conditions := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastTransitionTime: now},
	}
	goMachine := func(name string) *v1alpha1.Machine {
		m := e.known(name, made[name])
		m.Finalizers = []string{machinecontroller.MCMFinalizerName}
		m.Annotations = map[string]string{machineutils.MachinePriority: "3"}
		m.Spec.Class = v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}
		return m
	}
	node := func(name string, owned bool) *corev1.Node {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Spec:       corev1.NodeSpec{ProviderID: made[name]},
			Status:     corev1.NodeStatus{Conditions: conditions},
		}
		if owned {
			n.Finalizers = []string{machinecontroller.NodeFinalizerName}
			n.Labels[machineutils.MachineLabelKey] = name
		}
		return n
	}
	a := goMachine(running)
	a.Status = v1alpha1.MachineStatus{
		Conditions:    conditions,
		CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: now},
		LastOperation: v1alpha1.LastOperation{Description: "Machine " + running + " successfully joined the cluster",
			State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate, LastUpdateTime: now},
	}
	b := goMachine(interrupted)

	h := mcmharness.New(t, mcmharness.Options{
		Namespace:      ns,
		Driver:         d,
		MachineObjects: []runtime.Object{class, a, b},
		CoreObjects:    []runtime.Object{secret},
		TargetCluster:  true,
		TargetObjects:  []runtime.Object{node(running, true), node(interrupted, false)},
	})
	e.f.takeCalls(t)
	h.Run()

	get := func(name string) *v1alpha1.Machine {
		m, err := h.Machines.MachineV1alpha1().Machines(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("machine %s: %v", name, err)
		}
		return m
	}
	eventually(t, 90*time.Second, "both Go-made machines Running under MCM on the sidecar, their Nodes taken over, orphan collection run twice", func() (bool, string) {
		var states []string
		done := true
		for _, name := range []string{running, interrupted} {
			m := get(name)
			n, err := h.Target.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ok := m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.Status.LastOperation.State == v1alpha1.MachineStateSuccessful &&
				slices.Contains(n.Finalizers, machinecontroller.NodeFinalizerName) && n.Labels[machineutils.MachineLabelKey] == name
			done = done && ok
			states = append(states, fmt.Sprintf("%s: %s %+v, node finalizers %v labels %v", name, m.Status.CurrentStatus.Phase, m.Status.LastOperation, n.Finalizers, n.Labels))
		}
		done = done && d.count("ListMachines OK") >= 2 && d.count("GetMachineStatus") >= 1
		return done, strings.Join(states, "; ") + "; MCM's calls: " + d.String()
	})
	seen := e.f.takeCalls(t)
	expectNone(t, seen, e.makes, "MCM's takeover of Go-made machines")
	expectNone(t, seen, e.removes, "MCM's takeover of Go-made machines")
	if n := d.count("CreateMachine") + d.count("DeleteMachine"); n != 0 {
		t.Errorf("MCM sent %d CreateMachine/DeleteMachine calls to the sidecar, want none: %s", n, d)
	}
	e.sameInventory(t, before, "MCM's takeover")
	inv := e.f.inventory(t)
	for _, name := range []string{running, interrupted} {
		m := get(name)
		if m.Spec.ProviderID != made[name] || m.Labels[v1alpha1.NodeLabelKey] != name {
			t.Errorf("%s: MCM changed providerID/node label to %q/%q (Go: %q/%q)", name, m.Spec.ProviderID, m.Labels[v1alpha1.NodeLabelKey], made[name], name)
		}
		_, deps := inv.live(func(n string) bool { return e.owns(name, n) })
		for _, dep := range deps {
			if dep.Kind == "port" {
				t.Logf("%s (%s): its port's allowed address pairs after the takeover: %v", name, m.Status.LastOperation.Description, dep.AllowedAddressPairs)
			}
		}
	}
	t.Logf("MCM's calls to the sidecar: %s; cloud calls: %d (%s)", d, seen.total(), seen)
}

// rollback: machines the sidecar made are handled by the Go provider: its status (where it
// has one) answers the sidecar's providerID, its ListMachines (MCM's orphan collection)
// lists them, its DeleteMachine leaves nothing; and a machine whose VM went away outside
// both drivers leaves a NIC/disk (Azure) or port (OpenStack) that the Go provider's own
// cleanup finds: its ListMachines lists it (Azure: Resource Graph over VMs, NICs and disks
// by the class's cluster and role tag keys) and its DeleteMachine removes it.
func rollback(t *testing.T, e *env) {
	dumpKlogOnFailure(t)
	ctx := context.Background()
	d := startSidecar(t, e.cloud, e.f)
	prefix := testName("rb")
	names := []string{prefix + "-a", prefix + "-b", prefix + "-left"}
	made := e.createAll(t, d, names, 3)
	// As MCM would before the rollback: initialized, status OK.
	for _, name := range names {
		m := e.known(name, made[name])
		if _, err := d.InitializeMachine(ctx, &mcmdriver.InitializeMachineRequest{Machine: m, MachineClass: e.class, Secret: e.secret}); err != nil && code(err) != "Unimplemented" {
			t.Fatalf("%s: sidecar InitializeMachine: %v", name, err)
		}
		eventually(t, 30*time.Second, name+" initialized (sidecar status OK)", func() (bool, string) {
			_, err := d.GetMachineStatus(ctx, e.statusReq(m))
			return err == nil, fmt.Sprint(err)
		})
	}
	e.f.takeCalls(t)

	for _, name := range names[:2] {
		st, err := e.goDriver.GetMachineStatus(ctx, e.statusReq(e.known(name, made[name])))
		switch {
		case !e.goStatus:
			if code(err) != "Unimplemented" {
				t.Errorf("%s: Go GetMachineStatus: want Unimplemented from %s, got %v", name, e.goClient, err)
			}
		case err != nil || st.ProviderID != made[name] || st.NodeName != name:
			t.Errorf("%s: Go GetMachineStatus of the sidecar's machine: %v %+v (want OK, %s)", name, err, st, made[name])
		}
	}
	listed, err := e.goDriver.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: e.class, Secret: e.secret})
	if err != nil {
		t.Fatalf("Go ListMachines: %v", err)
	}
	for _, name := range names {
		if listed.MachineList[made[name]] != name {
			t.Errorf("Go ListMachines misses the sidecar's %s → %s: %v", made[name], name, listed.MachineList)
		}
	}

	// The leftover: the VM goes outside both drivers, its NIC/disk or port stays.
	left := names[2]
	e.leaveLeftover(t, e, left, made[left])
	instances, dependents := e.f.inventory(t).live(func(n string) bool { return e.owns(left, n) })
	if len(instances) != 0 || len(dependents) == 0 {
		t.Fatalf("the leftover scenario did not leave what it should: instances %+v, dependents %+v", instances, dependents)
	}
	var kept []string
	for _, dep := range dependents {
		kept = append(kept, fmt.Sprintf("%s %s (tags %v)", dep.Kind, dep.Name, dep.Tags))
	}
	listed, err = e.goDriver.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: e.class, Secret: e.secret})
	switch {
	case err != nil:
		t.Errorf("Go ListMachines with a leftover: %v", err)
	case e.goListsLeftovers && !slices.Contains(slices.Collect(maps.Values(listed.MachineList)), left):
		t.Errorf("the Go provider's orphan listing does not see the leftover %s of the sidecar's machine %s (it finds NICs and disks by the class's cluster and role tag keys): %v",
			strings.Join(kept, ", "), left, listed.MachineList)
	case !e.goListsLeftovers && slices.Contains(slices.Collect(maps.Values(listed.MachineList)), left):
		t.Errorf("Go ListMachines lists %s, whose server is gone: %v", left, listed.MachineList)
	default:
		t.Logf("leftover of %s: %s; Go ListMachines: %v", left, strings.Join(kept, ", "), listed.MachineList)
	}

	for _, name := range names {
		// A failed delete is retried, as MCM retries it (Azure keeps a deleted VM's NIC
		// reserved for a while: NicReservedForAnotherVm, 3 s on this fake).
		for attempt, deadline := 1, time.Now().Add(20*time.Second); ; attempt++ {
			_, err := e.goDriver.DeleteMachine(ctx, &mcmdriver.DeleteMachineRequest{Machine: e.known(name, made[name]), MachineClass: e.class, Secret: e.secret})
			if err == nil {
				if attempt > 1 {
					t.Logf("Go DeleteMachine %s succeeded at attempt %d", name, attempt)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Go DeleteMachine %s (attempt %d): %v", name, attempt, err)
			}
			time.Sleep(time.Second)
		}
	}
	e.f.expectEmpty(t, "the Go provider's DeleteMachine of the sidecar's machines (and the leftover)")
	c := e.f.takeCalls(t)
	t.Logf("Go provider calls on 3 sidecar-made machines (status, list ×2, delete ×3): %d: %s", c.total(), c)
}

// lifecycle runs one machine through d: status-absent, create, initialize, status, list,
// delete, each phase's cloud calls counted on its own (the fake's counters reset between
// phases), and checks the fake's inventory after create and after delete.
func lifecycle(t *testing.T, e *env, d mcmdriver.Driver, sidecar bool) []phase {
	dumpKlogOnFailure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := testName("life")
	machine := e.machine(name)
	e.f.takeCalls(t)
	var phases []phase

	_, err := d.GetMachineStatus(ctx, e.statusReq(machine))
	phases = append(phases, phase{"status-absent", code(err), e.f.takeCalls(t)})
	if want := map[bool]string{true: "NotFound", false: "Unimplemented"}[sidecar || e.goStatus]; code(err) != want {
		t.Fatalf("GetMachineStatus before create: want %s, got %v", want, err)
	}

	created, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: machine, MachineClass: e.class, Secret: e.secret})
	phases = append(phases, phase{"create", code(err), e.f.takeCalls(t)})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	if created.ProviderID == "" || created.NodeName != name {
		t.Fatalf("CreateMachine answered %+v", created)
	}
	e.checkCreated(t, e, name, created.ProviderID)

	known := e.known(name, created.ProviderID)
	init, err := d.InitializeMachine(ctx, &mcmdriver.InitializeMachineRequest{Machine: known, MachineClass: e.class, Secret: e.secret})
	phases = append(phases, phase{"initialize", code(err), e.f.takeCalls(t)})
	switch code(err) {
	case "OK":
		if init.ProviderID != created.ProviderID {
			t.Errorf("InitializeMachine answered %q, create %q", init.ProviderID, created.ProviderID)
		}
	case "Unimplemented":
		if ad, ok := d.(*adapter.Driver); ok && ad.Has(pb.Capability_CAPABILITY_INITIALIZE_MACHINE) {
			t.Errorf("Unimplemented from a sidecar that advertises InitializeMachine")
		}
	default:
		t.Fatalf("InitializeMachine: %v", err)
	}

	st, err := d.GetMachineStatus(ctx, e.statusReq(known))
	phases = append(phases, phase{"status", code(err), e.f.takeCalls(t)})
	switch {
	case !sidecar && !e.goStatus:
		// OpenStack v0.27.1's GetMachineStatus is not implemented (pkg/driver/driver.go): MCM
		// falls back to the node object. Anything else means the provider changed.
		if code(err) != "Unimplemented" {
			t.Errorf("GetMachineStatus: want Unimplemented from %s, got %v", e.goClient, err)
		}
	case err != nil && code(err) != "Uninitialized", st == nil || st.ProviderID != created.ProviderID:
		t.Fatalf("GetMachineStatus after create: %+v %v", st, err)
	}

	listed, err := d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: e.class, Secret: e.secret})
	phases = append(phases, phase{"list", code(err), e.f.takeCalls(t)})
	if err != nil {
		t.Fatalf("ListMachines: %v", err)
	}
	if listed.MachineList[created.ProviderID] != name {
		t.Errorf("ListMachines misses %s → %s: %v", created.ProviderID, name, listed.MachineList)
	}

	e.deleteWithRetry(t, d, known)
	phases = append(phases, phase{"delete", "OK", e.f.takeCalls(t)})
	e.f.expectEmpty(t, "DeleteMachine")

	_, err = d.GetMachineStatus(ctx, e.statusReq(known))
	if want := map[bool]string{true: "NotFound", false: "Unimplemented"}[sidecar || e.goStatus]; code(err) != want {
		t.Errorf("GetMachineStatus after delete: want %s, got %v", want, err)
	}
	// Azure's Resource Graph (the Go provider's listing) lags ARM: the fake keeps a NIC
	// in it for 2 s after it is gone (its default graph lag), so ask again, 1 s apart
	// (the graph's quota is 15 queries per 5 s).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Second) {
		listed, err = d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: e.class, Secret: e.secret})
		if err == nil && len(listed.MachineList) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("ListMachines after delete: %v %v", listed, err)
			break
		}
	}
	return phases
}

// statusRound polls every machine of made at once (one round, a goroutine per machine,
// released together), as MCM's workers do, and returns the round's cloud calls and the
// answers by code.
func statusRound(t *testing.T, e *env, d mcmdriver.Driver, made map[string]string) (calls, map[string]int) {
	t.Helper()
	e.f.takeCalls(t)
	var (
		mu      sync.Mutex
		answers = map[string]int{}
		wrong   []string
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for name, pid := range made {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, err := d.GetMachineStatus(context.Background(), e.statusReq(e.known(name, pid)))
			mu.Lock()
			defer mu.Unlock()
			answers[code(err)]++
			if (err == nil || code(err) == "Uninitialized") && (st == nil || st.ProviderID != pid) {
				wrong = append(wrong, fmt.Sprintf("%s: %+v", name, st))
			}
		}()
	}
	close(start)
	wg.Wait()
	round := e.f.takeCalls(t)
	if len(wrong) > 0 {
		t.Errorf("status answered the wrong machine: %v", wrong)
	}
	return round, answers
}

// polls: one round of 50 concurrent status polls of the same 50 machines, first by the
// Go provider, then by a sidecar process started for the round (nothing of the machines
// in its memory: the cost of a cold round), on one fake. The machines are made by
// another sidecar process, stopped before the rounds (the Go provider's status reads
// only the VM, which carries the class's tags either way; 50 Go creates would take a
// minute on this machine).
func polls(t *testing.T, e *env) {
	dumpKlogOnFailure(t)
	const n = 50
	maker, stop := launchSidecar(t, e.cloud, e.f)
	names := make([]string, n)
	prefix := testName("poll")
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	made := e.createAll(t, maker, names, n)
	stop()

	goCalls, goAnswers := statusRound(t, e, e.goDriver, made)
	want := map[bool]string{true: "OK", false: "Unimplemented"}[e.goStatus]
	if goAnswers[want] != n {
		t.Errorf("Go provider's %d polls: %v (want %d %s)", n, goAnswers, n, want)
	}
	sideCalls, sideAnswers := statusRound(t, e, startSidecar(t, e.cloud, e.f), made)
	if sideAnswers["OK"]+sideAnswers["Uninitialized"] != n {
		t.Errorf("sidecar's %d polls: %v (want OK or Uninitialized for each)", n, sideAnswers)
	}
	printPollRow(e.title, e.goClient, n, goCalls, goAnswers)
	printPollRow(e.title, sidecarClient, n, sideCalls, sideAnswers)
}

const sidecarClient = "sidecar (adapter)"

var lifecycleHeader, pollHeader sync.Once

// printLifecycleRow prints one client's lifecycle as a Markdown table row (for
// BENCHMARKS.md; the header once per run), then the operations of each phase:
//
//	| OpenStack | Go provider v0.27.1 | 0 (Unimplemented) | 17 | 0 (Unimplemented) | 0 (Unimplemented) | 1 | 8 | 26 |
func printLifecycleRow(cloud, client string, phases []phase) {
	lifecycleHeader.Do(func() {
		fmt.Println("| cloud | client | status-absent | create | initialize | status | list | delete | total |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
	})
	cells := []string{cloud, client}
	total := 0
	for _, p := range phases {
		cell := fmt.Sprint(p.calls.total())
		if p.result != "OK" {
			cell += " (" + p.result + ")"
		}
		cells = append(cells, cell)
		total += p.calls.total()
	}
	cells = append(cells, fmt.Sprint(total))
	fmt.Printf("| %s |\n", strings.Join(cells, " | "))
	for _, p := range phases {
		fmt.Printf("    %s %s %s: %s\n", cloud, client, p.name, p.calls)
	}
}

// printPollRow prints one status round as a Markdown table row (the header once per run):
//
//	| Azure | Go provider v0.21.0 | 50 | 50 | 50 OK | virtualMachines.get 50 |
func printPollRow(cloud, client string, n int, c calls, answers map[string]int) {
	pollHeader.Do(func() {
		fmt.Println("| cloud | client | machines polled at once | cloud calls | answers | operations |")
		fmt.Println("|---|---|---|---|---|---|")
	})
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		parts = append(parts, fmt.Sprintf("%d %s", answers[k], k))
	}
	ops := c.String()
	if ops == "" {
		ops = "none"
	}
	fmt.Printf("| %s | %s | %d | %d | %s | %s |\n", cloud, client, n, c.total(), strings.Join(parts, ", "), ops)
}
