package goproviders

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/marketplaceordering/armmarketplaceordering"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gardener/machine-controller-manager-provider-azure/pkg/azure/access"
	azprovider "github.com/gardener/machine-controller-manager-provider-azure/pkg/azure/provider"
	azhelpers "github.com/gardener/machine-controller-manager-provider-azure/pkg/azure/provider/helpers"
)

const azureClient = "Go provider v0.21.0"

// tlsFront puts a loopback TLS reverse proxy in front of the fake (azcore refuses to send
// a bearer token over plain HTTP) and returns a transport that sends every request, for
// whatever host (login.microsoftonline.com, management.azure.com), to it. The Host header
// is kept and X-Forwarded-Proto is https, so the fake's absolute URLs (the tenant's
// discovery document, Azure-AsyncOperation, nextLink) name the real hosts over https and
// come back through the same transport.
func tlsFront(t *testing.T, f *fake) policy.Transporter {
	t.Helper()
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		r.SetXForwarded()
	}})
	t.Cleanup(proxy.Close)
	front, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	return toFront{client: proxy.Client(), host: front.Host}
}

type toFront struct {
	client *http.Client // trusts the proxy's certificate
	host   string
}

func (f toFront) Do(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Host = req.URL.Host
	out.URL.Scheme = "https"
	out.URL.Host = f.host
	return f.client.Do(out)
}

// fakeTransport is the provider's own access factory (access.NewDefaultAccessFactory:
// azidentity's ClientSecretCredential and the ARM SDK clients, cloud AzurePublic) with one
// change: every client it makes, and the credential, get `transport` in the ClientOptions
// the provider itself passes them (ConnectConfig.ClientOptions).
type fakeTransport struct {
	inner     access.Factory
	transport policy.Transporter
}

func (f fakeTransport) with(cc access.ConnectConfig) access.ConnectConfig {
	cc.ClientOptions.Transport = f.transport
	return cc
}

func (f fakeTransport) GetResourceGroupsAccess(cc access.ConnectConfig) (*armresources.ResourceGroupsClient, error) {
	return f.inner.GetResourceGroupsAccess(f.with(cc))
}

func (f fakeTransport) GetVirtualMachinesAccess(cc access.ConnectConfig) (*armcompute.VirtualMachinesClient, error) {
	return f.inner.GetVirtualMachinesAccess(f.with(cc))
}

func (f fakeTransport) GetNetworkInterfacesAccess(cc access.ConnectConfig) (*armnetwork.InterfacesClient, error) {
	return f.inner.GetNetworkInterfacesAccess(f.with(cc))
}

func (f fakeTransport) GetSubnetAccess(cc access.ConnectConfig) (*armnetwork.SubnetsClient, error) {
	return f.inner.GetSubnetAccess(f.with(cc))
}

func (f fakeTransport) GetDisksAccess(cc access.ConnectConfig) (*armcompute.DisksClient, error) {
	return f.inner.GetDisksAccess(f.with(cc))
}

func (f fakeTransport) GetResourceGraphAccess(cc access.ConnectConfig) (*armresourcegraph.Client, error) {
	return f.inner.GetResourceGraphAccess(f.with(cc))
}

func (f fakeTransport) GetVirtualMachineImagesAccess(cc access.ConnectConfig) (*armcompute.VirtualMachineImagesClient, error) {
	return f.inner.GetVirtualMachineImagesAccess(f.with(cc))
}

func (f fakeTransport) GetMarketPlaceAgreementsAccess(cc access.ConnectConfig) (*armmarketplaceordering.MarketplaceAgreementsClient, error) {
	return f.inner.GetMarketPlaceAgreementsAccess(f.with(cc))
}

