package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/machine-driver/controlplane/cluster"
)

// The rolling update's bounds: half the replicas may surge, one may be unavailable (MCM's
// deletion flow takes about 30 s a machine, its steps 5 s apart, so the surge sets the pace).
func rollingBounds(n int) (surge, unavailable int) { return max(1, n/2), 1 }

func (f *fleet) scenarios(n int) {
	f.class, f.n = "class-a", n
	f.createDeployment()
	f.step(fmt.Sprintf("1 scale 0 -> %d", n), func() {
		f.scale(n)
		f.converged(fmt.Sprintf("scaled to %d", n), n, "class-a", f.settle(n))
	})
	f.sub("7-hot-update", func() {
		f.step("7 class-a edited in place (update.tagsPatch), hot update", f.hotUpdate)
	})
	f.step("2 rolling update to class-b", func() { f.rollTo(n, "class-b", false) })
	if kills() {
		f.step("5 rolling update to class-c, machine-controller, sidecar and machine-controller-manager killed", func() { f.rollTo(n, "class-c", true) })
	}
	f.sub("8-spot-reclaim", func() {
		f.step("8 Spot VM reclaimed, machine Failed by the watcher and replaced", f.spotReclaim)
	})
	f.step("3 scale to 0", func() {
		f.scale(0)
		if f.spotDeployment {
			f.patchMachineDeployment(spotDeploymentName, `{"spec":{"replicas":0}}`)
		}
		f.empty("scaled to 0", f.settle(n))
	})
	f.step("4 orphan collected, foreign VM kept", f.orphans)
	f.step("6 no Forbidden in any log", f.noForbidden)
	f.step("6 machines update removed from deploy/'s Role, secrets delete from deploy/target's: Forbidden", f.removedVerb)
}

// settle is the time n machines get to reach a state.
func (f *fleet) settle(n int) time.Duration { return 60*time.Second + time.Duration(n)*5*time.Second }

func (f *fleet) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// createDeployment creates the MachineDeployment, 0 replicas, as Gardener's worker controller
// does (admin here): a RollingUpdate with maxSurge and maxUnavailable.
func (f *fleet) createDeployment() { f.createMachineDeployment(deploymentName, "class-a", 0) }

// createMachineDeployment creates the MachineDeployment name of class with replicas (its
// machines labelled name=<name>), with the rolling bounds of f.n.
func (f *fleet) createMachineDeployment(name, class string, replicas int32) {
	ctx, cancel := f.ctx()
	defer cancel()
	s, u := rollingBounds(f.n)
	surge, unavailable := intstr.FromInt(s), intstr.FromInt(u)
	labels := map[string]string{"name": name}
	if name == spotDeploymentName {
		f.spotDeployment = true
	}
	md := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &surge, MaxUnavailable: &unavailable,
				}},
			},
		},
	}
	if _, err := f.machines.MachineV1alpha1().MachineDeployments(namespace).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) patchDeployment(patch string) { f.patchMachineDeployment(deploymentName, patch) }

// patchMachineDeployment merge-patches the MachineDeployment name.
func (f *fleet) patchMachineDeployment(name, patch string) {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	if _, err := f.machines.MachineV1alpha1().MachineDeployments(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) scale(n int) { f.patchDeployment(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)) }

