package hotupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

const (
	ns      = "shoot--demo--cluster"
	classN  = "demo-worker-z1-a1b2c"
	otherN  = "demo-other-z1-d4e5f"
	specV1  = `{"machineType":"m5.large","tags":{"kubernetes.io/cluster/demo":"1","kubernetes.io/role/node":"1","team":"a","cost-center":"1"}}`
	specV2  = `{"machineType":"m5.large","tags":{"kubernetes.io/cluster/demo":"1","kubernetes.io/role/node":"1","team":"b"}}`
	specV3  = `{"machineType":"m5.xlarge","tags":{"kubernetes.io/cluster/demo":"1","kubernetes.io/role/node":"1","team":"b"}}`
	tagsMsg = "set 1 tag, removed 1 on the VM"
)

func hashOf(t *testing.T, spec string) string {
	t.Helper()
	h, err := SpecHash([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func class(name, spec string) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name, Namespace: ns},
		Provider:             "aws",
		ProviderSpec:         runtime.RawExtension{Raw: []byte(spec)},
		SecretRef:            &corev1.SecretReference{Name: name, Namespace: ns},
		CredentialsSecretRef: &corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
	}
}

// machine of class, in phase, with the recorded spec hash (none when "").
func machine(name, className string, phase v1alpha1.MachinePhase, hash string) *v1alpha1.Machine {
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1alpha1.NodeLabelKey: "node-" + name}},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: className},
			ProviderID: "aws:///eu-west-1a/i-" + name},
		Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: phase}},
	}
	if hash != "" {
		m.Annotations = map[string]string{SpecHashAnnotation: hash}
	}
	return m
}

// fakeDriver answers UpdateMachine with answer(req) and records the requests.
type fakeDriver struct {
	capable bool
	answer  func(*driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error)

	mu   sync.Mutex
	reqs []*driver.UpdateMachineRequest
}

func (d *fakeDriver) Has(c pb.Capability) bool {
	return d.capable && c == pb.Capability_CAPABILITY_UPDATE_MACHINE
}

func (d *fakeDriver) UpdateMachine(_ context.Context, req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
	d.mu.Lock()
	d.reqs = append(d.reqs, req)
	d.mu.Unlock()
	return d.answer(req)
}

func (d *fakeDriver) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

func appliedTags(req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
	return &driver.UpdateMachineResponse{ProviderID: req.Machine.Spec.ProviderID, Changes: []driver.FieldChange{
		{Field: "providerSpec.machineType", Outcome: driver.Unchanged},
		{Field: "providerSpec.tags", Outcome: driver.Applied, Detail: tagsMsg},
	}}, nil
}

// fixture is a reconciler on fake clusters whose informers' caches the test
// fills itself (no informer runs).
type fixture struct {
	r        *Reconciler
	machines *machinefake.Clientset
	recorder *record.FakeRecorder
	driver   *fakeDriver
	factory  machineinformers.SharedInformerFactory
	clock    time.Time // the reconciler's now
}

func newFixture(t *testing.T, d *fakeDriver, classes []*v1alpha1.MachineClass, machines ...*v1alpha1.Machine) *fixture {
	t.Helper()
	f := &fixture{recorder: record.NewFakeRecorder(100), driver: d}
	var objs []runtime.Object
	for _, m := range machines {
		objs = append(objs, m)
	}
	f.machines = machinefake.NewSimpleClientset(objs...)
	core := k8sfake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: classN, Namespace: ns}, Data: map[string][]byte{"userData": []byte("#!/bin/sh")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}, Data: map[string][]byte{"accessKeyID": []byte("AKIA")}},
	)
	f.factory = machineinformers.NewSharedInformerFactoryWithOptions(f.machines, 0, machineinformers.WithNamespace(ns))
	r, err := New(Config{
		Namespace:       ns,
		Machines:        f.machines.MachineV1alpha1(),
		Secrets:         core.CoreV1(),
		MachineInformer: f.factory.Machine().V1alpha1().Machines(),
		ClassInformer:   f.factory.Machine().V1alpha1().MachineClasses(),
		Driver:          d,
		Recorder:        f.recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	f.clock = time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return f.clock }
	for _, c := range classes {
		f.cacheClass(t, c)
	}
	for _, m := range machines {
		f.cacheMachine(t, m)
	}
	return f
}

