package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	machinecontroller "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecontroller"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machineutils"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/options"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// MCM's own machine controller (its exported constructor, fake clientsets and
// informers as MCM's controller tests use, no target cluster) drives every
// provider's real sidecar on its embedded fake cloud through the adapter: the
// machine is created and initialized (phase Available: without a target
// cluster there is no Node to wait for) after MCM retried a throttled create,
// with exactly one VM live in the fake's inventory;
// an orphan VM is collected while the machine's own stays; then the machine is
// deleted, its VM gone and its finalizer removed.
func TestMCMControllerDrivesTheSidecarOfEveryProvider(t *testing.T) {
	eachProvider(t, controllerFlow)
}

const e2eNamespace = "shoot--e2e--cluster"

func controllerFlow(t *testing.T, binary, examples string) {
	admin := freeAddr(t)
	d := startSidecar(t, binary, "--embedded-fake-listen", admin)
	spec, secretData := exampleClass(t, examples)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: e2eNamespace}, Data: secretData}
	if _, ok := secret.Data["userData"]; !ok {
		secret.Data["userData"] = []byte("#!/bin/sh\necho hello\n")
	}
	ref := &corev1.SecretReference{Name: secret.Name, Namespace: e2eNamespace}
	class := &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "class", Namespace: e2eNamespace},
		Provider:             d.Provider,
		ProviderSpec:         runtime.RawExtension{Raw: spec},
		SecretRef:            ref,
		CredentialsSecretRef: ref,
	}
	name := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000)
	machine := &v1alpha1.Machine{
		// As the API server sets them (the fake clientset does not).
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2eNamespace, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}},
	}

	machines := machinefake.NewSimpleClientset(class, machine)
	core := k8sfake.NewSimpleClientset(secret)
	machineFactory := machineinformers.NewSharedInformerFactoryWithOptions(machines, 100*time.Millisecond, machineinformers.WithNamespace(e2eNamespace))
	coreFactory := kubeinformers.NewSharedInformerFactoryWithOptions(core, 100*time.Millisecond, kubeinformers.WithNamespace(e2eNamespace))
	safety := options.SafetyOptions{
		MachineCreationTimeout:                   metav1.Duration{Duration: 20 * time.Minute},
		MachineHealthTimeout:                     metav1.Duration{Duration: 10 * time.Minute},
		MachineDrainTimeout:                      metav1.Duration{Duration: 5 * time.Minute},
		MachineSafetyOrphanVMsPeriod:             metav1.Duration{Duration: 2 * time.Second},
		MachineSafetyAPIServerStatusCheckPeriod:  metav1.Duration{Duration: time.Minute},
		MachineSafetyAPIServerStatusCheckTimeout: metav1.Duration{Duration: 30 * time.Second},
	}
	c, err := machinecontroller.NewController(e2eNamespace, machines.MachineV1alpha1(), core, nil, d, nil,
		coreFactory.Core().V1().Secrets(), machineFactory.Machine().V1alpha1().MachineClasses(),
		machineFactory.Machine().V1alpha1().Machines(), record.NewFakeRecorder(1000), safety, "", "", nil,
		machineutils.RetryPeriod(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The cloud throttles the first create and the sidecar's one resend: MCM gets
	// Unavailable and retries after its short period; exactly one VM results.
	adminPost(t, admin, "faults", `{"operation": "create", "kind": "throttle", "times": 2}`)
	adminPost(t, admin, "calls/reset", `{}`)

	stop := make(chan struct{})
	machineFactory.Start(stop)
	coreFactory.Start(stop)
	go c.Run(1, stop)
	t.Cleanup(func() {
		close(stop)
		if collector, ok := c.(prometheus.Collector); ok {
			prometheus.Unregister(collector)
		}
	})

	get := func() *v1alpha1.Machine {
		m, err := machines.MachineV1alpha1().Machines(e2eNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get machine: %v", err)
		}
		return m
	}
	// Without a target cluster MCM's flow ends in phase Available (Running needs a Node).
	eventually(t, 60*time.Second, "machine Available", func() (bool, string) {
		m := get()
		phase := m.Status.CurrentStatus.Phase
		done := phase == v1alpha1.MachineAvailable || phase == v1alpha1.MachineRunning
		return done && m.Status.LastOperation.State == v1alpha1.MachineStateSuccessful,
			fmt.Sprintf("%+v %+v", m.Status.CurrentStatus, m.Status.LastOperation)
	})
	m := get()
	if m.Spec.ProviderID == "" {
		t.Fatalf("created machine without providerID: %+v", m)
	}
	// The sidecar's addresses reached MCM's machine status (written without a target cluster).
	internal := false
	for _, a := range m.Status.Addresses {
		internal = internal || a.Type == corev1.NodeInternalIP
	}
	if !internal {
		t.Errorf("no InternalIP among the machine's addresses: %+v", m.Status.Addresses)
	}
	if live := liveInFake(t, admin, name); live != 1 {
		t.Fatalf("%d live VMs for the machine in the fake", live)
	}
	if creates := createCalls(t, admin); creates != 3 {
		t.Errorf("%d create calls reached the cloud, want 3 (two throttled, then one)", creates)
	}
	// MCM initialized it: the sidecar reports no pending step any more.
	eventually(t, 30*time.Second, "machine initialized", func() (bool, string) {
		_, err := d.GetMachineStatus(context.Background(), &mcmdriver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret})
		return err == nil, fmt.Sprint(err)
	})

	// A VM of the cluster that no Machine owns (created through the sidecar for a
	// machine MCM does not know) is removed by MCM's orphan collection, through
	// ListMachines and DeleteMachine; the machine's own VM stays.
	orphan := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name + "-orphan", Namespace: e2eNamespace, UID: types.UID("uid-orphan-" + name)}}
	if _, err := d.CreateMachine(context.Background(), &mcmdriver.CreateMachineRequest{Machine: orphan, MachineClass: class, Secret: secret}); err != nil {
		t.Fatalf("creating the orphan VM: %v", err)
	}
	eventually(t, 60*time.Second, "orphan VM collected", func() (bool, string) {
		left := liveInFake(t, admin, orphan.Name)
		return left == 0, fmt.Sprintf("%d live orphan VMs", left)
	})
	if live := liveInFake(t, admin, name); live != 1 {
		t.Fatalf("orphan collection left %d live VMs for the machine that exists", live)
	}

	// Deletion as the API server does it: a deletion timestamp, the finalizer kept.
	now := metav1.Now()
	m.DeletionTimestamp = &now
	if _, err := machines.MachineV1alpha1().Machines(e2eNamespace).Update(context.Background(), m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "VM gone and finalizer removed", func() (bool, string) {
		m, err := machines.MachineV1alpha1().Machines(e2eNamespace).Get(context.Background(), name, metav1.GetOptions{})
		gone := err != nil || len(m.Finalizers) == 0
		live := liveInFake(t, admin, name)
		state := "machine gone"
		if err == nil {
			state = fmt.Sprintf("finalizers %v, %+v", m.Finalizers, m.Status.LastOperation)
		}
		return gone && live == 0, fmt.Sprintf("%s; %d live VMs", state, live)
	})
}