// converged waits until the fleet is n machines of class, each Running with one live VM of
// its name and one Node of its name and providerID, and nothing else: no other machine, no
// other VM, no duplicate, no other Node.
func (f *fleet) converged(what string, n int, class string, timeout time.Duration) {
	f.t.Helper()
	f.eventually(what, timeout, func(s fleetState) error {
		if len(s.machines) != n {
			return fmt.Errorf("%d machines, want %d", len(s.machines), n)
		}
		names := map[string]string{} // machine name -> node name
		providerIDs := map[string]string{}
		for _, m := range s.machines {
			if m.Spec.Class.Name != class || m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
				return fmt.Errorf("machine %s: class %s, phase %s, deleting %v", m.Name, m.Spec.Class.Name, m.Status.CurrentStatus.Phase, m.DeletionTimestamp != nil)
			}
			names[m.Name] = m.Labels["node"]
			providerIDs[m.Labels["node"]] = m.Spec.ProviderID
		}
		if d := s.duplicates(); len(d) > 0 {
			return fmt.Errorf("duplicate VMs: %v", d)
		}
		live := s.inv.live()
		if len(live) != n {
			return fmt.Errorf("%d live VMs, want %d", len(live), n)
		}
		for _, v := range live {
			if _, ok := names[v.Name]; !ok {
				return fmt.Errorf("live VM %s (%s) is no machine's", v.Name, v.ID)
			}
		}
		if len(s.nodes) != n {
			return fmt.Errorf("%d nodes, want %d", len(s.nodes), n)
		}
		for _, node := range s.nodes {
			pid, ok := providerIDs[node.Name]
			if !ok || pid != node.Spec.ProviderID {
				return fmt.Errorf("node %s (providerID %s) is no machine's", node.Name, node.Spec.ProviderID)
			}
		}
		return nil
	})
}

// empty waits until no machine, no Node, no live VM and no live dependent (NIC, disk, port)
// is left, and no bootstrap token in the target's kube-system.
func (f *fleet) empty(what string, timeout time.Duration) {
	f.t.Helper()
	f.eventually(what, timeout, func(s fleetState) error {
		if len(s.machines) > 0 || len(s.nodes) > 0 || len(s.inv.live()) > 0 || len(s.inv.liveDependents()) > 0 {
			return fmt.Errorf("%d machines, %d nodes, %d live VMs, %d live dependents left",
				len(s.machines), len(s.nodes), len(s.inv.live()), len(s.inv.liveDependents()))
		}
		return nil
	})
	ctx, cancel := f.ctx()
	defer cancel()
	secrets, err := f.nodes.CoreV1().Secrets(targetNamespace).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		f.t.Errorf("%s: %d bootstrap token secrets left in the target's kube-system", what, len(secrets.Items))
	}
}

// monitor samples the fleet during a rollout: the most live VMs, the fewest Running machines,
// and any duplicate VM seen.
type monitor struct {
	mu         sync.Mutex
	maxVMs     int
	minRunning int
	samples    int
	dups       []string
	stop, done chan struct{}
}

func (f *fleet) watchRollout(n int) *monitor {
	m := &monitor{minRunning: n, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			if s, err := f.snapshot(); err == nil {
				m.mu.Lock()
				m.samples++
				m.maxVMs = max(m.maxVMs, len(s.inv.live()))
				m.minRunning = min(m.minRunning, s.running(""))
				if d := s.duplicates(); len(d) > 0 && len(m.dups) < 10 {
					m.dups = append(m.dups, d...)
				}
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()
	return m
}

func (m *monitor) end() (maxVMs, minRunning, samples int, dups []string) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxVMs, m.minRunning, m.samples, m.dups
}

// rollTo moves the deployment to a new MachineClass (the same providerSpec under a new name,
// as Gardener names a changed class anew) and waits for the new fleet; the old machines' VMs
// must be gone, and at no sample more than n+maxSurge VMs lived or fewer than n-maxUnavailable
// machines were Running. With kill, the machine-controller, the sidecar and MCM's
// controller-manager are each killed (SIGKILL) once after the rollout started, and restarted.
func (f *fleet) rollTo(n int, class string, kill bool) {
	t := f.t
	t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	f.classAndSecret(ctx, class)
	before, err := f.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var oldVMs []vm
	oldVMs = append(oldVMs, before.inv.live()...)
	mon := f.watchRollout(n)
	f.patchDeployment(fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, class))
	if kill {
		f.killDuringRollout(class)
	}
	f.converged("rolled to "+class, n, class, 2*f.settle(n))
	f.class = class
	maxVMs, minRunning, samples, dups := mon.end()
	maxSurge, maxUnavailable := rollingBounds(n)
	t.Logf("%s rollout to %s: at most %d live VMs, at least %d Running machines (%d samples)", f.cloud, class, maxVMs, minRunning, samples)
	if maxVMs > n+maxSurge {
		t.Errorf("rollout to %s: %d VMs lived at once, more than replicas+maxSurge = %d", class, maxVMs, n+maxSurge)
	}
	if minRunning < n-maxUnavailable {
		t.Errorf("rollout to %s: only %d machines Running at one point, fewer than replicas-maxUnavailable = %d", class, minRunning, n-maxUnavailable)
	}
	if len(dups) > 0 {
		t.Errorf("rollout to %s: duplicate VMs seen: %v", class, dups)
	}
	if kill {
		for _, p := range []*cluster.Process{f.mc, f.sidecar, f.mcm} {
			if exited, err := p.Exited(); exited {
				t.Errorf("%s, restarted after the kill, exited: %v\n%s", p.Name(), err, tail(p.Log(), 20))
			}
		}
	}
	after, err := f.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range oldVMs {
		for _, v := range after.inv.live() {
			if v.ID == old.ID {
				t.Errorf("rollout to %s: the old VM %s (%s) still lives", class, old.Name, old.ID)
			}
		}
	}
}

