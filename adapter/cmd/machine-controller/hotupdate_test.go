package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/hotupdate"
	"github.com/machine-driver/adapter/internal/sidecartest"
)

// updatingSidecar answers UpdateMachine with the tags applied and records
// the calls; it advertises CAPABILITY_UPDATE_MACHINE when capable.
type updatingSidecar struct {
	pb.UnimplementedIdentityServiceServer
	pb.UnimplementedMachineDriverServiceServer
	capable bool

	mu    sync.Mutex
	calls []*pb.UpdateMachineRequest
}

func (s *updatingSidecar) GetPluginInfo(context.Context, *pb.GetPluginInfoRequest) (*pb.GetPluginInfoResponse, error) {
	return &pb.GetPluginInfoResponse{Name: "fake", VendorVersion: "0", Provider: "fake"}, nil
}

func (s *updatingSidecar) GetPluginCapabilities(context.Context, *pb.GetPluginCapabilitiesRequest) (*pb.GetPluginCapabilitiesResponse, error) {
	if !s.capable {
		return &pb.GetPluginCapabilitiesResponse{}, nil
	}
	return &pb.GetPluginCapabilitiesResponse{Capabilities: []pb.Capability{pb.Capability_CAPABILITY_UPDATE_MACHINE}}, nil
}

func (s *updatingSidecar) Probe(context.Context, *pb.ProbeRequest) (*pb.ProbeResponse, error) {
	return &pb.ProbeResponse{Ready: true}, nil
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
	sidecar := &updatingSidecar{capable: capable}
	dir, socket := sidecartest.Serve(t, sidecar, sidecar)

	cl := startClusters(t, dir)
	kc, mc := cl.kc, cl.mc
	ns := nsBase + cl.suffix
	nodeName := "ip-10-0-1-" + nodeSuffix + cl.suffix + ".ec2.internal"

	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: class, Namespace: ns},
		Data: map[string][]byte{"userData": []byte("#!/bin/sh")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: class, Namespace: ns, Finalizers: []string{"machine.sapcloud.io/machine-controller"}},
		Provider:     "fake",
		ProviderSpec: runtime.RawExtension{Raw: []byte(before)},
		SecretRef:    &corev1.SecretReference{Name: class, Namespace: ns},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.createNode(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0hot" + cl.suffix},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
	})
	m, err := mc.MachineV1alpha1().Machines(ns).Create(ctx, &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-hot-abc12", Namespace: ns, Labels: map[string]string{v1alpha1.NodeLabelKey: nodeName}},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}, ProviderID: "aws:///eu-west-1a/i-0hot" + cl.suffix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.Now()}
	m.Status.LastOperation = v1alpha1.LastOperation{Description: "Machine worker-hot-abc12 successfully joined the cluster",
		State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate, LastUpdateTime: metav1.Now()}
	if _, err := mc.MachineV1alpha1().Machines(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	beforeHash, _ := hotupdate.SpecHash([]byte(before))
	afterHash, _ := hotupdate.SpecHash([]byte(after))
	port := freePort(t)
	var (
		got     *v1alpha1.Machine
		events  []string
		metrics string
	)
	look := func() {
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
		if resp, err := http.Get("http://127.0.0.1:" + port + "/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			metrics = string(body)
		}
	}
	args := []string{"--machine-driver-socket=" + socket, "--namespace=" + ns, "--port=" + port,
		"--control-kubeconfig=" + filepath.Join(dir, "control"), "--target-kubeconfig=" + filepath.Join(dir, "target")}
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
