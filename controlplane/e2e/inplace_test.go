package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The annotations and event reasons of the adapter's hot-update reconciler (adapter/hotupdate:
// SpecHashAnnotation, ResultAnnotation, EventApplied) and the spot reclaim watcher's event
// reason (adapter/reclaim: EventReason), as the machine-controller writes them.
const (
	specHashAnnotation = "machine-driver.gardener.cloud/hot-update-spec-hash"
	resultAnnotation   = "machine-driver.gardener.cloud/hot-update-result"
	eventHotApplied    = "HotUpdateApplied"
	eventSpotReclaimed = "SpotReclaimed"
	// What the machine-controller logs when the sidecar lacks CAPABILITY_UPDATE_MACHINE
	// (adapter/cmd/machine-controller, startHotUpdate).
	hotUpdateOff = "hot update off"

	spotDeploymentName = "worker-spot"
	spotClass          = "class-spot"
)

// updateInputs is conformance.json "update" (tests/conformance/src/settings.rs UpdateInputs):
// tagsPatch is a JSON merge patch on the class's providerSpec that changes tags; removable a
// tag key it removes that the example class lacks (the class gets it, value "conformance").
type updateInputs struct {
	TagsPatch map[string]any `json:"tagsPatch"`
	Removable string         `json:"removable"`
}

// spotInputs is conformance.json "spot" (settings.rs SpotInputs): the merge patch that makes
// the class Spot.
type spotInputs struct {
	Patch map[string]any `json:"patch"`
}

func (f *fleet) updateInputs() *updateInputs {
	raw, ok := f.conformance["update"]
	if !ok {
		return nil
	}
	var u updateInputs
	if err := json.Unmarshal(raw, &u); err != nil {
		f.t.Fatalf("conformance.json update: %v", err)
	}
	if u.TagsPatch == nil {
		return nil
	}
	return &u
}

func (f *fleet) spotInputs() *spotInputs {
	raw, ok := f.conformance["spot"]
	if !ok {
		return nil
	}
	var s spotInputs
	if err := json.Unmarshal(raw, &s); err != nil {
		f.t.Fatalf("conformance.json spot: %v", err)
	}
	if len(s.Patch) == 0 {
		return nil
	}
	return &s
}

// tagEdit is one tag map of tagsPatch: its path from the spec's root, the tags it sets and
// the keys it removes (null members).
type tagEdit struct {
	path    []string
	set     map[string]string
	removed []string
}

// tagEdits are the objects of patch whose members are all strings or null (settings.rs tag_edits).
func tagEdits(patch map[string]any) []tagEdit {
	var out []tagEdit
	var walk func(m map[string]any, path []string)
	walk = func(m map[string]any, path []string) {
		edit := tagEdit{path: path, set: map[string]string{}}
		leaf := len(m) > 0
		for k, v := range m {
			switch v := v.(type) {
			case string:
				edit.set[k] = v
			case nil:
				edit.removed = append(edit.removed, k)
			default:
				leaf = false
			}
		}
		if leaf {
			sort.Strings(edit.removed)
			out = append(out, edit)
			return
		}
		for k, v := range m {
			if child, ok := v.(map[string]any); ok {
				walk(child, append(append([]string(nil), path...), k))
			}
		}
	}
	walk(patch, nil)
	return out
}

// mergePatch applies an RFC 7386 JSON merge patch to doc.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	out := map[string]any{}
	for k, v := range d {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

// patchedSpec is spec with the merge patch applied.
func patchedSpec(t testing.TB, spec []byte, patch any) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatalf("providerSpec: %v", err)
	}
	out, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withRemovable is the example providerSpec with update.removable set to "conformance" at the
