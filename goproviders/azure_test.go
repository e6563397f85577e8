package goproviders

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/marketplaceordering/armmarketplaceordering"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gardener/machine-controller-manager-provider-azure/pkg/azure/access"
	azprovider "github.com/gardener/machine-controller-manager-provider-azure/pkg/azure/provider"
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

// TestAzureGoProviderLifecycle runs gardener/machine-controller-manager-provider-azure,
// unmodified and in-process, against tests/fake-arm: its driver (provider.NewDefaultDriver)
// over its own access factory, which only gets the transport above; token requests go
// through azidentity/MSAL (tenant discovery, client credentials for azcore's ARM scope),
// ARM calls through the SDK's pipeline and pollers. The class is the Rust driver's example
// (providers/azure/examples), which is gardener's providerSpec.
func TestAzureGoProviderLifecycle(t *testing.T) {
	dumpKlogOnFailure(t)
	f := startFake(t, "fake-arm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	spec := readJSON(t, "../providers/azure/examples/machine-class.json", nil)
	var parsed struct {
		Location      string            `json:"location"`
		ResourceGroup string            `json:"resourceGroup"`
		Tags          map[string]string `json:"tags"`
	}
	readJSON(t, "../providers/azure/examples/machine-class.json", &parsed)
	secret := &corev1.Secret{Data: secretData(t, "../providers/azure/examples/secret.json")}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--dev--conf"},
		Provider:     "Azure",
		ProviderSpec: runtime.RawExtension{Raw: spec},
	}
	name := fmt.Sprintf("go-az-%d", time.Now().UnixNano()%1_000_000)
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: class.Namespace, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now(),
	}}
	d := azprovider.NewDefaultDriver(fakeTransport{inner: access.NewDefaultAccessFactory(), transport: tlsFront(t, f)})
	ours := func(n string) bool { return strings.HasPrefix(strings.ToLower(n), name) }
	f.takeCalls(t)
	var phases []phase

	_, err := d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"status-absent", code(err), f.takeCalls(t)})
	if code(err) != "NotFound" {
		t.Fatalf("GetMachineStatus before create: want NotFound, got %v", err)
	}

	created, err := d.CreateMachine(ctx, &mcmdriver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"create", code(err), f.takeCalls(t)})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	wantID := "azure:///" + parsed.Location + "/" + name
	if created.ProviderID != wantID || created.NodeName != name {
		t.Fatalf("CreateMachine answered %+v (want providerID %s)", created, wantID)
	}

	// The fake's own view: the VM (Succeeded, the class's tags) and its NIC and disks.
	instances, dependents := f.inventory(t).live(ours)
	if len(instances) != 1 || !strings.EqualFold(instances[0].Name, name) {
		t.Fatalf("inventory instances for %s: %+v", name, instances)
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
	if kinds["networkInterface"] != 1 || kinds["disk"] < 1 {
		t.Errorf("dependents of %s: %+v (want its NIC and disks)", name, dependents)
	}

	machine.Spec.ProviderID = created.ProviderID
	st, err := d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"status", code(err), f.takeCalls(t)})
	if err != nil || st.ProviderID != created.ProviderID {
		t.Fatalf("GetMachineStatus after create: %+v %v", st, err)
	}

	listed, err := d.ListMachines(ctx, &mcmdriver.ListMachinesRequest{MachineClass: class, Secret: secret})
	phases = append(phases, phase{"list", code(err), f.takeCalls(t)})
	if err != nil {
		t.Errorf("ListMachines: %v", err)
	} else if listed.MachineList[created.ProviderID] != name {
		t.Errorf("ListMachines misses %s → %s: %v", created.ProviderID, name, listed.MachineList)
	}

	_, err = d.DeleteMachine(ctx, &mcmdriver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	phases = append(phases, phase{"delete", code(err), f.takeCalls(t)})
	if err != nil {
		t.Fatalf("DeleteMachine: %v", err)
	}
	f.expectNothingLeft(t, ours)

	_, err = d.GetMachineStatus(ctx, &mcmdriver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	if code(err) != "NotFound" {
		t.Errorf("GetMachineStatus after delete: want NotFound, got %v", err)
	}
	printTable("Azure", azureClient, phases)
}