func eventually(t *testing.T, limit time.Duration, what string, check func() (bool, string)) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, state := check()
		if ok {
			return state
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, limit, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// liveInFake counts the live instances named name in the fake's inventory.
func liveInFake(t *testing.T, admin, name string) int {
	resp, err := http.Get("http://" + admin + "/_admin/inventory")
	if err != nil {
		t.Fatalf("fake inventory: %v", err)
	}
	defer resp.Body.Close()
	var inv struct {
		Instances []struct {
			Name string `json:"name"`
			Live bool   `json:"live"`
		} `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil {
		t.Fatalf("fake inventory: %v", err)
	}
	n := 0
	for _, i := range inv.Instances {
		if i.Live && i.Name == name {
			n++
		}
	}
	return n
}

// adminPost posts body to the fake's admin API.
func adminPost(t *testing.T, admin, path, body string) {
	resp, err := http.Post("http://"+admin+"/_admin/"+path, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("fake admin %s: %v %v", path, err, resp)
	}
	_ = resp.Body.Close()
}

// createCalls is the number of create-class cloud calls since the last reset.
func createCalls(t *testing.T, admin string) int {
	resp, err := http.Get("http://" + admin + "/_admin/calls")
	if err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	defer resp.Body.Close()
	var calls struct {
		Classes map[string]int `json:"classes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		t.Fatalf("fake calls: %v", err)
	}
	return calls.Classes["create"]
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
