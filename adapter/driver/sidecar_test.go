package driver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// The adapter against every provider's real sidecar binary on its embedded fake
// cloud, as MCM's controller calls it: create, status (Uninitialized or OK),
// initialize, list, delete, status NotFound. MACHINE_DRIVER_BIN_DIR names the
// directory of the binaries built with `--features embedded-fake`
// (scripts/test.sh sets it); providers are discovered from ../providers/*/examples.
func TestLifecycleThroughTheSidecarOfEveryProvider(t *testing.T) {
	eachProvider(t, lifecycle)
}

func lifecycle(t *testing.T, binary, examples string) {
	ctx := context.Background()
	d := startSidecar(t, binary)
	spec, secretData := exampleClass(t, examples)
	secret := &corev1.Secret{Data: secretData}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--demo--cluster"},
		Provider:     d.Provider,
		ProviderSpec: runtime.RawExtension{Raw: spec},
	}
	name := fmt.Sprintf("adapter-%d", time.Now().UnixNano()%1_000_000)
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: class.Namespace, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()}}

	absent, err := d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	if code(err) != codes.NotFound || absent != nil {
		t.Fatalf("status before create: want NotFound, got %v (%v)", err, absent)
	}

	created, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	if err != nil || created.ProviderID == "" || created.NodeName == "" {
		t.Fatalf("create: %v %+v", err, created)
	}
	machine.Spec.ProviderID = created.ProviderID
	machine.Labels = map[string]string{v1alpha1.NodeLabelKey: created.NodeName}

	// MCM's flow: status; Uninitialized comes with a response naming the VM.
	st, err := d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	switch code(err) {
	case codes.OK:
	case codes.Uninitialized:
		if st == nil || st.ProviderID != created.ProviderID {
			t.Fatalf("Uninitialized without the VM's response: %+v", st)
		}
	default:
		t.Fatalf("status after create: %v", err)
	}
	init, err := d.InitializeMachine(ctx, &mcmdriver.InitializeMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	switch code(err) {
	case codes.OK:
		if init.ProviderID != created.ProviderID {
			t.Errorf("initialize answered %q, create %q", init.ProviderID, created.ProviderID)
		}
	case codes.Unimplemented: // MCM skips the step
		if d.Has(pb.Capability_CAPABILITY_INITIALIZE_MACHINE) {
			t.Errorf("Unimplemented from a sidecar that advertises InitializeMachine")
		}
	default:
		t.Fatalf("initialize right after create: %v", err)
	}
	waitInitialized(t, d, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})

	list, err := d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: class, Secret: secret})
	if err != nil || list.MachineList[created.ProviderID] != name {
		t.Fatalf("list: %v %v", err, list)
	}
	// A cloud may refuse to delete a VM that still starts (ECS): Unavailable, which MCM retries.
	deleteBy := time.Now().Add(30 * time.Second)
	for {
		_, err := d.DeleteMachine(ctx, &mcmdriver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
		if err == nil {
			break
		}
		if code(err) != codes.Unavailable || time.Now().After(deleteBy) {
			t.Fatalf("delete: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Bad input reaches MCM as InvalidArgument.
	bad := class.DeepCopy()
	bad.ProviderSpec.Raw = []byte("{")
	if _, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: machine, MachineClass: bad, Secret: secret}); code(err) != codes.InvalidArgument {
		t.Errorf("malformed spec: want InvalidArgument, got %v", err)
	}
}

func waitInitialized(t *testing.T, d *Driver, req *mcmdriver.GetMachineStatusRequest) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.GetMachineStatus(context.Background(), req)
		if err == nil {
			return
		}
		if code(err) != codes.Uninitialized || time.Now().After(deadline) {
			t.Fatalf("status never initialized: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// code is what MCM's controller reads from err (OK for nil, Unknown when it cannot parse it).
func code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	s, ok := status.FromError(err)
	if !ok {
		return codes.Unknown
	}
	return s.Code()
}
