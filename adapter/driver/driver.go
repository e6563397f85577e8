// Package driver implements MCM's driver.Driver by calling the machine driver
// sidecar over its Unix socket (the contract machinedriver.v1), as
// docs/mcm-adapter.md describes: requests mapped field by field, errors turned
// into MCM's own machinecodes statuses, "Uninitialized" rebuilt from the
// status answer, addresses kept, the caller's deadline and W3C trace context
// passed through.
package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// Driver is MCM's driver.Driver on the sidecar. One per process: it holds one
// gRPC connection, which reconnects by itself when the sidecar restarts.
type Driver struct {
	conn     *grpc.ClientConn
	machines pb.MachineDriverServiceClient
	// Provider is the sidecar's cloud name (the CLOUD of machine-driver-CLOUD), the metrics' provider label.
	Provider string
	// Capabilities are the optional RPCs the sidecar implements, read once at start.
	Capabilities *pb.GetPluginCapabilitiesResponse
}

var _ mcmdriver.Driver = (*Driver)(nil)

// Dial connects to the sidecar at socketPath (an absolute path), waiting up to
// wait for the socket to appear and the sidecar to answer, then reads its
// identity and capabilities once.
func Dial(ctx context.Context, socketPath string, wait time.Duration) (*Driver, error) {
	if !strings.HasPrefix(socketPath, "/") {
		return nil, fmt.Errorf("sidecar socket %q: must be an absolute path", socketPath)
	}
	conn, err := grpc.NewClient("unix://"+socketPath,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(propagateTraceContext))
	if err != nil {
		return nil, fmt.Errorf("sidecar socket %q: %w", socketPath, err)
	}
	identity := pb.NewIdentityServiceClient(conn)
	deadline := time.Now().Add(wait)
	var info *pb.GetPluginInfoResponse
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err = identity.GetPluginInfo(callCtx, &pb.GetPluginInfoRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("sidecar at %q did not answer within %s: %w", socketPath, wait, err)
		}
		klog.V(2).Infof("waiting for the machine driver sidecar at %s: %v", socketPath, err)
		time.Sleep(500 * time.Millisecond)
	}
	caps, err := identity.GetPluginCapabilities(ctx, &pb.GetPluginCapabilitiesRequest{})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sidecar capabilities: %w", err)
	}
	klog.Infof("machine driver sidecar %s %s (provider %s) at %s", info.GetName(), info.GetVendorVersion(), info.GetProvider(), socketPath)
	return &Driver{conn: conn, machines: pb.NewMachineDriverServiceClient(conn), Provider: info.GetProvider(), Capabilities: caps}, nil
}

// Has tells whether the sidecar advertised capability c at start.
func (d *Driver) Has(c pb.Capability) bool {
	for _, got := range d.Capabilities.GetCapabilities() {
		if got == c {
			return true
		}
	}
	return false
}

// Close closes the connection.
func (d *Driver) Close() error {
	return d.conn.Close()
}

// record observes MCM's driver metrics as the Go providers do: the duration of
// successful calls, failures by MCM's numeric code.
func (d *Driver) record(operation string, started time.Time, err *error) {
	if *err == nil {
		metrics.DriverAPIRequestDuration.WithLabelValues(d.Provider, operation).Observe(time.Since(started).Seconds())
		return
	}
	code := codes.Internal
	if s, ok := status.FromError(*err); ok {
		code = s.Code()
	}
	metrics.DriverFailedAPIRequests.WithLabelValues(d.Provider, operation, fmt.Sprint(int(code))).Inc()
}

// CreateMachine creates the VM of a machine (idempotent on its uid).
func (d *Driver) CreateMachine(ctx context.Context, req *mcmdriver.CreateMachineRequest) (_ *mcmdriver.CreateMachineResponse, err error) {
	defer d.record("create_machine", time.Now(), &err)
	resp, err := d.machines.CreateMachine(ctx, &pb.CreateMachineRequest{
		Machine:      toMachine(req.Machine, req.MachineClass),
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
	})
	if err != nil {
		return nil, toMCM(err)
	}
	return &mcmdriver.CreateMachineResponse{
		ProviderID:     resp.GetProviderId(),
		NodeName:       resp.GetNodeName(),
		LastKnownState: resp.GetLastKnownState(),
		Addresses:      toNodeAddresses(resp.GetAddresses()),
	}, nil
}

