package reclaim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	grpccodes "google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/machine-driver/adapter/driver"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

const (
	ns         = "shoot--demo--cluster"
	machineN   = "worker-spot-abc12"
	nodeN      = "ip-10-0-1-7.ec2.internal"
	providerID = "aws:///eu-west-1a/i-0abc"
	period     = 30 * time.Second
	reclaimMsg = "the cloud reclaimed Spot VM i-0abc: Server.SpotInstanceTermination"
)

// fixture is a watcher on fake clusters whose informers' caches the test fills
// itself (no informer runs), with a fake driver.
type fixture struct {
	w        *Watcher
	machines *machinefake.Clientset
	recorder *record.FakeRecorder
	driver   *fakeDriver
	mFactory machineinformers.SharedInformerFactory
	nFactory kubeinformers.SharedInformerFactory
}

func machine(phase v1alpha1.MachinePhase) *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: machineN, Namespace: ns, UID: types.UID("uid-" + machineN),
			Labels: map[string]string{v1alpha1.NodeLabelKey: nodeN, "name": "worker-spot"}},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "spot"}, ProviderID: providerID},
		Status: v1alpha1.MachineStatus{
			CurrentStatus: v1alpha1.CurrentStatus{Phase: phase, LastUpdateTime: metav1.NewTime(time.Now().Add(-time.Hour))},
			LastOperation: v1alpha1.LastOperation{Description: "Machine worker-spot-abc12 successfully joined the cluster",
				State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate},
			LastKnownState: "known",
		},
	}
}

func node(ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeN, Annotations: map[string]string{"big": strings.Repeat("x", 100)}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, Reason: "NodeStatusUnknown"},
		}},
	}
}

func class() *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "spot", Namespace: ns},
		Provider:             "aws",
		SecretRef:            &corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
		CredentialsSecretRef: &corev1.SecretReference{Name: "credentials", Namespace: ns},
	}
}

// newFixture: m and n (either may be nil) in the clusters and the caches.
func newFixture(t *testing.T, m *v1alpha1.Machine, n *corev1.Node, answer error) *fixture {
	t.Helper()
	f := &fixture{recorder: record.NewFakeRecorder(10), driver: &fakeDriver{answer: answer}}
	f.machines = machinefake.NewSimpleClientset(class())
	if m != nil {
		if err := f.machines.Tracker().Add(m); err != nil {
			t.Fatal(err)
		}
	}
	core := k8sfake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}, Data: map[string][]byte{"userData": []byte("#!/bin/sh")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: ns}, Data: map[string][]byte{"accessKeyID": []byte("AKIA")}},
	)
	target := k8sfake.NewSimpleClientset()
	f.mFactory = machineinformers.NewSharedInformerFactoryWithOptions(f.machines, 0, machineinformers.WithNamespace(ns))
	f.nFactory = kubeinformers.NewSharedInformerFactory(target, 0)
	w, err := New(Config{
		Namespace:       ns,
		Machines:        f.machines.MachineV1alpha1(),
		Secrets:         core.CoreV1(),
		MachineInformer: f.mFactory.Machine().V1alpha1().Machines(),
		NodeInformer:    f.nFactory.Core().V1().Nodes(),
		Driver:          f.driver,
		Recorder:        f.recorder,
		Period:          period,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	if m != nil {
		f.cacheMachine(t, m)
	}
	if n != nil {
		f.cacheNode(t, n)
	}
	return f
}

func (f *fixture) cacheMachine(t *testing.T, m *v1alpha1.Machine) {
	t.Helper()
	sidecartest.Cache(t, f.mFactory.Machine().V1alpha1().Machines().Informer(), m)
}

func (f *fixture) cacheNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	slim, _ := slimNode(n.DeepCopy())
	sidecartest.Cache(t, f.nFactory.Core().V1().Nodes().Informer(), slim)
}