func (f *fixture) cacheClass(t *testing.T, c *v1alpha1.MachineClass) {
	t.Helper()
	sidecartest.Cache(t, f.factory.Machine().V1alpha1().MachineClasses().Informer(), c)
}

func (f *fixture) cacheMachine(t *testing.T, m *v1alpha1.Machine) {
	t.Helper()
	sidecartest.Cache(t, f.factory.Machine().V1alpha1().Machines().Informer(), m)
}

// stored is the machine as the API server has it, with its result (nil without one).
func (f *fixture) stored(t *testing.T, name string) (*v1alpha1.Machine, *Result) {
	t.Helper()
	m, err := f.machines.MachineV1alpha1().Machines(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := m.Annotations[ResultAnnotation]
	if !ok {
		return m, nil
	}
	var res Result
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("result annotation %q: %v", raw, err)
	}
	return m, &res
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func count(t *testing.T, outcome string) float64 {
	t.Helper()
	return sidecartest.Counter(t, Updates.WithLabelValues(outcome))
}

func TestSpecHashIgnoresKeyOrderAndWhitespace(t *testing.T) {
	a := hashOf(t, `{"tags":{"a":"1","b":"2"},"machineType":"m5.large","iops":3000}`)
	b := hashOf(t, "{\n  \"machineType\": \"m5.large\",\n  \"iops\": 3000, \"tags\": {\"b\":\"2\",\"a\":\"1\"}}")
	if a != b || len(a) != 64 {
		t.Fatalf("hashes %q %q", a, b)
	}
	if c := hashOf(t, `{"tags":{"a":"1","b":"3"},"machineType":"m5.large","iops":3000}`); c == a {
		t.Fatal("a changed tag value kept the hash")
	}
	if _, err := SpecHash([]byte(`{"tags":`)); err == nil {
		t.Fatal("broken JSON hashed")
	}
}

// A class edited while the reconciler watches: the machine recorded the old
// version, the old version goes as previous class, the result and the new
// hash are recorded, a Normal event names what was applied.
func TestAnEditedClassIsAppliedWithThePreviousClass(t *testing.T) {
	d := &fakeDriver{capable: true, answer: appliedTags}
	f := newFixture(t, d, nil, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.classChanged(nil, class(classN, specV1)) // seen at start
	f.r.classChanged(class(classN, specV1), class(classN, specV2))
	f.cacheClass(t, class(classN, specV2))
	before := count(t, OutcomeApplied)

	if after := f.r.sync(context.Background(), "m1"); after != 0 {
		t.Fatalf("looked at again after %s", after)
	}
	if d.calls() != 1 {
		t.Fatalf("%d calls, want 1", d.calls())
	}
	req := d.reqs[0]
	if req.Machine.Name != "m1" || string(req.MachineClass.ProviderSpec.Raw) != specV2 ||
		req.PreviousMachineClass == nil || string(req.PreviousMachineClass.ProviderSpec.Raw) != specV1 || req.ValidateOnly {
		t.Fatalf("request: machine %q, class %s, previous %v", req.Machine.Name, req.MachineClass.ProviderSpec.Raw, req.PreviousMachineClass)
	}
	if string(req.Secret.Data["userData"]) != "#!/bin/sh" || string(req.Secret.Data["accessKeyID"]) != "AKIA" {
		t.Errorf("secret keys %v", req.Secret.Data)
	}
	m, res := f.stored(t, "m1")
	if m.Annotations[SpecHashAnnotation] != hashOf(t, specV2) || res == nil {
		t.Fatalf("annotations %v", m.Annotations)
	}
	if res.Outcome != OutcomeApplied || fmt.Sprint(res.Applied) != "[providerSpec.tags]" || fmt.Sprint(res.Unchanged) != "[providerSpec.machineType]" ||
		len(res.NeedsReplacement) != 0 || !res.PreviousClassSent || res.PreviousSpecHash != hashOf(t, specV1) ||
		res.SpecHash != hashOf(t, specV2) || res.Class != classN || !strings.Contains(res.Message, tagsMsg) {
		t.Errorf("result %+v", res)
	}
	events := f.events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+EventApplied+" ") || !strings.Contains(events[0], "providerSpec.tags") {
		t.Errorf("events %q", events)
	}
	if n := count(t, OutcomeApplied) - before; n != 1 {
		t.Errorf("applied counted %v times", n)
	}

	// Done: the machine (as the informer will show it) is left alone.
	f.cacheMachine(t, m)
	if f.r.sync(context.Background(), "m1") != 0 || d.calls() != 1 {
		t.Fatalf("%d calls after the update was recorded", d.calls())
	}
}

// After a restart the old object is gone: the machine's recorded hash differs
// from its class's, the call goes without a previous class (no tag removed).
func TestAfterARestartTheCallGoesWithoutAPreviousClass(t *testing.T) {
	d := &fakeDriver{capable: true, answer: appliedTags}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.classChanged(nil, class(classN, specV2))
	f.r.sync(context.Background(), "m1")
	if d.calls() != 1 || d.reqs[0].PreviousMachineClass != nil {
		t.Fatalf("%d calls, previous class %v; want one call without", d.calls(), d.reqs)
	}
	if _, res := f.stored(t, "m1"); res == nil || res.PreviousClassSent {
		t.Fatalf("result %+v", res)
	}
}

// Two edits: a machine still at the first version gets that version as
// previous class, not the second.
func TestThePreviousClassIsTheVersionTheMachineRecorded(t *testing.T) {
	d := &fakeDriver{capable: true, answer: appliedTags}
	const specMid = `{"machineType":"m5.large","tags":{"team":"mid"}}`
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.classChanged(nil, class(classN, specV1))
	f.r.classChanged(class(classN, specV1), class(classN, specMid))
	f.r.classChanged(class(classN, specMid), class(classN, specV2))
	f.r.sync(context.Background(), "m1")
	if d.calls() != 1 || d.reqs[0].PreviousMachineClass == nil || string(d.reqs[0].PreviousMachineClass.ProviderSpec.Raw) != specV1 {
		t.Fatalf("requests %+v", d.reqs)
	}
}

// A machine first seen without a hash gets its class's hash, without a call.
func TestAMachineFirstSeenRecordsItsClassWithoutACall(t *testing.T) {
	for _, phase := range []v1alpha1.MachinePhase{v1alpha1.MachinePending, v1alpha1.MachineRunning} {
		t.Run(string(phase), func(t *testing.T) {
			d := &fakeDriver{capable: true, answer: appliedTags}
			f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV1)}, machine("m1", classN, phase, ""))
			if f.r.sync(context.Background(), "m1") != 0 || d.calls() != 0 {
				t.Fatalf("%d calls", d.calls())
			}
			m, res := f.stored(t, "m1")
			if m.Annotations[SpecHashAnnotation] != hashOf(t, specV1) || res != nil || len(f.events()) != 0 {
				t.Fatalf("annotations %v", m.Annotations)
			}
		})
	}
}