// InitializeMachine applies the post-creation steps the status reported.
func (d *Driver) InitializeMachine(ctx context.Context, req *mcmdriver.InitializeMachineRequest) (_ *mcmdriver.InitializeMachineResponse, err error) {
	defer d.record("initialize_machine", time.Now(), &err)
	resp, err := d.machines.InitializeMachine(ctx, &pb.InitializeMachineRequest{
		Machine:      toMachine(req.Machine, req.MachineClass),
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
	})
	if err != nil {
		return nil, toMCM(err)
	}
	return &mcmdriver.InitializeMachineResponse{ProviderID: resp.GetProviderId(), NodeName: resp.GetNodeName()}, nil
}

// GetMachineStatus reports the VM; an answer with pending initialization
// steps is returned together with MCM's Uninitialized error, as MCM expects.
func (d *Driver) GetMachineStatus(ctx context.Context, req *mcmdriver.GetMachineStatusRequest) (_ *mcmdriver.GetMachineStatusResponse, err error) {
	defer d.record("get_machine_status", time.Now(), &err)
	resp, err := d.machines.GetMachineStatus(ctx, &pb.GetMachineStatusRequest{
		Machine:      toMachine(req.Machine, req.MachineClass),
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
	})
	if err != nil {
		return nil, toMCM(err)
	}
	out := &mcmdriver.GetMachineStatusResponse{
		ProviderID: resp.GetProviderId(),
		NodeName:   resp.GetNodeName(),
		Addresses:  toNodeAddresses(resp.GetAddresses()),
	}
	if init := resp.GetInitialization(); init != nil && !init.GetInitialized() {
		return out, uninitialized(init.GetPendingSteps())
	}
	return out, nil
}

// DeleteMachine deletes the VM; OK when it is already gone.
func (d *Driver) DeleteMachine(ctx context.Context, req *mcmdriver.DeleteMachineRequest) (_ *mcmdriver.DeleteMachineResponse, err error) {
	defer d.record("delete_machine", time.Now(), &err)
	resp, err := d.machines.DeleteMachine(ctx, &pb.DeleteMachineRequest{
		Machine:      toMachine(req.Machine, req.MachineClass),
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
	})
	if err != nil {
		return nil, toMCM(err)
	}
	return &mcmdriver.DeleteMachineResponse{LastKnownState: resp.GetLastKnownState()}, nil
}

// ListMachines lists the class's VMs: providerID → machine name.
func (d *Driver) ListMachines(ctx context.Context, req *mcmdriver.ListMachinesRequest) (_ *mcmdriver.ListMachinesResponse, err error) {
	defer d.record("list_machine", time.Now(), &err)
	resp, err := d.machines.ListMachines(ctx, &pb.ListMachinesRequest{
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
	})
	if err != nil {
		return nil, toMCM(err)
	}
	return &mcmdriver.ListMachinesResponse{MachineList: resp.GetMachines()}, nil
}

// GetVolumeIDs returns the cloud volume ids of the PersistentVolume specs.
func (d *Driver) GetVolumeIDs(ctx context.Context, req *mcmdriver.GetVolumeIDsRequest) (_ *mcmdriver.GetVolumeIDsResponse, err error) {
	defer d.record("get_volume_ids", time.Now(), &err)
	specs, err := toPVSpecs(req.PVSpecs)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, mcmMessage(err.Error()))
	}
	resp, err := d.machines.GetVolumeIDs(ctx, &pb.GetVolumeIDsRequest{PvSpecsJson: specs})
	if err != nil {
		return nil, toMCM(err)
	}
	return &mcmdriver.GetVolumeIDsResponse{VolumeIDs: resp.GetVolumeIds()}, nil
}