func (f *fixture) stored(t *testing.T) *v1alpha1.Machine {
	t.Helper()
	m, err := f.machines.MachineV1alpha1().Machines(ns).Get(context.Background(), machineN, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fakeDriver answers every GetMachineStatus with answer and records the requests.
type fakeDriver struct {
	mu     sync.Mutex
	answer error
	reqs   []*mcmdriver.GetMachineStatusRequest
}

func (d *fakeDriver) GetMachineStatus(_ context.Context, req *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reqs = append(d.reqs, req)
	if d.answer != nil {
		return nil, d.answer
	}
	return &mcmdriver.GetMachineStatusResponse{ProviderID: providerID, NodeName: nodeN}, nil
}

func (d *fakeDriver) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

func reclaims(t *testing.T) float64 {
	t.Helper()
	return sidecartest.Counter(t, Reclaims)
}

func TestAReclaimedSpotVMFailsItsMachine(t *testing.T) {
	for name, n := range map[string]*corev1.Node{
		"node Ready=Unknown": node(corev1.ConditionUnknown),
		"node NotReady":      node(corev1.ConditionFalse),
		"node being deleted": func() *corev1.Node {
			n := node(corev1.ConditionTrue)
			n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			n.Finalizers = []string{"node.machine.sapcloud.io/machine-controller"}
			return n
		}(),
		"node gone": nil,
	} {
		for _, phase := range []v1alpha1.MachinePhase{v1alpha1.MachineRunning, v1alpha1.MachineUnknown} {
			t.Run(name+"/"+string(phase), func(t *testing.T) {
				m := machine(phase)
				expiry := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
				m.Status.CurrentStatus.PreserveExpiryTime = &expiry
				f := newFixture(t, m, n, sidecartest.DriverError(t, grpccodes.NotFound, reclaimMsg, driver.ReasonSpotReclaimed))
				before := reclaims(t)

				if after := f.w.check(context.Background(), machineN); after != 0 {
					t.Errorf("looks again after %s, want never (the machine is Failed)", after)
				}
				if f.driver.calls() != 1 {
					t.Fatalf("%d driver calls, want 1", f.driver.calls())
				}
				req := f.driver.reqs[0]
				if req.Machine.Name != machineN || req.Machine.Spec.ProviderID != providerID || req.MachineClass.Name != "spot" ||
					string(req.Secret.Data["userData"]) != "#!/bin/sh" || string(req.Secret.Data["accessKeyID"]) != "AKIA" {
					t.Errorf("request: machine %q %q, class %q, secret keys %v", req.Machine.Name, req.Machine.Spec.ProviderID, req.MachineClass.Name, req.Secret.Data)
				}
				got := f.stored(t)
				op := got.Status.LastOperation
				if got.Status.CurrentStatus.Phase != v1alpha1.MachineFailed || op.State != v1alpha1.MachineStateFailed ||
					op.Type != v1alpha1.MachineOperationHealthCheck || !strings.Contains(op.Description, reclaimMsg) {
					t.Errorf("status: phase %q, last operation %+v", got.Status.CurrentStatus.Phase, op)
				}
				if p := got.Status.CurrentStatus.PreserveExpiryTime; p == nil || !p.Equal(&expiry) {
					t.Errorf("preserve expiry %v, want %v kept", p, expiry)
				}
				if got.Status.CurrentStatus.LastUpdateTime.Before(&m.Status.CurrentStatus.LastUpdateTime) || got.Status.LastKnownState != "known" {
					t.Errorf("status: %+v", got.Status)
				}
				select {
				case e := <-f.recorder.Events:
					if !strings.HasPrefix(e, "Warning "+EventReason+" ") || !strings.Contains(e, reclaimMsg) {
						t.Errorf("event %q", e)
					}
				default:
					t.Error("no event recorded")
				}
				if d := reclaims(t) - before; d != 1 {
					t.Errorf("%s counted %v times", Reclaims.Desc(), d)
				}
			})
		}
	}
}

// Any other answer leaves the machine to MCM's health timeout, and it is asked about again later.
func TestOtherAnswersLeaveTheMachineAlone(t *testing.T) {
	for name, answer := range map[string]error{
		"NOT_FOUND without the reason": sidecartest.DriverError(t, grpccodes.NotFound, "VM i-0abc not found", "NOT_FOUND"),
		"NOT_FOUND without details":    status.Error(codes.NotFound, reclaimMsg),
		"the reason on another code":   sidecartest.DriverError(t, grpccodes.Unavailable, reclaimMsg, driver.ReasonSpotReclaimed),
		"the VM runs":                  nil,
		"Uninitialized":                status.Error(codes.Uninitialized, "initialization pending: x"),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, machine(v1alpha1.MachineUnknown), node(corev1.ConditionUnknown), answer)
			before := reclaims(t)
			if after := f.w.check(context.Background(), machineN); after != period {
				t.Errorf("looks again after %s, want %s", after, period)
			}
			if f.driver.calls() != 1 {
				t.Fatalf("%d driver calls, want 1", f.driver.calls())
			}
			got := f.stored(t)
			if got.Status.CurrentStatus.Phase != v1alpha1.MachineUnknown || got.Status.LastOperation.Type != v1alpha1.MachineOperationCreate {
				t.Errorf("status changed: %+v", got.Status)
			}
			if len(f.recorder.Events) != 0 || reclaims(t) != before {
				t.Error("an event or a count for a machine not reclaimed")
			}
		})
	}
}