// No call for a machine that is not Running, has no providerID, is being
// deleted, already has its class's hash, or whose class is gone.
func TestNoCallForOtherMachines(t *testing.T) {
	old := hashOf(t, specV1)
	deleting := machine("m1", classN, v1alpha1.MachineRunning, old)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"machine.sapcloud.io/machine-controller"}
	noID := machine("m1", classN, v1alpha1.MachineRunning, old)
	noID.Spec.ProviderID = ""
	for name, m := range map[string]*v1alpha1.Machine{
		"Pending":            machine("m1", classN, v1alpha1.MachinePending, old),
		"Unknown":            machine("m1", classN, v1alpha1.MachineUnknown, old),
		"Failed":             machine("m1", classN, v1alpha1.MachineFailed, old),
		"Terminating":        machine("m1", classN, v1alpha1.MachineTerminating, old),
		"no providerID":      noID,
		"being deleted":      deleting,
		"already up to date": machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV2)),
		"class gone":         machine("m1", "gone", v1alpha1.MachineRunning, old),
	} {
		t.Run(name, func(t *testing.T) {
			d := &fakeDriver{capable: true, answer: appliedTags}
			f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, m)
			if f.r.sync(context.Background(), "m1") != 0 || d.calls() != 0 {
				t.Fatalf("%d calls", d.calls())
			}
			if got, res := f.stored(t, "m1"); res != nil || got.Annotations[SpecHashAnnotation] != m.Annotations[SpecHashAnnotation] {
				t.Fatalf("annotations changed: %v", got.Annotations)
			}
		})
	}
}