// killDuringRollout waits until the first machine of class exists, then kills and restarts
// the machine-controller, the sidecar and MCM's controller-manager, one after the other.
func (f *fleet) killDuringRollout(class string) {
	t := f.t
	f.eventually("first machine of "+class, 30*time.Second, func(s fleetState) error {
		for _, m := range s.machines {
			if m.Spec.Class.Name == class {
				return nil
			}
		}
		return fmt.Errorf("no machine of %s yet", class)
	})
	kill := func(p *cluster.Process) {
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed %s (pid %d)", p.Name(), p.Pid())
	}
	kill(f.mc)
	f.startMachineController(false)
	time.Sleep(time.Second)
	kill(f.sidecar)
	f.startSidecar(f.sidecarBin, false)
	time.Sleep(time.Second)
	kill(f.mcm)
	f.startMCM(false)
}

// orphans plants, in the class's scope, a VM with another cluster's markers (it must stay) and
// one with this cluster's markers but no Machine, made the Go provider's way (MCM's orphan
// collection, through the sidecar's ListMachines and DeleteMachine, must delete it and what
// was made with it), from providers/<cloud>/examples/conformance.json "ownership".
func (f *fleet) orphans() {
	t := f.t
	var own struct {
		Scope        map[string]string `json:"scope"`
		OtherCluster plantSpec         `json:"otherCluster"`
		GoMade       plantSpec         `json:"goMade"`
	}
	if err := json.Unmarshal(f.conformance["ownership"], &own); err != nil {
		t.Fatalf("conformance.json ownership: %v", err)
	}
	foreign, err := f.plant(own.OtherCluster.request("foreign-vm", own.Scope))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := f.inventory()
	if err != nil {
		t.Fatal(err)
	}
	foreignDeps := ids(inv.liveDependents())
	orphan, err := f.plant(own.GoMade.request("orphan-vm", own.Scope))
	if err != nil {
		t.Fatal(err)
	}
	planted := time.Now()
	f.eventually("orphan VM collected", 10*orphanPeriod+30*time.Second, func(s fleetState) error {
		live := ids(s.inv.live())
		if slices.Contains(live, orphan) {
			return fmt.Errorf("the orphan %s still lives", orphan)
		}
		if !slices.Equal(live, []string{foreign}) {
			return fmt.Errorf("live VMs %v, want only the foreign %s", live, foreign)
		}
		if deps := ids(s.inv.liveDependents()); !slices.Equal(deps, foreignDeps) {
			return fmt.Errorf("live dependents %v, want the foreign VM's %v", deps, foreignDeps)
		}
		return nil
	})
	t.Logf("%s: orphan %s collected %s after planting", f.cloud, orphan, time.Since(planted).Round(100*time.Millisecond))
	// Two more collection periods: the foreign VM stays.
	time.Sleep(2 * orphanPeriod)
	inv, err = f.inventory()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids(inv.live()), foreign) {
		t.Errorf("the foreign VM %s (another cluster's markers) was deleted", foreign)
	}
	if err := f.terminate(foreign); err != nil {
		t.Fatal(err)
	}
}