// newAzureEnv starts fake-arm with gardener's Azure driver, unmodified and in-process:
// its driver (provider.NewDefaultDriver) over its own access factory, which only gets the
// transport above; token requests go through azidentity/MSAL (tenant discovery, client
// credentials for azcore's ARM scope), ARM calls through the SDK's pipeline and pollers.
// The class is the sidecar's example (providers/azure/examples), which is gardener's
// providerSpec (a zone, an OS disk and one data disk); the sidecar reaches the same fake
// over plain HTTP (`--cloud-endpoint`).
func newAzureEnv(t *testing.T) *env {
	t.Helper()
	f := startFake(t, "fake-arm")
	// A deleted VM's NIC stays reserved 3 s (Azure: 180 s), as the conformance suite's
	// fakeSetup sets it.
	f.admin(t, http.MethodPost, "azure/nic-reservation", map[string]any{"ms": 3000})
	spec := readJSON(t, "../providers/azure/examples/machine-class.json", nil)
	var parsed struct {
		ResourceGroup string            `json:"resourceGroup"`
		Tags          map[string]string `json:"tags"`
	}
	readJSON(t, "../providers/azure/examples/machine-class.json", &parsed)
	factory := fakeTransport{inner: access.NewDefaultAccessFactory(), transport: tlsFront(t, f)}
	// A VM, its NIC `<vm>-nic` and disks `<vm>-os-disk`, `<vm>-containerd-0-data-disk`
	// (the Go provider's names, pkg/azure/utils/names.go, which the sidecar uses too).
	owns := func(machine, name string) bool {
		n, m := strings.ToLower(name), strings.ToLower(machine)
		return n == m || strings.HasPrefix(n, m+"-") || strings.HasPrefix(n, m+"_")
	}
	return &env{
		title:    "Azure",
		cloud:    "azure",
		goClient: azureClient,
		f:        f,
		goDriver: azprovider.NewDefaultDriver(factory),
		class: &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--dev--conf"},
			Provider:     "Azure",
			ProviderSpec: runtime.RawExtension{Raw: spec},
		},
		secret:   &corev1.Secret{Data: secretData(t, "../providers/azure/examples/secret.json")},
		goStatus: true,
		// pkg/azure/provider/helpers/resourcegraphprocessor.go: VMs, NICs and disks of the
		// resource group whose tag keys include the class's kubernetes.io-cluster- and
		// kubernetes.io-role- keys; a NIC or disk maps back to its VM's name by suffix.
		goListsLeftovers: true,
		owns:             owns,
		makes:            []string{"virtualMachines.createOrUpdate", "networkInterfaces.createOrUpdate", "disks.createOrUpdate"},
		removes:          []string{"virtualMachines.delete", "networkInterfaces.delete", "disks.delete"},
		checkCreated: func(t *testing.T, e *env, machine, providerID string) {
			t.Helper()
			instances, dependents := e.f.inventory(t).live(func(n string) bool { return owns(machine, n) })
			if len(instances) != 1 || !strings.EqualFold(instances[0].Name, machine) {
				t.Fatalf("inventory instances for %s: %+v", machine, instances)
			}
			for key := range parsed.Tags {
				if _, ok := instances[0].Tags[key]; !ok {
					t.Errorf("VM lacks the class tag %q: %v", key, instances[0].Tags)
				}
			}
			kinds := map[string]int{}
			for _, dep := range dependents {
				kinds[dep.Kind]++
			}
			if kinds["networkInterface"] != 1 || kinds["disk"] != 2 {
				t.Errorf("dependents of %s: %+v (want its NIC, OS disk and data disk)", machine, dependents)
			}
		},
		// As an operator would with `az vm update --set ...deleteOption=Detach` and
		// `az vm delete`: the VM's NIC and OS disk are set to stay (a VM PATCH, built as the Go
		// provider builds its own delete-option PATCH in
		// pkg/azure/provider/helpers/driver.go computeDeleteOptionUpdatesForNICsAndDisksIfRequired),
		// then the VM is deleted; its NIC and OS disk are left. The ARM client is the Go
		// provider's own (its access factory and connect config).
		leaveLeftover: func(t *testing.T, e *env, machine, providerID string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, cc, err := azhelpers.ExtractProviderSpecAndConnectConfig(e.class, e.secret)
			if err != nil {
				t.Fatal(err)
			}
			vms, err := factory.GetVirtualMachinesAccess(cc)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := vms.Get(ctx, parsed.ResourceGroup, machine, nil)
			if err != nil {
				t.Fatalf("GET VM %s: %v", machine, err)
			}
			update := armcompute.VirtualMachineUpdate{Properties: &armcompute.VirtualMachineProperties{
				StorageProfile: &armcompute.StorageProfile{},
			}}
			if p := vm.Properties; p != nil && p.NetworkProfile != nil {
				nics := []*armcompute.NetworkInterfaceReference{}
				for _, nic := range p.NetworkProfile.NetworkInterfaces {
					nics = append(nics, &armcompute.NetworkInterfaceReference{ID: nic.ID,
						Properties: &armcompute.NetworkInterfaceReferenceProperties{DeleteOption: to.Ptr(armcompute.DeleteOptionsDetach)}})
				}
				update.Properties.NetworkProfile = &armcompute.NetworkProfile{NetworkInterfaces: nics}
			}
			if p := vm.Properties; p != nil && p.StorageProfile != nil && p.StorageProfile.OSDisk != nil {
				update.Properties.StorageProfile.OSDisk = &armcompute.OSDisk{Name: p.StorageProfile.OSDisk.Name,
					DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDetach)}
			}
			if update.Properties.NetworkProfile == nil || len(update.Properties.NetworkProfile.NetworkInterfaces) == 0 {
				t.Fatalf("VM %s shows no NIC in networkProfile.networkInterfaces: %+v", machine, vm.Properties)
			}
			patch, err := vms.BeginUpdate(ctx, parsed.ResourceGroup, machine, update, nil)
			if err == nil {
				_, err = patch.PollUntilDone(ctx, nil)
			}
			if err != nil {
				t.Fatalf("PATCH VM %s (deleteOption Detach): %v", machine, err)
			}
			del, err := vms.BeginDelete(ctx, parsed.ResourceGroup, machine, nil)
			if err == nil {
				_, err = del.PollUntilDone(ctx, nil)
			}
			if err != nil {
				t.Fatalf("DELETE VM %s: %v", machine, err)
			}
		},
	}
}