// The replacement-only answer: recorded with the new hash, a Warning event
// with the driver's message naming the fields, never called again.
func TestNeedsReplacementIsReportedAndNotRetried(t *testing.T) {
	msg := "VM i-m1: only a replacement can change providerSpec.machineType (nothing can be changed in place)"
	d := &fakeDriver{capable: true, answer: func(*driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		return nil, sidecartest.DriverError(t, grpccodes.FailedPrecondition, msg, driver.ReasonNeedsReplacement)
	}}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV3)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV2)))
	before := count(t, OutcomeNeedsReplacement)
	if after := f.r.sync(context.Background(), "m1"); after != 0 {
		t.Fatalf("retried after %s", after)
	}
	m, res := f.stored(t, "m1")
	if res == nil || res.Outcome != OutcomeNeedsReplacement || res.Message != msg || m.Annotations[SpecHashAnnotation] != hashOf(t, specV3) {
		t.Fatalf("annotations %v", m.Annotations)
	}
	events := f.events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+EventNeedsReplacement+" ") || !strings.Contains(events[0], "providerSpec.machineType") {
		t.Fatalf("events %q", events)
	}
	if n := count(t, OutcomeNeedsReplacement) - before; n != 1 {
		t.Errorf("needs_replacement counted %v times", n)
	}
	// Neither the stale cache nor the recorded machine leads to another call.
	f.r.sync(context.Background(), "m1")
	f.cacheMachine(t, m)
	f.r.sync(context.Background(), "m1")
	if d.calls() != 1 {
		t.Fatalf("%d calls, want 1", d.calls())
	}
}

// Some fields applied, others need a replacement: both events.
func TestAPartialUpdateReportsBoth(t *testing.T) {
	d := &fakeDriver{capable: true, answer: func(req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		return &driver.UpdateMachineResponse{ProviderID: req.Machine.Spec.ProviderID, Changes: []driver.FieldChange{
			{Field: "providerSpec.machineType", Outcome: driver.NeedsReplacement, Detail: `"m5.large" -> "m5.xlarge"`},
			{Field: "providerSpec.tags", Outcome: driver.Applied, Detail: tagsMsg},
		}}, nil
	}}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV3)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.sync(context.Background(), "m1")
	m, res := f.stored(t, "m1")
	if res == nil || res.Outcome != OutcomePartiallyApplied || fmt.Sprint(res.NeedsReplacement) != "[providerSpec.machineType]" ||
		m.Annotations[SpecHashAnnotation] != hashOf(t, specV3) || !strings.Contains(res.Message, "m5.xlarge") {
		t.Fatalf("result %+v", res)
	}
	events := strings.Join(f.events(), "\n")
	if !strings.Contains(events, "Normal "+EventApplied) || !strings.Contains(events, "Warning "+EventNeedsReplacement) ||
		!strings.Contains(events, "only a replacement can change providerSpec.machineType") {
		t.Fatalf("events %q", events)
	}
}

// Nothing differed: recorded, no event.
func TestUnchangedIsRecordedWithoutAnEvent(t *testing.T) {
	d := &fakeDriver{capable: true, answer: func(req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		return &driver.UpdateMachineResponse{Changes: []driver.FieldChange{{Field: "providerSpec.tags", Outcome: driver.Unchanged}}}, nil
	}}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.sync(context.Background(), "m1")
	if _, res := f.stored(t, "m1"); res == nil || res.Outcome != OutcomeUnchanged || len(f.events()) != 0 {
		t.Fatalf("result %+v", res)
	}
}