// path of the tag map tagsPatch removes it from (as the conformance suite's removable_patch),
// so that the hot update has a tag to remove.
func (f *fleet) withRemovable(spec []byte) []byte {
	u := f.updateInputs()
	if u == nil || u.Removable == "" {
		return spec
	}
	for _, e := range tagEdits(u.TagsPatch) {
		for _, k := range e.removed {
			if k != u.Removable {
				continue
			}
			var patch any = map[string]any{k: "conformance"}
			for i := len(e.path) - 1; i >= 0; i-- {
				patch = map[string]any{e.path[i]: patch}
			}
			return patchedSpec(f.t, spec, patch)
		}
	}
	f.t.Fatalf("conformance.json update.removable %q: tagsPatch does not remove it", u.Removable)
	return nil
}

// sub runs fn as the subtest name of the provider's test (so that it can be skipped alone),
// with f.t that subtest's while it runs.
func (f *fleet) sub(name string, fn func()) {
	parent := f.t
	parent.Run(name, func(t *testing.T) {
		f.t = &recordingT{T: t}
		defer func() { f.t = parent }()
		fn()
	})
}

// machineEvents are the reasons and messages of the control namespace's events on machine name
// whose reason is reason.
func (f *fleet) machineEvents(name, reason string) []string {
	ctx, cancel := f.ctx()
	defer cancel()
	list, err := f.core.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Type+" "+e.Message)
		}
	}
	return out
}

// hotUpdate (issue 32): the machine-controller runs with --hot-update; class-a, which the N
// Running machines use, is edited in place (same name) with conformance.json's
// update.tagsPatch, as a merge patch on its providerSpec. Every live VM must then carry the
// new tags and not the removed ones, with the same instance ids and the same Machines (names
// and UIDs: none recreated), each Machine annotated with an applied result and a new spec hash
// and with a HotUpdateApplied event. Skipped without update inputs, or when the sidecar lacks
// CAPABILITY_UPDATE_MACHINE (the machine-controller logs "hot update off").
func (f *fleet) hotUpdate() {
	t := f.t
	u := f.updateInputs()
	if u == nil {
		t.Skipf("%s: providers/%s/examples/conformance.json has no update.tagsPatch", f.cloud, f.cloud)
	}
	edits := tagEdits(u.TagsPatch)
	if len(edits) == 0 {
		t.Fatalf("conformance.json update.tagsPatch %v holds no tag map", u.TagsPatch)
	}
	// The reconciler records the class's hash on each Running machine it first sees.
	before := map[string]string{} // machine name -> spec hash
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(f.mc.Log(), hotUpdateOff) {
			t.Skipf("%s: the sidecar does not advertise CAPABILITY_UPDATE_MACHINE (machine-controller: %q)", f.cloud, hotUpdateOff)
		}
		s, err := f.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		clear(before)
		for _, m := range s.machines {
			if h := m.Annotations[specHashAnnotation]; h != "" {
				before[m.Name] = h
			}
		}
		if len(before) == f.n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d machines got the %s annotation within 30 s\n%s", len(before), f.n, specHashAnnotation, f.state())
		}
		time.Sleep(250 * time.Millisecond)
	}
	start, err := f.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, m := range start.machines {
		uids[m.Name] = m.UID
	}
	vmIDs := ids(start.inv.live())

	patch, err := json.Marshal(map[string]any{"providerSpec": u.TagsPatch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := f.ctx()
	defer cancel()
	if _, err := f.machines.MachineV1alpha1().MachineClasses(namespace).Patch(ctx, f.class, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	f.eventually("hot update of "+f.class, 90*time.Second, func(s fleetState) error {
		if len(s.machines) != f.n {
			return fmt.Errorf("%d machines, want %d", len(s.machines), f.n)
		}
		for _, m := range s.machines {
			if uid, ok := uids[m.Name]; !ok || uid != m.UID {
				return fmt.Errorf("machine %s (uid %s) is not one of the machines before the edit", m.Name, m.UID)
			}
			if m.Annotations[specHashAnnotation] == before[m.Name] || !strings.Contains(m.Annotations[resultAnnotation], `"outcome":"applied"`) {
				return fmt.Errorf("machine %s: spec hash %q (before %q), result %s", m.Name, m.Annotations[specHashAnnotation], before[m.Name], m.Annotations[resultAnnotation])
			}
		}
		for _, v := range s.inv.live() {
			for _, e := range edits {
				for k, want := range e.set {
					if got, ok := v.Tags[k]; !ok || got != want {
						return fmt.Errorf("VM %s (%s): tag %s=%q, want %q (tags %v)", v.Name, v.ID, k, got, want, v.Tags)
					}
				}
				for _, k := range e.removed {
					if got, ok := v.Tags[k]; ok {
						return fmt.Errorf("VM %s (%s): removed tag %s still there (%q)", v.Name, v.ID, k, got)
					}
				}
			}
		}
		return nil
	})
	t.Logf("%s: class %s edited in place, every VM updated %s later", f.cloud, f.class, time.Since(edited).Round(100*time.Millisecond))
	end, err := f.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(end.inv.live()); strings.Join(got, ",") != strings.Join(vmIDs, ",") {
		t.Errorf("live VMs %v after the hot update, want the same as before %v (no replacement)", got, vmIDs)
	}
	for _, m := range end.machines {
		if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning || m.DeletionTimestamp != nil {
			t.Errorf("machine %s: phase %s, deleting %v after the hot update", m.Name, m.Status.CurrentStatus.Phase, m.DeletionTimestamp != nil)
		}
		var events []string
		for wait := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if events = f.machineEvents(m.Name, eventHotApplied); len(events) > 0 || time.Now().After(wait) {
				break
			}
		}
		if len(events) != 1 || !strings.HasPrefix(events[0], corev1.EventTypeNormal+" ") {
			t.Errorf("machine %s: %s events %q, want one Normal", m.Name, eventHotApplied, events)
		}
	}
	// adapter/hotupdate Updates: one applied update per machine, in this process (not restarted yet).
	f.metricLine(fmt.Sprintf(`machine_controller_hot_updates_total{outcome="applied"} %d`, f.n))
}

// metricLine waits up to 10 s for the machine-controller's /metrics to have the line want.
func (f *fleet) metricLine(want string) {
	f.t.Helper()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		resp, err := http.Get(f.mcMetrics)
		if err != nil {
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(raw)
		for _, line := range strings.Split(body, "\n") {
			if line == want {
				return
			}
		}
	}
	var got []string
	name, _, _ := strings.Cut(want, " ")
	name, _, _ = strings.Cut(name, "{")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name) {
			got = append(got, line)
		}
	}
	f.t.Errorf("machine-controller /metrics: no line %q (%s lines: %q)", want, name, got)
}

