package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubelet plays every VM's kubelet: when a Machine has a providerID and a node name (MCM's
// `node` label) and is not being deleted, it registers a Node of that name and providerID in
// the target cluster (as admin: the kubelet's own identity is not under test) and reports it
// Ready. It registers each node once and deletes nothing: removing Nodes is MCM's job.
type kubelet struct {
	f          *fleet
	mu         sync.Mutex
	registered map[string]bool
	errs       []string
	stop       chan struct{}
	done       chan struct{}
}

func startKubelet(t testing.TB, f *fleet) *kubelet {
	k := &kubelet{f: f, registered: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go k.loop()
	t.Cleanup(func() {
		close(k.stop)
		<-k.done
	})
	return k
}

func (k *kubelet) loop() {
	defer close(k.done)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		if err := k.sync(); err != nil {
			k.mu.Lock()
			if len(k.errs) < 20 {
				k.errs = append(k.errs, err.Error())
			}
			k.mu.Unlock()
		}
	}
}

func (k *kubelet) sync() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := k.f.machines.MachineV1alpha1().Machines(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		m := &list.Items[i]
		node := m.Labels["node"]
		if node == "" || m.Spec.ProviderID == "" || m.DeletionTimestamp != nil {
			continue
		}
		k.mu.Lock()
		done := k.registered[node]
		k.mu.Unlock()
		if done {
			continue
		}
		if err := k.register(ctx, node, m.Spec.ProviderID); err != nil {
			return fmt.Errorf("registering node %s: %w", node, err)
		}
		k.mu.Lock()
		k.registered[node] = true
		k.mu.Unlock()
	}
	return nil
}

func (k *kubelet) register(ctx context.Context, name, providerID string) error {
	nodes := k.f.nodes.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = nodes.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func (k *kubelet) errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

// vm is one inventory entry of the fake cloud (tests/fake-support/src/hooks.rs InventoryInstance).
type vm struct {
	ID    string            `json:"id"`
	Name  string            `json:"name"`
	State string            `json:"state"`
	Live  bool              `json:"live"`
	Tags  map[string]string `json:"tags"`
}

type inventory struct {
	Instances  []vm `json:"instances"`
	Dependents []vm `json:"dependents"`
}

func (i inventory) live() []vm {
	var out []vm
	for _, v := range i.Instances {
		if v.Live {
			out = append(out, v)
		}
	}
	return out
}

func (i inventory) liveDependents() []vm {
	var out []vm
	for _, v := range i.Dependents {
		if v.Live {
			out = append(out, v)
		}
	}
	return out
}

func (f *fleet) inventory() (inventory, error) {
	var inv inventory
	resp, err := http.Get(f.fakeURL + "/_admin/inventory")
	if err != nil {
		return inv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return inv, fmt.Errorf("GET /_admin/inventory: %s", resp.Status)
	}
	return inv, json.NewDecoder(resp.Body).Decode(&inv)
}

// plant is POST /_admin/instances (tests/fake-support/src/plant.rs PlantRequest); it answers
// the planted VM's id.
func (f *fleet) plant(body map[string]any) (string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	resp, err := http.Post(f.fakeURL+"/_admin/instances", "application/json", bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /_admin/instances: %s: %s", resp.Status, answer)
	}
	var planted struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(answer, &planted); err != nil || planted.ID == "" {
		return "", fmt.Errorf("POST /_admin/instances answered %s", answer)
	}
	return planted.ID, nil
}

// fleetState is the machines, nodes and live VMs at one moment.
type fleetState struct {
	machines []v1alpha1.Machine
	nodes    []corev1.Node
	inv      inventory
}

func (f *fleet) snapshot() (fleetState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s fleetState
	ms, err := f.machines.MachineV1alpha1().Machines(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	s.machines = ms.Items
	ns, err := f.nodes.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	s.nodes = ns.Items
	s.inv, err = f.inventory()
	return s, err
}

// running counts the machines in phase Running that are not being deleted.
func (s fleetState) running(class string) int {
	n := 0
	for _, m := range s.machines {
		if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && (class == "" || m.Spec.Class.Name == class) {
			n++
		}
	}
	return n
}

// duplicates are the VM names live more than once.
func (s fleetState) duplicates() []string {
	seen := map[string]int{}
	for _, v := range s.inv.live() {
		seen[v.Name]++
	}
	var out []string
	for name, n := range seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", name, n))
		}
	}
	sort.Strings(out)
	return out
}

func (s fleetState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "machines (%d):", len(s.machines))
	for _, m := range s.machines {
		del := ""
		if m.DeletionTimestamp != nil {
			del = " deleting"
		}
		op := m.Status.LastOperation
		fmt.Fprintf(&b, "\n  %s class=%s phase=%s%s node=%s providerID=%s last=%s/%s %q", m.Name, m.Spec.Class.Name, m.Status.CurrentStatus.Phase, del,
			m.Labels["node"], m.Spec.ProviderID, op.Type, op.State, op.Description)
	}
	fmt.Fprintf(&b, "\nnodes (%d):", len(s.nodes))
	for _, n := range s.nodes {
		fmt.Fprintf(&b, " %s", n.Name)
	}
	live := s.inv.live()
	fmt.Fprintf(&b, "\nlive VMs (%d):", len(live))
	for _, v := range live {
		fmt.Fprintf(&b, " %s(%s,%s)", v.Name, v.ID, v.State)
	}
	deps := s.inv.liveDependents()
	if len(deps) > 0 {
		fmt.Fprintf(&b, "\nlive dependents (%d):", len(deps))
		for _, v := range deps {
			fmt.Fprintf(&b, " %s(%s)", v.Name, v.ID)
		}
	}
	return b.String()
}

func (f *fleet) state() string {
	s, err := f.snapshot()
	if err != nil {
		return "state: " + err.Error()
	}
	out := s.String()
	if errs := f.kubelet.errors(); len(errs) > 0 {
		out += "\nkubelet errors: " + strings.Join(errs, "; ")
	}
	return out
}

// eventually polls cond (a nil error: done) until timeout; then fails with its last error and
// the fleet's state.
func (f *fleet) eventually(what string, timeout time.Duration, cond func(s fleetState) error) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		s, err := f.snapshot()
		if err == nil {
			if last = cond(s); last == nil {
				return
			}
		} else {
			last = err
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not within %s: %v\n%s", what, timeout, last, f.state())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// httpPost posts an empty body and answers the status code.
func httpPost(url string) (int, error) {
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
