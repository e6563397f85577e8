package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	grpccodes "google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// reclaimingSidecar answers every GetMachineStatus as the sidecar does for a
// reclaimed Spot VM, and counts the calls.
type reclaimingSidecar struct {
	pb.UnimplementedMachineDriverServiceServer
	calls atomic.Int32
}

const reclaimedMessage = "the cloud reclaimed Spot VM i-0spot: Server.SpotInstanceTermination"

func (s *reclaimingSidecar) GetMachineStatus(context.Context, *pb.GetMachineStatusRequest) (*pb.GetMachineStatusResponse, error) {
	s.calls.Add(1)
	return nil, sidecartest.StatusError(grpccodes.NotFound, reclaimedMessage, driver.ReasonSpotReclaimed)
}

// The machine-controller as deployed (leader election, MCM's controllers, the
// watcher) against real API servers (clusters_test.go): a Running machine whose Node
// is NotReady and whose Spot VM the sidecar reports reclaimed turns Failed,
// with an event and the counter on /metrics; with --spot-reclaim-watch=false
// it is left to MCM (Unknown, no status call).
func TestTheMachineControllerFailsAMachineWhoseSpotVMWasReclaimed(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) { reclaimScenario(t, watch) })
	}
}

func reclaimScenario(t *testing.T, watch bool) {
	ctx := context.Background()
	const (
		nsBase     = "shoot--demo--spot"
		nodeSuffix = "7"
	)
	sidecar := &reclaimingSidecar{}
	dir, socket := sidecartest.Serve(t, identity{}, sidecar)

	cl := startClusters(t, dir)
	kc, mc := cl.kc, cl.mc
	ns := nsBase + cl.suffix
	nodeName := "ip-10-0-1-" + nodeSuffix + cl.suffix + ".ec2.internal"

	// The CRD requires a providerSpec; the sidecar here reads none.
	m := cl.createRunningMachine(t, runningMachine{ns: ns, secret: "cloudprovider", class: "spot", spec: `{"machineType":"m5.large"}`,
		node: nodeName, providerID: "aws:///eu-west-1a/i-0spot" + cl.suffix, ready: corev1.ConditionUnknown, readyReason: "NodeStatusUnknown",
		name: "worker-spot-abc12"})

	port := freePort(t)
	var (
		got           *v1alpha1.Machine
		metrics       string
		reclaimEvents []string
	)
	look := func() {
		var err error
		if got, err = mc.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
		events, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		reclaimEvents = nil
		for _, e := range events.Items {
			if e.Reason == "SpotReclaimed" && e.InvolvedObject.Name == m.Name && e.Type == corev1.EventTypeWarning {
				reclaimEvents = append(reclaimEvents, e.Message)
			}
		}
	}
	// Until the machine is Failed and its event recorded (watcher off: 4 s,
	// long after MCM's health check set it to Unknown), then SIGTERM.
	observe := func() {
		deadline := time.Now().Add(20 * time.Second)
		if !watch {
			deadline = time.Now().Add(4 * time.Second)
		}
		for time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			if look(); got != nil && got.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && len(reclaimEvents) > 0 {
				break
			}
		}
		metrics = scrape(port)
	}
	code, out, _ := machineController(t, mcRun{signal: syscall.SIGTERM, when: observe},
		controllerArgs(socket, ns, port, dir, fmt.Sprintf("--spot-reclaim-watch=%v", watch), "--spot-reclaim-check-period=1h")...)
	if code != exitOK {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	if got == nil {
		t.Fatalf("machine never read:\n%s", out)
	}
	t.Logf("machine: phase %s, last operation %q", got.Status.CurrentStatus.Phase, got.Status.LastOperation.Description)
	op := got.Status.LastOperation
	if !watch {
		if got.Status.CurrentStatus.Phase == v1alpha1.MachineFailed || sidecar.calls.Load() != 0 || len(reclaimEvents) != 0 ||
			!strings.Contains(metrics, "machine_controller_spot_reclaims_total 0") {
			t.Fatalf("watcher off: phase %s (want MCM's Unknown or Running), %d status calls, events %q:\n%s", got.Status.CurrentStatus.Phase, sidecar.calls.Load(), reclaimEvents, out)
		}
		return
	}
	if got.Status.CurrentStatus.Phase != v1alpha1.MachineFailed || op.State != v1alpha1.MachineStateFailed ||
		op.Type != v1alpha1.MachineOperationHealthCheck || !strings.Contains(op.Description, reclaimedMessage) {
		t.Fatalf("phase %s, last operation %+v:\n%s", got.Status.CurrentStatus.Phase, op, out)
	}
	if n := sidecar.calls.Load(); n != 1 {
		t.Errorf("%d status calls, want 1", n)
	}
	if len(reclaimEvents) != 1 || !strings.Contains(reclaimEvents[0], reclaimedMessage) {
		t.Errorf("SpotReclaimed events: %q", reclaimEvents)
	}
	if !strings.Contains(metrics, "machine_controller_spot_reclaims_total 1") {
		t.Errorf("/metrics without the reclaim counted:\n%s", metrics)
	}
}
