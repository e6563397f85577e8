package goproviders

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gardener/machine-controller-manager-provider-openstack/pkg/apis/openstack/install"
	osdriver "github.com/gardener/machine-controller-manager-provider-openstack/pkg/driver"
)

const openstackClient = "Go provider v0.27.1"

// newOpenStackDriver builds gardener's OpenStack driver exactly as its
// cmd/machine-controller/main.go does: the provider's API scheme, a strict decoder.
func newOpenStackDriver(t *testing.T) mcmdriver.Driver {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := install.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return osdriver.NewOpenstackDriver(serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder())
}

// TestOpenStackGoProviderLifecycle runs gardener/machine-controller-manager-provider-openstack,
// unmodified and in-process, against tests/fake-openstack through the one seam it has:
// the secret's authURL (Keystone; the catalog then points Nova, Neutron and Cinder at the
// fake). The class is the Rust driver's example (providers/openstack/examples), which is
// gardener's providerSpec: a user-managed port (networkID + subnetID) and a root volume of
// `rootDiskType` (so the Go provider creates the volume, then boots from it with
// `block_device_mapping_v2` `source_type: volume`).
func TestOpenStackGoProviderLifecycle(t *testing.T) {
	dumpKlogOnFailure(t)
	f := startFake(t, "fake-openstack")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	spec := readJSON(t, "../providers/openstack/examples/machine-class.json", nil)
	var parsed struct {
		Spec struct {
			Region string            `json:"region"`
			Tags   map[string]string `json:"tags"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(spec, &parsed); err != nil {
		t.Fatal(err)
	}
	data := secretData(t, "../providers/openstack/examples/secret.json")
	data["authURL"] = []byte(f.url + "/identity/v3")
	secret := &corev1.Secret{Data: data}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--dev--conf"},
		Provider:     "OpenStack",
		ProviderSpec: runtime.RawExtension{Raw: spec},
	}
	name := fmt.Sprintf("go-os-%d", time.Now().UnixNano()%1_000_000)
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: class.Namespace, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now(),
	}}
	d := newOpenStackDriver(t)
	f.takeCalls(t)
	var phases []phase

	created, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"create", code(err), f.takeCalls(t)})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	prefix := "openstack:///" + parsed.Spec.Region + "/"
	if !strings.HasPrefix(created.ProviderID, prefix) || created.NodeName != name {
		t.Fatalf("CreateMachine answered %+v", created)
	}
	serverID := strings.TrimPrefix(created.ProviderID, prefix)
	if len(created.Addresses) == 0 {
		t.Errorf("CreateMachine answered no addresses: %+v", created)
	}

	// The fake's own view: the server (ACTIVE, the class's tags as metadata), the
	// user-managed port and the root volume named after the machine, attached.
	instances, dependents := f.inventory(t).live(func(n string) bool { return n == name })
	if len(instances) != 1 || instances[0].ID != serverID || instances[0].State != "ACTIVE" {
		t.Fatalf("inventory instances for %s: %+v (want server %s ACTIVE)", name, instances, serverID)
	}
	for key := range parsed.Spec.Tags {
		if _, ok := instances[0].Tags[key]; !ok {
			t.Errorf("server metadata lacks the class tag %q: %v", key, instances[0].Tags)
		}
	}
	kinds := map[string]int{}
	for _, dep := range dependents {
		kinds[dep.Kind]++
	}
	if kinds["port"] != 1 || kinds["volume"] != 1 {
		t.Errorf("dependents of %s: %+v (want one port and one volume)", name, dependents)
	}

	machine.Spec.ProviderID = created.ProviderID
	_, err = d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"status", code(err), f.takeCalls(t)})
	// v0.27.1's GetMachineStatus is not implemented (pkg/driver/driver.go): MCM falls back
	// to the node object. Anything else means the provider changed under this test.
	if code(err) != "Unimplemented" {
		t.Errorf("GetMachineStatus: want Unimplemented from v0.27.1, got %v", err)
	}

	listed, err := d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: class, Secret: secret})
	phases = append(phases, phase{"list", code(err), f.takeCalls(t)})
	if err != nil {
		t.Fatalf("ListMachines: %v", err)
	}
	if listed.MachineList[created.ProviderID] != name {
		t.Errorf("ListMachines misses %s → %s: %v", created.ProviderID, name, listed.MachineList)
	}

	_, err = d.DeleteMachine(ctx, &mcmdriver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"delete", code(err), f.takeCalls(t)})
	if err != nil {
		t.Fatalf("DeleteMachine: %v", err)
	}
	f.expectNothingLeft(t, func(n string) bool { return n == name })

	listed, err = d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: class, Secret: secret})
	if err != nil || len(listed.MachineList) != 0 {
		t.Errorf("ListMachines after delete: %v %v", listed, err)
	}
	printTable("OpenStack", openstackClient, phases)
}