// plantSpec is one VM of conformance.json "ownership" (tests/conformance/src/settings.rs PlantedVm).
type plantSpec struct {
	Tags        map[string]string `json:"tags"`
	NetworkTags []string          `json:"networkTags"`
}

// request is the POST /_admin/instances body (tests/fake-support/src/plant.rs PlantRequest).
func (p plantSpec) request(name string, scope map[string]string) map[string]any {
	body := map[string]any{"name": name, "tags": p.Tags, "scope": scope}
	if len(p.NetworkTags) > 0 {
		body["network_tags"] = p.NetworkTags
	}
	if p.Tags == nil {
		body["tags"] = map[string]string{}
	}
	return body
}

func ids(vms []vm) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.ID)
	}
	sort.Strings(out)
	return out
}

func (f *fleet) terminate(id string) error {
	resp, err := httpPost(f.fakeURL + "/_admin/instances/" + url.PathEscape(id) + "/terminate")
	if err != nil {
		return err
	}
	if resp != 200 {
		return fmt.Errorf("terminating %s: HTTP %d", id, resp)
	}
	return nil
}

// forbidden matches what client-go and MCM log for a 403.
var forbidden = regexp.MustCompile(`(?i)forbidden`)

// noForbidden: no process (killed ones included) logged a Forbidden so far.
func (f *fleet) noForbidden() {
	for _, p := range f.all {
		for _, line := range strings.Split(p.Log(), "\n") {
			if forbidden.MatchString(line) {
				f.t.Errorf("%s logged a Forbidden: %s", p.Name(), line)
				break
			}
		}
	}
}

