package hotupdate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// updatingSidecar is a machine driver sidecar on a Unix socket that
// advertises CAPABILITY_UPDATE_MACHINE. Its UpdateMachine answers as a
// provider does: FAILED_PRECONDITION (reason NEEDS_REPLACEMENT) when the
// class's machineType is not m5.large (the VMs' type), else the tags APPLIED;
// each call takes 50 ms.
type updatingSidecar struct {
	sidecartest.Identity
	pb.UnimplementedMachineDriverServiceServer

	inFlight sidecartest.InFlight
	mu       sync.Mutex
	calls    map[string][]*pb.UpdateMachineRequest // by machine name
}

func (s *updatingSidecar) UpdateMachine(_ context.Context, req *pb.UpdateMachineRequest) (*pb.UpdateMachineResponse, error) {
	defer s.inFlight.Enter()()
	s.mu.Lock()
	s.calls[req.GetMachine().GetName()] = append(s.calls[req.GetMachine().GetName()], req)
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	var spec struct {
		MachineType string `json:"machineType"`
	}
	if err := json.Unmarshal([]byte(req.GetMachineClass().GetProviderSpec()), &spec); err != nil {
		return nil, grpcstatus.Error(grpccodes.InvalidArgument, "providerSpec: "+err.Error())
	}
	if spec.MachineType != "m5.large" {
		return nil, sidecartest.StatusError(grpccodes.FailedPrecondition,
			"VM "+req.GetMachine().GetProviderId()+": only a replacement can change providerSpec.machineType (nothing can be changed in place)",
			driver.ReasonNeedsReplacement)
	}
	return &pb.UpdateMachineResponse{ProviderId: req.GetMachine().GetProviderId(), Changes: []*pb.FieldChange{
		{Field: "providerSpec.machineType", Outcome: pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_UNCHANGED},
		{Field: "providerSpec.tags", Outcome: pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_APPLIED, Detail: tagsMsg},
	}}, nil
}

// callsOf is how many calls each machine got, and the previous class specs sent to name.
func (s *updatingSidecar) callsOf(name string) (n int, previous []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range s.calls[name] {
		previous = append(previous, req.GetPreviousMachineClass().GetProviderSpec())
	}
	return len(s.calls[name]), previous
}

func (s *updatingSidecar) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, reqs := range s.calls {
		out = append(out, fmt.Sprintf("%s×%d", name, len(reqs)))
	}
	sort.Strings(out)
	return out
}

