package reclaim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	grpccodes "google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// fakeSidecar is a machine driver sidecar on a Unix socket: its
// GetMachineStatus answers as the sidecar's server does, NOT_FOUND with an
// ErrorInfo (domain machinedriver) whose reason is SPOT_RECLAIMED for the VMs
// in reclaimed and NOT_FOUND otherwise; each call takes 50 ms.
type fakeSidecar struct {
	sidecartest.Identity
	pb.UnimplementedMachineDriverServiceServer
	reclaimed map[string]bool // provider ids

	inFlight sidecartest.InFlight
	mu       sync.Mutex
	asked    map[string]int  // machine name → calls
	secrets  map[string]bool // secret keys seen
}

func (s *fakeSidecar) GetMachineStatus(_ context.Context, req *pb.GetMachineStatusRequest) (*pb.GetMachineStatusResponse, error) {
	defer s.inFlight.Enter()()
	s.mu.Lock()
	s.asked[req.GetMachine().GetName()]++
	for k := range req.GetSecret().GetData() {
		s.secrets[k] = true
	}
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	id := req.GetMachine().GetProviderId()
	vm := strings.TrimPrefix(id, "aws:///eu-west-1a/")
	if s.reclaimed[id] {
		return nil, sidecartest.StatusError(grpccodes.NotFound, "the cloud reclaimed Spot VM "+vm+": Server.SpotInstanceTermination", driver.ReasonSpotReclaimed)
	}
	return nil, sidecartest.StatusError(grpccodes.NotFound, "VM "+vm+" not found", "NOT_FOUND")
}

// The watcher on running informers, through the adapter's real gRPC client:
// five Running machines whose nodes go down (four NotReady, one deleted);
// the sidecar says two VMs were reclaimed (one NotReady, the deleted one).
// Exactly those two machines turn Failed, each machine is asked about once,
// at most Workers (2) calls are open at a time.
func TestThroughTheGRPCClientTheReclaimedMachinesFail(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("aws:///eu-west-1a/i-%d", i) }
	sidecar := &fakeSidecar{reclaimed: map[string]bool{id(0): true, id(4): true}, asked: map[string]int{}, secrets: map[string]bool{}}
	_, socket := sidecartest.Serve(t, sidecar, sidecar)
	ctx, d := sidecartest.Dial(t, socket)

	machineObjs := []runtime.Object{class()}
	var nodes []runtime.Object
	for i := range 5 {
		m := machine(v1alpha1.MachineRunning)
		m.Name, m.UID, m.Spec.ProviderID = fmt.Sprintf("worker-%d", i), types.UID(fmt.Sprintf("uid-%d", i)), id(i)
		m.Labels = map[string]string{v1alpha1.NodeLabelKey: fmt.Sprintf("node-%d", i)}
		machineObjs = append(machineObjs, m)
		n := node(corev1.ConditionTrue)
		n.Name = fmt.Sprintf("node-%d", i)
		nodes = append(nodes, n)
	}
	machines := machinefake.NewSimpleClientset(machineObjs...)
	core := k8sfake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}, Data: map[string][]byte{"userData": []byte("x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: ns}, Data: map[string][]byte{"accessKeyID": []byte("AKIA")}},
	)
	target := k8sfake.NewSimpleClientset(nodes...)
	nodesWatched := sidecartest.WatchStarted(&target.Fake, target.Tracker(), "nodes")
	mFactory := machineinformers.NewSharedInformerFactoryWithOptions(machines, 0, machineinformers.WithNamespace(ns))
	nFactory := kubeinformers.NewSharedInformerFactory(target, 0)
	recorder := record.NewFakeRecorder(10)
	w, err := New(Config{
		Namespace:       ns,
		Machines:        machines.MachineV1alpha1(),
		Secrets:         core.CoreV1(),
		MachineInformer: mFactory.Machine().V1alpha1().Machines(),
		NodeInformer:    nFactory.Core().V1().Nodes(),
		Driver:          d,
		Recorder:        recorder,
		Period:          time.Hour,
		Workers:         2,
	})
	if err != nil {
		t.Fatal(err)
	}
	mFactory.Start(ctx.Done())
	nFactory.Start(ctx.Done())
	sidecartest.AwaitRunning(t, ctx, w.Run, w.synced, nodesWatched)
	before := reclaims(t)
	if len(sidecar.asked) != 0 {
		t.Fatalf("calls while every node is Ready: %v", sidecar.asked)
	}

	for i := range 4 {
		n := node(corev1.ConditionUnknown)
		n.Name = fmt.Sprintf("node-%d", i)
		if _, err := target.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := target.CoreV1().Nodes().Delete(ctx, "node-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	phase := func(i int) v1alpha1.MachinePhase {
		m, err := machines.MachineV1alpha1().Machines(ns).Get(ctx, fmt.Sprintf("worker-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Status.CurrentStatus.Phase
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		sidecar.mu.Lock()
		asked := fmt.Sprint(sidecar.asked)
		n := len(sidecar.asked)
		sidecar.mu.Unlock()
		if n == 5 && phase(0) == v1alpha1.MachineFailed && phase(4) == v1alpha1.MachineFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: machines asked about %s, phases %s %s", asked, phase(0), phase(4))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // any further call would have been sent by now
	sidecar.mu.Lock()
	defer sidecar.mu.Unlock()
	for i := range 5 {
		if sidecar.asked[fmt.Sprintf("worker-%d", i)] != 1 {
			t.Errorf("calls per machine %v, want one each", sidecar.asked)
		}
	}
	for i := 1; i <= 3; i++ {
		if p := phase(i); p != v1alpha1.MachineRunning {
			t.Errorf("worker-%d (VM not reclaimed): phase %s, want Running", i, p)
		}
	}
	if !sidecar.secrets["accessKeyID"] || !sidecar.secrets["userData"] {
		t.Errorf("secret keys sent: %v", sidecar.secrets)
	}
	if m := sidecar.inFlight.Max(); m > 2 {
		t.Errorf("%d calls open at once, want at most 2", m)
	}
	m0, err := machines.MachineV1alpha1().Machines(ns).Get(ctx, "worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if op := m0.Status.LastOperation; op.Type != v1alpha1.MachineOperationHealthCheck || op.State != v1alpha1.MachineStateFailed ||
		!strings.Contains(op.Description, "the cloud reclaimed Spot VM i-0: Server.SpotInstanceTermination") {
		t.Errorf("last operation %+v", op)
	}
	if n := len(recorder.Events); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
	if d := reclaims(t) - before; d != 2 {
		t.Errorf("counted %v reclaims, want 2", d)
	}
}
