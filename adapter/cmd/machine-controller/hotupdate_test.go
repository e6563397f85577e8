package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/hotupdate"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// updatingSidecar answers UpdateMachine with the tags applied and records
// the calls; it advertises CAPABILITY_UPDATE_MACHINE when capable.
type updatingSidecar struct {
	identity
	pb.UnimplementedMachineDriverServiceServer

	mu    sync.Mutex
	calls []*pb.UpdateMachineRequest
}

func (s *updatingSidecar) UpdateMachine(_ context.Context, req *pb.UpdateMachineRequest) (*pb.UpdateMachineResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req)
	return &pb.UpdateMachineResponse{ProviderId: req.GetMachine().GetProviderId(), Changes: []*pb.FieldChange{
		{Field: "providerSpec.tags", Outcome: pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_APPLIED, Detail: "set 1 tag on the VM"},
	}}, nil
}

func (s *updatingSidecar) requests() []*pb.UpdateMachineRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.UpdateMachineRequest(nil), s.calls...)
}

// The machine-controller as deployed, against real API servers (clusters_test.go):
// with --hot-update and a driver that can update machines, a Running
// machine first gets its class's spec hash, and after an edit of the class's
// tags one UpdateMachine (the old class as previous class), the result
// annotation, a HotUpdateApplied event and the count on /metrics. Without the
// flag, or with a driver without the capability, the edit calls nothing.
func TestTheMachineControllerAppliesAClassEditWithHotUpdate(t *testing.T) {
	for _, c := range []struct {
		name    string
		flag    bool
		capable bool
	}{
		{"on", true, true},
		{"flag off", false, true},
		{"driver without the capability", true, false},
	} {
		t.Run(c.name, func(t *testing.T) { hotUpdateScenario(t, c.flag, c.capable) })
	}
}

func hotUpdateScenario(t *testing.T, flag, capable bool) {
	ctx := context.Background()
	const (
		nsBase     = "shoot--demo--hot"
		nodeSuffix = "8"
		class      = "demo-worker-z1-a1b2c"
		before     = `{"machineType":"m5.large","tags":{"team":"a"}}`
		after      = `{"machineType":"m5.large","tags":{"team":"b"}}`
	)
	on := flag && capable
	sidecar := &updatingSidecar{}
	if capable {
		sidecar.Capabilities = []pb.Capability{pb.Capability_CAPABILITY_UPDATE_MACHINE}
	}
	dir, socket := sidecartest.Serve(t, sidecar, sidecar)

	cl := startClusters(t, dir)
	kc, mc := cl.kc, cl.mc
	ns := nsBase + cl.suffix
	nodeName := "ip-10-0-1-" + nodeSuffix + cl.suffix + ".ec2.internal"

	m := cl.createRunningMachine(t, runningMachine{ns: ns, secret: class, class: class, spec: before,
		node: nodeName, providerID: "aws:///eu-west-1a/i-0hot" + cl.suffix, ready: corev1.ConditionTrue, readyReason: "KubeletReady",
		name: "worker-hot-abc12"})

	beforeHash, _ := hotupdate.SpecHash([]byte(before))
	afterHash, _ := hotupdate.SpecHash([]byte(after))
	port := freePort(t)
	var (
		got     *v1alpha1.Machine
		events  []string
		metrics string
	)
	look := func() {
		var err error
		if got, err = mc.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
		list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		events = nil
		for _, e := range list.Items {
			if strings.HasPrefix(e.Reason, "HotUpdate") && e.InvolvedObject.Name == m.Name {
				events = append(events, e.Type+" "+e.Reason+" "+e.Message)
			}
		}
	}
	until := func(d time.Duration, done func() bool) {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if look(); got != nil && done() {
				return
			}
		}
	}
	observe := func() {
		// The controller runs (its metrics answer) and, when on, recorded the machine's hash.
		until(20*time.Second, func() bool {
			resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
			if err == nil {
				_ = resp.Body.Close()
			}
			return err == nil && (!on || got.Annotations[hotupdate.SpecHashAnnotation] == beforeHash)
		})
		time.Sleep(time.Second) // off: long enough for the machine to be annotated if it were on
		c, err := mc.MachineV1alpha1().MachineClasses(ns).Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		c.ProviderSpec.Raw = []byte(after)
		if _, err := mc.MachineV1alpha1().MachineClasses(ns).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
			return
		}
		wait := 3 * time.Second
		if on {
			wait = 20 * time.Second
		}
		until(wait, func() bool { return on && got.Annotations[hotupdate.ResultAnnotation] != "" && len(events) > 0 })
		metrics = scrape(port)
	}
	args := controllerArgs(socket, ns, port, dir)
	if flag {
		args = append(args, "--hot-update", "--hot-update-concurrency=2")
	}
	code, out, _ := machineController(t, mcRun{signal: syscall.SIGTERM, when: observe}, args...)
	if code != exitOK {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	if got == nil {
		t.Fatalf("machine never read:\n%s", out)
	}
	if strings.Contains(out, "#!/bin/sh") {
		t.Errorf("the class secret's userData is in the log:\n%s", out)
	}
	calls := sidecar.requests()
	if !on {
		if len(calls) != 0 || len(events) != 0 || got.Annotations[hotupdate.SpecHashAnnotation] != "" || got.Annotations[hotupdate.ResultAnnotation] != "" {
			t.Fatalf("hot update off: %d calls, events %q, annotations %v:\n%s", len(calls), events, got.Annotations, out)
		}
		if flag && !strings.Contains(out, "hot update off: "+hotupdate.ErrUnsupported.Error()) {
			t.Errorf("no log line saying why hot update is off:\n%s", out)
		}
		return
	}
	if len(calls) != 1 {
		t.Fatalf("%d UpdateMachine calls, want 1:\n%s", len(calls), out)
	}
	req := calls[0]
	if req.GetMachine().GetName() != m.Name || req.GetMachineClass().GetProviderSpec() != after ||
		req.GetPreviousMachineClass().GetProviderSpec() != before || string(req.GetSecret().GetData()["userData"]) != "#!/bin/sh" {
		t.Errorf("request: machine %q, class %q, previous %q", req.GetMachine().GetName(), req.GetMachineClass().GetProviderSpec(), req.GetPreviousMachineClass().GetProviderSpec())
	}
	if got.Annotations[hotupdate.SpecHashAnnotation] != afterHash || !strings.Contains(got.Annotations[hotupdate.ResultAnnotation], `"outcome":"applied"`) {
		t.Errorf("annotations %v", got.Annotations)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+hotupdate.EventApplied+" ") || !strings.Contains(events[0], "providerSpec.tags") {
		t.Errorf("events %q", events)
	}
	if !strings.Contains(metrics, `machine_controller_hot_updates_total{outcome="applied"} 1`) {
		t.Errorf("/metrics without the update counted:\n%s", metrics)
	}
	if got.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Errorf("phase %s, want Running", got.Status.CurrentStatus.Phase)
	}
}