// reclaim is POST /_admin/instances/{id}/reclaim (docs/fake-admin-api.md): the cloud takes the
// Spot VM back; 501 on a fake without Spot VMs.
func (f *fleet) reclaim(id string) (int, string, error) {
	resp, err := http.Post(f.fakeURL+"/_admin/instances/"+url.PathEscape(id)+"/reclaim", "application/json", nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// nodeDown plays a kubelet whose VM is gone: the node's Ready condition becomes Unknown, as
// the node lifecycle controller sets it when the kubelet stops posting.
func (f *fleet) nodeDown(name string) {
	ctx, cancel := f.ctx()
	defer cancel()
	node, err := f.nodes.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	if _, err := f.nodes.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// spotMachines are the machines of the Spot MachineDeployment (its template's label).
func spotMachines(s fleetState) []v1alpha1.Machine {
	var out []v1alpha1.Machine
	for _, m := range s.machines {
		if m.Labels["name"] == spotDeploymentName {
			out = append(out, m)
		}
	}
	return out
}

// spotReclaim (issue 29 with the reclaim watcher): a MachineDeployment of one machine on a Spot
// class (the example providerSpec with conformance.json's spot.patch) comes up; its VM is
// reclaimed through the fake's admin API and its Node made NotReady (the test is the kubelet).
// The machine-controller's watcher must set the Machine Failed (its SpotReclaimed event), and
// MCM's MachineSet replace it: a new Running machine on a new live VM, the reclaimed Machine
// gone. The Spot deployment is then scaled to 0, left to scenario 3 to drain. Skipped without
// spot inputs or when the fake has no Spot VMs (501).
func (f *fleet) spotReclaim() {
	t := f.t
	s := f.spotInputs()
	if s == nil {
		t.Skipf("%s: providers/%s/examples/conformance.json has no spot.patch", f.cloud, f.cloud)
	}
	ctx, cancel := f.ctx()
	defer cancel()
	spec := f.spec
	f.spec = patchedSpec(t, spec, s.Patch)
	f.classAndSecret(ctx, spotClass)
	f.spec = spec
	f.createMachineDeployment(spotDeploymentName, spotClass, 1)

	var first v1alpha1.Machine
	var vmID string
	f.eventually("the Spot machine Running", f.settle(1), func(st fleetState) error {
		ms := spotMachines(st)
		if len(ms) != 1 || ms[0].Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
			return fmt.Errorf("%d Spot machines, want 1 Running", len(ms))
		}
		for _, v := range st.inv.live() {
			if v.Name == ms[0].Name {
				first, vmID = ms[0], v.ID
				return nil
			}
		}
		return fmt.Errorf("no live VM of the Spot machine %s", ms[0].Name)
	})
	code, body, err := f.reclaim(vmID)
	if err != nil {
		t.Fatal(err)
	}
	switch code {
	case http.StatusOK:
	case http.StatusNotImplemented:
		f.patchMachineDeployment(spotDeploymentName, `{"spec":{"replicas":0}}`)
		t.Skipf("%s: the fake has no Spot VMs: %s", f.cloud, body)
	default:
		t.Fatalf("reclaiming %s: HTTP %d: %s", vmID, code, body)
	}
	reclaimed := time.Now()
	t.Logf("%s: reclaimed the Spot VM %s of machine %s: %s", f.cloud, vmID, first.Name, body)
	f.nodeDown(first.Labels["node"])

	var events []string
	f.eventually("the reclaimed machine Failed by the watcher, replaced and gone", f.settle(1), func(st fleetState) error {
		if events == nil {
			events = f.machineEvents(first.Name, eventSpotReclaimed)
		}
		if len(events) == 0 {
			return fmt.Errorf("no %s event on machine %s yet", eventSpotReclaimed, first.Name)
		}
		ms := spotMachines(st)
		if len(ms) != 1 || ms[0].Name == first.Name || ms[0].Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
			var names []string
			for _, m := range ms {
				names = append(names, m.Name+"/"+string(m.Status.CurrentStatus.Phase))
			}
			return fmt.Errorf("Spot machines %v, want only a new Running one (the reclaimed %s gone)", names, first.Name)
		}
		for _, v := range st.inv.live() {
			if v.ID == vmID {
				return fmt.Errorf("the reclaimed VM %s is still live", vmID)
			}
		}
		for _, v := range st.inv.live() {
			if v.Name == ms[0].Name {
				return nil
			}
		}
		return fmt.Errorf("no live VM of the new Spot machine %s", ms[0].Name)
	})
	t.Logf("%s: machine %s replaced %s after the reclaim; event %q", f.cloud, first.Name, time.Since(reclaimed).Round(100*time.Millisecond), events)
	if !strings.HasPrefix(events[0], corev1.EventTypeWarning+" ") {
		t.Errorf("%s event %q, want a Warning", eventSpotReclaimed, events[0])
	}
	// adapter/reclaim Reclaims: this one, in the machine-controller running now (restarted by
	// scenario 5 before, so it counts nothing else).
	f.metricLine("machine_controller_spot_reclaims_total 1")
	f.patchMachineDeployment(spotDeploymentName, `{"spec":{"replicas":0}}`)
}
