package goproviders

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

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

// newOpenStackEnv starts fake-openstack (instances quota 1000, as the conformance
// suite's fakeSetup raises it, for the 100 machines of the poll round) with gardener's
// OpenStack driver, unmodified and in-process, reaching it through the one seam it has:
// the secret's authURL (Keystone; the catalog then points Nova, Neutron and Cinder at the
// fake). The class is the sidecar's example (providers/openstack/examples), which is
// gardener's providerSpec: a user-managed port (networkID + subnetID), dual-stack pod
// CIDRs and a root volume of `rootDiskType` (so the Go provider creates the volume, then
// boots from it with `block_device_mapping_v2` `source_type: volume`).
func newOpenStackEnv(t *testing.T) *env {
	t.Helper()
	f := startFake(t, "fake-openstack")
	f.admin(t, http.MethodPost, "openstack/quota", map[string]any{"instances": 1000})
	spec := readJSON(t, "../providers/openstack/examples/machine-class.json", nil)
	var parsed struct {
		Spec struct {
			Tags map[string]string `json:"tags"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(spec, &parsed); err != nil {
		t.Fatal(err)
	}
	data := secretData(t, "../providers/openstack/examples/secret.json")
	data["authURL"] = []byte(f.url + "/identity/v3")
	return &env{
		title:    "OpenStack",
		cloud:    "openstack",
		goClient: openstackClient,
		f:        f,
		goDriver: newOpenStackDriver(t),
		class: &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--dev--conf"},
			Provider:     "OpenStack",
			ProviderSpec: runtime.RawExtension{Raw: spec},
		},
		secret:   &corev1.Secret{Data: data},
		goStatus: false,
		// v0.27.1's ListMachines lists servers only (pkg/driver/executor/executor.go
		// listServers); DeleteMachine deletes the port and volume named after the machine
		// (deletePort, deleteVolume) whether or not the server is still there.
		goListsLeftovers: false,
		// Servers, ports (the Go provider's and the sidecar's) and the Go provider's volume
		// are named after the machine; Nova-made volumes take the server's name in the
		// fake's inventory.
		owns:    func(machine, name string) bool { return name == machine },
		makes:   []string{"servers.create", "ports.create", "volumes.create"},
		removes: []string{"servers.delete", "ports.delete", "volumes.delete"},
		checkCreated: func(t *testing.T, e *env, machine, providerID string) {
			t.Helper()
			serverID := providerID[strings.LastIndex(providerID, "/")+1:]
			instances, dependents := e.f.inventory(t).live(func(n string) bool { return n == machine })
			if len(instances) != 1 || instances[0].ID != serverID {
				t.Fatalf("inventory instances for %s: %+v (want server %s)", machine, instances, serverID)
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
				t.Errorf("dependents of %s: %+v (want one port and one volume)", machine, dependents)
			}
		},
		// The server is deleted out of band (as `openstack server delete` by hand, or a
		// hypervisor loss): Nova deletes the ports it made and unbinds the pre-created ones,
		// so the machine's own port stays, free, named after it.
		leaveLeftover: func(t *testing.T, e *env, machine, providerID string) {
			t.Helper()
			serverID := providerID[strings.LastIndex(providerID, "/")+1:]
			e.f.admin(t, http.MethodPost, "instances/"+url.PathEscape(serverID)+"/terminate", map[string]any{})
		},
	}
}

// TestOpenStackLifecycleGoAndSidecar: the same lifecycle (status-absent, create,
// initialize, status, list, delete) by the Go provider and by the sidecar on one
// fake-openstack at its default timing (boot_ms/stop_ms 300: the Go provider's 10 s polls
// see BUILD once, then ACTIVE), each phase's calls counted, the inventory checked after
// create and for leaks after delete. Prints one table row per client.
func TestOpenStackLifecycleGoAndSidecar(t *testing.T) {
	e := newOpenStackEnv(t)
	var goPhases, sidecarPhases []phase
	t.Run("GoProvider", func(t *testing.T) { goPhases = lifecycle(t, e, e.goDriver, false) })
	t.Run("Sidecar", func(t *testing.T) { sidecarPhases = lifecycle(t, e, startSidecar(t, e.cloud, e.f), true) })
	if goPhases != nil && sidecarPhases != nil && !t.Failed() {
		printLifecycleRow(e.title, e.goClient, goPhases)
		printLifecycleRow(e.title, sidecarClient, sidecarPhases)
	}
}

// TestOpenStackMigrationGoToSidecar: see migration (fake timing 0).
func TestOpenStackMigrationGoToSidecar(t *testing.T) {
	e := newOpenStackEnv(t)
	e.f.setTiming(t, 0, 0)
	migration(t, e)
}

// TestOpenStackMCMTakesOverGoMachines: see takeover (fake timing 0).
func TestOpenStackMCMTakesOverGoMachines(t *testing.T) {
	e := newOpenStackEnv(t)
	e.f.setTiming(t, 0, 0)
	takeover(t, e)
}

// TestOpenStackRollbackSidecarToGo: see rollback (fake timing 0).
func TestOpenStackRollbackSidecarToGo(t *testing.T) {
	e := newOpenStackEnv(t)
	e.f.setTiming(t, 0, 0)
	rollback(t, e)
}

// TestOpenStackStatusPolls: see polls (fake timing 0).
func TestOpenStackStatusPolls(t *testing.T) {
	e := newOpenStackEnv(t)
	e.f.setTiming(t, 0, 0)
	polls(t, e)
}