// TestAzureLifecycleGoAndSidecar: the same lifecycle (status-absent, create, initialize,
// status, list, delete) by the Go provider and by the sidecar on one fake-arm at its
// default timing, each phase's calls counted, the inventory checked after create and for
// leaks after delete. Prints one table row per client.
func TestAzureLifecycleGoAndSidecar(t *testing.T) {
	e := newAzureEnv(t)
	var goPhases, sidecarPhases []phase
	t.Run("GoProvider", func(t *testing.T) { goPhases = lifecycle(t, e, e.goDriver, false) })
	t.Run("Sidecar", func(t *testing.T) { sidecarPhases = lifecycle(t, e, startSidecar(t, e.cloud, e.f), true) })
	if goPhases != nil && sidecarPhases != nil && !t.Failed() {
		printLifecycleRow(e.title, e.goClient, goPhases)
		printLifecycleRow(e.title, sidecarClient, sidecarPhases)
	}
}

// TestAzureMigrationGoToSidecar: see migration.
func TestAzureMigrationGoToSidecar(t *testing.T) { migration(t, newAzureEnv(t)) }

// TestAzureMCMTakesOverGoMachines: see takeover.
func TestAzureMCMTakesOverGoMachines(t *testing.T) { takeover(t, newAzureEnv(t)) }

// TestAzureRollbackSidecarToGo: see rollback.
func TestAzureRollbackSidecarToGo(t *testing.T) { rollback(t, newAzureEnv(t)) }

// TestAzureStatusPolls: see polls.
func TestAzureStatusPolls(t *testing.T) { polls(t, newAzureEnv(t)) }