// No call while the node is Ready, or for a machine MCM does not leave to its health timeout.
func TestNoCallWithoutADownNodeOrForOtherMachines(t *testing.T) {
	gone := machine(v1alpha1.MachineRunning)
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	gone.Finalizers = []string{"machine.sapcloud.io/machine-controller"}
	noProvider := machine(v1alpha1.MachineRunning)
	noProvider.Spec.ProviderID = ""
	noNode := machine(v1alpha1.MachineRunning)
	delete(noNode.Labels, v1alpha1.NodeLabelKey)
	noTimeout := machine(v1alpha1.MachineUnknown)
	noTimeout.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{DisableHealthTimeout: ptr.To(true)}
	down := node(corev1.ConditionUnknown)
	for name, c := range map[string]struct {
		m *v1alpha1.Machine
		n *corev1.Node
	}{
		"node Ready":            {machine(v1alpha1.MachineRunning), node(corev1.ConditionTrue)},
		"node Ready, Unknown":   {machine(v1alpha1.MachineUnknown), node(corev1.ConditionTrue)},
		"Pending":               {machine(v1alpha1.MachinePending), down},
		"Failed already":        {machine(v1alpha1.MachineFailed), down},
		"Terminating":           {machine(v1alpha1.MachineTerminating), down},
		"CrashLoopBackOff":      {machine(v1alpha1.MachineCrashLoopBackOff), nil},
		"being deleted":         {gone, down},
		"no providerID":         {noProvider, down},
		"no node label":         {noNode, nil},
		"disableHealthTimeout":  {noTimeout, down},
		"no such machine":       {nil, down},
		"InPlaceUpdating":       {machine(v1alpha1.MachineInPlaceUpdating), down},
		"InPlaceUpdateFailed":   {machine(v1alpha1.MachineInPlaceUpdateFailed), down},
		"Available (no target)": {machine(v1alpha1.MachineAvailable), nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, c.m, c.n, sidecartest.DriverError(t, grpccodes.NotFound, reclaimMsg, driver.ReasonSpotReclaimed))
			if after := f.w.check(context.Background(), machineN); after != 0 || f.driver.calls() != 0 {
				t.Fatalf("%d driver calls, looks again after %s; want none", f.driver.calls(), after)
			}
			if c.m != nil && f.stored(t).Status.CurrentStatus.Phase != c.m.Status.CurrentStatus.Phase {
				t.Fatal("phase changed")
			}
		})
	}
}

// At most one call per machine per period: at once, then after 1, 2, 4, 8, 8 periods
// while the node stays down; a node Ready again starts over.
func TestAtMostOneCallPerMachinePerPeriod(t *testing.T) {
	f := newFixture(t, machine(v1alpha1.MachineUnknown), node(corev1.ConditionUnknown), sidecartest.DriverError(t, grpccodes.Unavailable, "throttled", "THROTTLED"))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.w.now = func() time.Time { return now }
	ctx := context.Background()
	expect := func(calls int, after time.Duration) {
		t.Helper()
		if got := f.w.check(ctx, machineN); got != after || f.driver.calls() != calls {
			t.Fatalf("at %s: %d calls, looks again after %s; want %d, %s", now.Format(time.TimeOnly), f.driver.calls(), got, calls, after)
		}
	}
	expect(1, period)
	expect(1, period) // the same instant: no call
	now = now.Add(period / 3)
	expect(1, period-period/3)
	now = now.Add(period - period/3)
	expect(2, 2*period)
	now = now.Add(period) // half way
	expect(2, period)
	for _, want := range []time.Duration{4, 8, 8} {
		now = now.Add(period)
		expect(f.driver.calls()+1, want*period)
		now = now.Add(want*period - time.Nanosecond)
		expect(f.driver.calls(), time.Nanosecond)
		now = now.Add(time.Nanosecond - period)
	}
	// Ready again: no call, and the next time down is checked at once.
	f.cacheNode(t, node(corev1.ConditionTrue))
	expect(f.driver.calls(), 0)
	f.cacheNode(t, node(corev1.ConditionFalse))
	expect(f.driver.calls()+1, period)
}

func TestTheNodeCacheKeepsOnlyWhatTheWatcherReads(t *testing.T) {
	n := node(corev1.ConditionFalse)
	n.Labels = map[string]string{"a": "b"}
	slim, err := slimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	s := slim.(*corev1.Node)
	if s.Name != nodeN || len(s.Annotations) != 0 || len(s.Labels) != 0 || s.Spec.ProviderID != "" ||
		len(s.Status.Conditions) != 1 || s.Status.Conditions[0].Type != corev1.NodeReady || !nodeDown(s) {
		t.Fatalf("slim node %+v", s)
	}
	if other, _ := slimNode("tombstone"); other != "tombstone" {
		t.Fatal("a non-node changed")
	}
}

func TestNewRefusesANegativePeriod(t *testing.T) {
	machines := machinefake.NewSimpleClientset()
	_, err := New(Config{
		Namespace:       ns,
		MachineInformer: machineinformers.NewSharedInformerFactory(machines, 0).Machine().V1alpha1().Machines(),
		NodeInformer:    kubeinformers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0).Core().V1().Nodes(),
		Period:          -time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "positive") {
		t.Fatalf("err %v", err)
	}
}