// UNAVAILABLE and DEADLINE_EXCEEDED are retried (nothing recorded) with a
// backoff per machine that doubles (1 s, 2 s, 4 s); events meanwhile do not
// call before the backoff ends; the next attempt that succeeds is recorded.
func TestUnavailableIsRetriedWithBackoff(t *testing.T) {
	for _, c := range []grpccodes.Code{grpccodes.Unavailable, grpccodes.DeadlineExceeded} {
		t.Run(c.String(), func(t *testing.T) {
			fail := 3
			d := &fakeDriver{capable: true, answer: func(req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
				if fail > 0 {
					fail--
					return nil, sidecartest.DriverError(t, c, "throttled", "THROTTLED")
				}
				return appliedTags(req)
			}}
			f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
			before := count(t, OutcomeRetried)
			for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
				if after := f.r.sync(context.Background(), "m1"); after != want {
					t.Fatalf("attempt %d: again after %s, want %s", i+1, after, want)
				}
				if d.calls() != i+1 {
					t.Fatalf("attempt %d: %d calls", i+1, d.calls())
				}
				// An event before the backoff ends: no call, the rest of the wait.
				f.clock = f.clock.Add(want / 2)
				if after := f.r.sync(context.Background(), "m1"); after != want-want/2 || d.calls() != i+1 {
					t.Fatalf("attempt %d: during the backoff: again after %s, %d calls", i+1, after, d.calls())
				}
				f.clock = f.clock.Add(want - want/2)
			}
			if m, res := f.stored(t, "m1"); res != nil || m.Annotations[SpecHashAnnotation] != hashOf(t, specV1) || len(f.events()) != 0 {
				t.Fatalf("recorded a retried call: %v", m.Annotations)
			}
			if n := count(t, OutcomeRetried) - before; n != 3 {
				t.Errorf("retried counted %v times, want 3", n)
			}
			if f.r.sync(context.Background(), "m1") != 0 || d.calls() != 4 {
				t.Fatalf("%d calls", d.calls())
			}
			if _, res := f.stored(t, "m1"); res == nil || res.Outcome != OutcomeApplied {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// The sidecar's RetryInfo is a floor of the backoff; the backoff stops at RetryMax.
func TestTheBackoffHonoursRetryInfoAndStopsAtItsMax(t *testing.T) {
	delay := 30 * time.Second
	d := &fakeDriver{capable: true, answer: func(*driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		s, err := grpcstatus.New(grpccodes.Unavailable, "throttled").WithDetails(
			&errdetails.ErrorInfo{Reason: "THROTTLED", Domain: driver.ErrorDomain},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
		if err != nil {
			t.Fatal(err)
		}
		return nil, status.WrapError(codes.Unavailable, "throttled", s.Err())
	}}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	if after := f.r.sync(context.Background(), "m1"); after != delay {
		t.Fatalf("again after %s, want the RetryInfo's %s", after, delay)
	}
	delay = time.Millisecond
	var last time.Duration
	for range 12 {
		f.clock = f.clock.Add(time.Hour)
		last = f.r.sync(context.Background(), "m1")
	}
	if last != DefaultRetryMax || d.calls() != 13 {
		t.Fatalf("backoff after %d failures %s, want %s", d.calls(), last, DefaultRetryMax)
	}
}

// A bad class, credentials or permissions (and a driver bug) are recorded
// with a Warning event, the old hash kept, and retried after the error
// table's 3 minutes (quota: 10), not sooner on the patch's own event; once
// the operator fixed the cause, the next attempt is applied.
func TestPermissionErrorsAreRecordedAndRetriedLater(t *testing.T) {
	for _, c := range []struct {
		code  grpccodes.Code
		delay time.Duration
	}{
		{grpccodes.PermissionDenied, 3 * time.Minute},
		{grpccodes.InvalidArgument, 3 * time.Minute},
		{grpccodes.Unauthenticated, 3 * time.Minute},
		{grpccodes.Internal, 3 * time.Minute},
		{grpccodes.ResourceExhausted, 10 * time.Minute},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			fixed := false
			d := &fakeDriver{capable: true, answer: func(req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
				if !fixed {
					return nil, sidecartest.DriverError(t, c.code, "ec2:CreateTags denied", "CLOUD_ERROR")
				}
				return appliedTags(req)
			}}
			old := hashOf(t, specV1)
			f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, old))
			before := count(t, OutcomeFailed)
			if after := f.r.sync(context.Background(), "m1"); after != c.delay {
				t.Fatalf("again after %s, want %s", after, c.delay)
			}
			m, res := f.stored(t, "m1")
			if res == nil || res.Outcome != OutcomeFailed || !strings.Contains(res.Message, "ec2:CreateTags denied") ||
				m.Annotations[SpecHashAnnotation] != old || res.NextAttempt == nil || !res.NextAttempt.Time.Equal(f.clock.Add(c.delay)) {
				t.Fatalf("annotations %v", m.Annotations)
			}
			if events := f.events(); len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+EventFailed+" ") {
				t.Fatalf("events %q", events)
			}
			if n := count(t, OutcomeFailed) - before; n != 1 {
				t.Errorf("failed counted %v times", n)
			}
			// The patch's own event, a minute later: no call.
			f.cacheMachine(t, m)
			f.clock = f.clock.Add(time.Minute)
			if after := f.r.sync(context.Background(), "m1"); after != c.delay-time.Minute || d.calls() != 1 {
				t.Fatalf("again after %s, %d calls", after, d.calls())
			}
			// The operator fixes the permission; the retry is applied.
			fixed = true
			f.clock = f.clock.Add(c.delay)
			if after := f.r.sync(context.Background(), "m1"); after != 0 || d.calls() != 2 {
				t.Fatalf("again after %s, %d calls", after, d.calls())
			}
			if m, res := f.stored(t, "m1"); res == nil || res.Outcome != OutcomeApplied || res.NextAttempt != nil || m.Annotations[SpecHashAnnotation] != hashOf(t, specV2) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// A class edited while a machine waits for its retry is tried at once.
func TestAClassEditEndsTheWait(t *testing.T) {
	d := &fakeDriver{capable: true, answer: func(*driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		return nil, sidecartest.DriverError(t, grpccodes.PermissionDenied, "denied", "CLOUD_ERROR")
	}}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	if after := f.r.sync(context.Background(), "m1"); after != 3*time.Minute {
		t.Fatalf("again after %s", after)
	}
	f.cacheClass(t, class(classN, specV3))
	f.r.sync(context.Background(), "m1")
	if d.calls() != 2 || string(d.reqs[1].MachineClass.ProviderSpec.Raw) != specV3 {
		t.Fatalf("%d calls after the edit, want 2", d.calls())
	}
}

// Any other error: recorded with a Warning event, the machine keeps its old
// hash (another process tries again), this process does not.
func TestOtherErrorsAreRecordedNotRetried(t *testing.T) {
	d := &fakeDriver{capable: true, answer: func(*driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
		return nil, sidecartest.DriverError(t, grpccodes.NotFound, "VM i-m1 not found", "NOT_FOUND")
	}}
	old := hashOf(t, specV1)
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(classN, specV2)}, machine("m1", classN, v1alpha1.MachineRunning, old))
	if after := f.r.sync(context.Background(), "m1"); after != 0 {
		t.Fatalf("retried after %s", after)
	}
	m, res := f.stored(t, "m1")
	if res == nil || res.Outcome != OutcomeFailed || !strings.Contains(res.Message, "VM i-m1 not found") || m.Annotations[SpecHashAnnotation] != old {
		t.Fatalf("annotations %v", m.Annotations)
	}
	if events := f.events(); len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+EventFailed+" ") {
		t.Fatalf("events %q", events)
	}
	f.cacheMachine(t, m)
	if f.r.sync(context.Background(), "m1") != 0 || d.calls() != 1 {
		t.Fatalf("%d calls, want 1", d.calls())
	}
}

// Without the capability there is no reconciler.
func TestADriverWithoutTheCapabilityIsRefused(t *testing.T) {
	machines := machinefake.NewSimpleClientset()
	factory := machineinformers.NewSharedInformerFactory(machines, 0)
	_, err := New(Config{
		Namespace:       ns,
		MachineInformer: factory.Machine().V1alpha1().Machines(),
		ClassInformer:   factory.Machine().V1alpha1().MachineClasses(),
		Driver:          &fakeDriver{answer: appliedTags},
	})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err %v, want ErrUnsupported", err)
	}
}

// A machine whose class was changed (same VM) gets, as previous class, the
// version of its former class it recorded: the providerSpec is what counts.
func TestAMachineMovedToAnotherClassGetsItsFormerClassAsPrevious(t *testing.T) {
	d := &fakeDriver{capable: true, answer: appliedTags}
	f := newFixture(t, d, []*v1alpha1.MachineClass{class(otherN, specV2)}, machine("m1", otherN, v1alpha1.MachineRunning, hashOf(t, specV1)))
	f.r.classChanged(nil, class(classN, specV1))
	f.r.classChanged(nil, class(otherN, specV2))
	f.r.sync(context.Background(), "m1")
	if d.calls() != 1 || d.reqs[0].PreviousMachineClass == nil || d.reqs[0].PreviousMachineClass.Name != classN ||
		string(d.reqs[0].PreviousMachineClass.ProviderSpec.Raw) != specV1 {
		t.Fatalf("requests %+v", d.reqs)
	}
}