// The reconciler on running informers, through the adapter's real gRPC
// client. Class classN has seven Running machines that recorded version 1,
// one Pending one, and one Running machine without a hash; class otherN has a
// Running machine. Editing classN's tags calls UpdateMachine once for each of
// its eight Running machines (the one without a hash recorded version 1 at
// start, without a call), with version 1 as previous class, at most three at
// a time; the Pending machine is called once it turns Running; otherN's
// machine never. Then a machineType edit: NEEDS_REPLACEMENT for every
// machine, one call each, a Warning event each, no retry.
func TestThroughTheGRPCClientAClassEditReachesItsRunningMachines(t *testing.T) {
	sidecar := &updatingSidecar{Identity: sidecartest.Identity{Capabilities: []pb.Capability{pb.Capability_CAPABILITY_UPDATE_MACHINE}},
		calls: map[string][]*pb.UpdateMachineRequest{}}
	_, socket := sidecartest.Serve(t, sidecar, sidecar)
	ctx, d := sidecartest.Dial(t, socket)

	v1 := hashOf(t, specV1)
	objs := []runtime.Object{class(classN, specV1), class(otherN, specV1)}
	var running []string
	for i := range 7 {
		name := fmt.Sprintf("w-%d", i)
		running = append(running, name)
		objs = append(objs, machine(name, classN, v1alpha1.MachineRunning, v1))
	}
	running = append(running, "fresh")
	objs = append(objs, machine("fresh", classN, v1alpha1.MachineRunning, ""),
		machine("pending", classN, v1alpha1.MachinePending, v1),
		machine("other", otherN, v1alpha1.MachineRunning, v1))
	machines := machinefake.NewSimpleClientset(objs...)
	machinesWatched := sidecartest.WatchStarted(&machines.Fake, machines.Tracker(), "machines")
	classesWatched := sidecartest.WatchStarted(&machines.Fake, machines.Tracker(), "machineclasses")
	core := k8sfake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: classN, Namespace: ns}, Data: map[string][]byte{"userData": []byte("x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}, Data: map[string][]byte{"accessKeyID": []byte("AKIA")}},
	)
	factory := machineinformers.NewSharedInformerFactoryWithOptions(machines, 0, machineinformers.WithNamespace(ns))
	recorder := record.NewFakeRecorder(100)
	r, err := New(Config{
		Namespace:       ns,
		Machines:        machines.MachineV1alpha1(),
		Secrets:         core.CoreV1(),
		MachineInformer: factory.Machine().V1alpha1().Machines(),
		ClassInformer:   factory.Machine().V1alpha1().MachineClasses(),
		Driver:          d,
		Recorder:        recorder,
		Workers:         3,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	sidecartest.AwaitRunning(t, ctx, r.Run, r.synced, machinesWatched, classesWatched)
	get := func(name string) (*v1alpha1.Machine, *Result) {
		m, err := machines.MachineV1alpha1().Machines(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var res *Result
		if raw, ok := m.Annotations[ResultAnnotation]; ok {
			res = &Result{}
			if err := json.Unmarshal([]byte(raw), res); err != nil {
				t.Fatal(err)
			}
		}
		return m, res
	}
	waitFor := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("after 15 s, not %s; calls %v", what, sidecar.called())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the fresh machine's hash recorded", func() bool {
		m, _ := get("fresh")
		return m.Annotations[SpecHashAnnotation] == v1
	})
	time.Sleep(100 * time.Millisecond)
	if c := sidecar.called(); len(c) != 0 {
		t.Fatalf("calls before any edit: %v", c)
	}
	before := count(t, OutcomeApplied)

	edit := func(spec string) {
		t.Helper()
		c, err := machines.MachineV1alpha1().MachineClasses(ns).Get(ctx, classN, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.ProviderSpec.Raw = []byte(spec)
		if _, err := machines.MachineV1alpha1().MachineClasses(ns).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	outcomes := func(names []string, want string) func() bool {
		return func() bool {
			for _, name := range names {
				if _, res := get(name); res == nil || res.Outcome != want {
					return false
				}
			}
			return true
		}
	}
	edit(specV2)
	waitFor("applied to every Running machine", outcomes(running, OutcomeApplied))
	time.Sleep(200 * time.Millisecond) // any further call would have been sent by now
	for _, name := range running {
		n, previous := sidecar.callsOf(name)
		if n != 1 || previous[0] != specV1 {
			t.Errorf("%s: %d calls, previous classes %q; want one, with version 1", name, n, previous)
		}
		if m, _ := get(name); m.Annotations[SpecHashAnnotation] != hashOf(t, specV2) {
			t.Errorf("%s: hash %q", name, m.Annotations[SpecHashAnnotation])
		}
	}
	for _, name := range []string{"pending", "other"} {
		if n, _ := sidecar.callsOf(name); n != 0 {
			t.Errorf("%s called %d times", name, n)
		}
		if m, res := get(name); res != nil || m.Annotations[SpecHashAnnotation] != v1 {
			t.Errorf("%s annotated: %v", name, m.Annotations)
		}
	}
	if m := sidecar.inFlight.Max(); m > 3 || m < 2 {
		t.Errorf("%d calls open at once, want 2 or 3 (at most the 3 workers)", m)
	}
	if n := count(t, OutcomeApplied) - before; n != float64(len(running)) {
		t.Errorf("applied counted %v times, want %d", n, len(running))
	}
	if n := len(recorder.Events); n != len(running) {
		t.Errorf("%d events, want %d", n, len(running))
	}
	for range len(recorder.Events) {
		if e := <-recorder.Events; !strings.HasPrefix(e, "Normal "+EventApplied) {
			t.Errorf("event %q", e)
		}
	}

	// The Pending machine turns Running: called then, with version 1.
	p, _ := get("pending")
	p.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	if _, err := machines.MachineV1alpha1().Machines(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("applied to the machine turned Running", outcomes([]string{"pending"}, OutcomeApplied))
	if n, previous := sidecar.callsOf("pending"); n != 1 || previous[0] != specV1 {
		t.Errorf("pending: %d calls, previous %q", n, previous)
	}
	select {
	case <-recorder.Events:
	case <-time.After(5 * time.Second):
		t.Error("no event for the machine turned Running")
	}

	// A change only a replacement can make: reported once per machine, not retried.
	all := append(running, "pending")
	edit(specV3)
	waitFor("reported as needing a replacement", outcomes(all, OutcomeNeedsReplacement))
	time.Sleep(300 * time.Millisecond)
	for _, name := range all {
		n, previous := sidecar.callsOf(name)
		if n != 2 || previous[1] != specV2 {
			t.Errorf("%s: %d calls, previous %q; want a second call with version 2", name, n, previous)
		}
	}
	if n, _ := sidecar.callsOf("other"); n != 0 {
		t.Errorf("other called %d times", n)
	}
	if n := len(recorder.Events); n != len(all) {
		t.Errorf("%d events, want %d", n, len(all))
	}
	for range len(recorder.Events) {
		if e := <-recorder.Events; !strings.HasPrefix(e, "Warning "+EventNeedsReplacement) || !strings.Contains(e, "providerSpec.machineType") {
			t.Errorf("event %q", e)
		}
	}
}