// removedVerb mutates deploy/'s rendered manifests, one verb at a time, and expects the
// Forbidden each causes:
//   - control cluster: deploy/overlays/<cloud>'s Role without `update` on machines (the rule
//     split so that only that verb of that resource goes); scaled to 1, the machine-controller's
//     finalizer update is Forbidden in its log and no VM is made;
//   - target cluster: deploy/target's kube-system Role without `delete` on secrets, applied
//     while the control Role is restored; the machine comes up, and deleting its bootstrap token
//     once it joined is Forbidden (MCM logs it as a warning, machine_util.go) and the token stays.
//
// Then both are applied as rendered, the token the controller could not delete is deleted (MCM
// deletes a token only when its machine joins), and the fleet is scaled to 0 and left empty.
func (f *fleet) removedVerb() {
	t := f.t
	ctx, cancel := f.ctx()
	defer cancel()
	role := findObject(t, f.renderedDeploy(), "Role", account, "deploy/overlays/"+f.cloud)
	original := role.DeepCopy()
	if err := withoutVerb(role, "machine.sapcloud.io", "machines", "update"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, f.control.Admin, []*unstructured.Unstructured{role}); err != nil {
		t.Fatal(err)
	}
	mark := f.logMarks()
	f.scale(1)
	f.expectForbidden(mark, `cannot update resource "machines" in API group "machine.sapcloud.io"`,
		`User "system:serviceaccount:`+namespace+`:`+account+`"`)
	if inv, err := f.inventory(); err != nil || len(inv.live()) > 0 {
		t.Errorf("a VM was made although the machine's finalizer could not be set: %v %v", err, inv.live())
	}

	// The target cluster's Role without delete on secrets, before the machine can come up.
	targetCtx, targetCancel := f.ctx()
	defer targetCancel()
	targetRole := findObject(t, f.renderedTarget(), "Role", targetRBACName, "deploy/target")
	targetOriginal := targetRole.DeepCopy()
	if err := withoutVerb(targetRole, "", "secrets", "delete"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(targetCtx, f.target.Admin, []*unstructured.Unstructured{targetRole}); err != nil {
		t.Fatal(err)
	}
	mark = f.logMarks()
	// A context of its own: the wait above may have used up the first one.
	restoreCtx, restoreCancel := f.ctx()
	defer restoreCancel()
	if err := cluster.Apply(restoreCtx, f.control.Admin, []*unstructured.Unstructured{original}); err != nil {
		t.Fatal(err)
	}
	f.converged("1 machine with the control Role restored", 1, f.class, f.settle(1))
	f.expectForbidden(mark, `cannot delete resource "secrets" in API group "" in the namespace "`+targetNamespace+`"`,
		`User "system:serviceaccount:`+targetNamespace+`:`+targetAccount+`"`)

	endCtx, endCancel := f.ctx()
	defer endCancel()
	tokens, err := f.nodes.CoreV1().Secrets(targetNamespace).List(endCtx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens.Items) != 1 {
		t.Errorf("%d bootstrap tokens in the target's %s, want the 1 the controller could not delete", len(tokens.Items), targetNamespace)
	}
	if err := cluster.Apply(endCtx, f.target.Admin, []*unstructured.Unstructured{targetOriginal}); err != nil {
		t.Fatal(err)
	}
	for _, s := range tokens.Items {
		if err := f.nodes.CoreV1().Secrets(targetNamespace).Delete(endCtx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.scale(0)
	f.empty("scaled to 0 at the end", f.settle(1))
}

// findObject is the object of kind and name among what dir rendered.
func findObject(t testing.TB, objs []*unstructured.Unstructured, kind, name, dir string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s renders no %s %s", dir, kind, name)
	return nil
}

// logMarks is the length of each process's log so far, for expectForbidden.
func (f *fleet) logMarks() map[string]int {
	mark := map[string]int{}
	for _, p := range f.all {
		mark[p.Name()] = len(p.Log())
	}
	return mark
}

// expectForbidden waits up to 60 s for a line of the machine-controller's or MCM's log, after
// mark, that says want for user.
func (f *fleet) expectForbidden(mark map[string]int, want, user string) {
	t := f.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, p := range []*cluster.Process{f.mc, f.mcm} {
			log := p.Log()
			if from := mark[p.Name()]; from <= len(log) {
				log = log[from:]
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, want) && strings.Contains(line, user) {
					t.Logf("%s: the Forbidden the removed verb causes: %s: %s", f.cloud, p.Name(), line)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q for %s logged within 60 s of removing the verb\n%s", want, user, f.state())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// withoutVerb removes verb from resource of group in role's rules, splitting the rule that
// grants it so that the rule's other resources keep every verb.
func withoutVerb(role *unstructured.Unstructured, group, resource, verb string) error {
	rules, _, err := unstructured.NestedSlice(role.Object, "rules")
	if err != nil {
		return err
	}
	var out []any
	found := false
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		if !slices.Contains(groups, group) || !slices.Contains(resources, resource) || !slices.Contains(verbs, verb) {
			out = append(out, r)
			continue
		}
		found = true
		if rest := slices.DeleteFunc(slices.Clone(resources), func(s string) bool { return s == resource }); len(rest) > 0 {
			out = append(out, map[string]any{"apiGroups": toAny(groups), "resources": toAny(rest), "verbs": toAny(verbs)})
		}
		if kept := slices.DeleteFunc(slices.Clone(verbs), func(s string) bool { return s == verb }); len(kept) > 0 {
			out = append(out, map[string]any{"apiGroups": toAny(groups), "resources": []any{resource}, "verbs": toAny(kept)})
		}
	}
	if !found {
		return fmt.Errorf("the Role grants no %s on %s.%s", verb, resource, group)
	}
	return unstructured.SetNestedSlice(role.Object, out, "rules")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
