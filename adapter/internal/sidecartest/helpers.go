package sidecartest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/client-go/tools/cache"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// Identity is a sidecar's IdentityService: plugin "fake" (version 0,
// provider fake) with Capabilities; a fake sidecar embeds it.
type Identity struct {
	pb.UnimplementedIdentityServiceServer
	// Capabilities is what GetPluginCapabilities advertises.
	Capabilities []pb.Capability
}

// GetPluginInfo answers plugin "fake", version 0, provider fake.
func (Identity) GetPluginInfo(context.Context, *pb.GetPluginInfoRequest) (*pb.GetPluginInfoResponse, error) {
	return &pb.GetPluginInfoResponse{Name: "fake", VendorVersion: "0", Provider: "fake"}, nil
}

// GetPluginCapabilities answers i.Capabilities.
func (i Identity) GetPluginCapabilities(context.Context, *pb.GetPluginCapabilitiesRequest) (*pb.GetPluginCapabilitiesResponse, error) {
	return &pb.GetPluginCapabilitiesResponse{Capabilities: i.Capabilities}, nil
}

// InFlight counts the calls a fake sidecar is answering and remembers the
// most that were open at once.
type InFlight struct {
	open, most atomic.Int32
}

// Enter counts a call open; the answer closes it (`defer f.Enter()()`).
func (f *InFlight) Enter() (leave func()) {
	n := f.open.Add(1)
	for {
		top := f.most.Load()
		if n <= top || f.most.CompareAndSwap(top, n) {
			break
		}
	}
	return func() { f.open.Add(-1) }
}

// Max is the most calls that were open at once.
func (f *InFlight) Max() int32 { return f.most.Load() }

// Dial connects the adapter's real gRPC client to the sidecar on socket
// (waiting up to 10 s); the returned context ends, and the client closes,
// when t ends.
func Dial(t testing.TB, socket string) (context.Context, *driver.Driver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := driver.Dial(ctx, socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return ctx, d
}

// AwaitRunning runs run in a goroutine (a controller's Run, its informers
// started by the caller) and waits for synced and then, up to 10 s each, for
// every watched (from WatchStarted): a test writes only once the informers
// watch.
func AwaitRunning(t testing.TB, ctx context.Context, run func(context.Context), synced []cache.InformerSynced, watched ...<-chan struct{}) {
	t.Helper()
	go run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("caches never synced")
	}
	for _, c := range watched {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("an informer never watched")
		}
	}
}

// Cache puts obj into informer's cache as a watch event would (for a test
// that fills the caches itself, no informer running).
func Cache(t testing.TB, informer cache.SharedIndexInformer, obj any) {
	t.Helper()
	if err := informer.GetIndexer().Update(obj); err != nil {
		t.Fatal(err)
	}
}

// StatusError is the sidecar's answer for an error: the gRPC status of code
// c and message msg with an ErrorInfo of reason (domain machinedriver), as
// the sidecar's server sends it.
func StatusError(c grpccodes.Code, msg, reason string) error {
	st, err := withReason(c, msg, reason)
	if err != nil {
		return err
	}
	return st.Err()
}

// DriverError is an error as the adapter's driver returns it for the
// sidecar's answer (code, message, ErrorInfo reason): MCM's status, the
// sidecar's gRPC status (StatusError) as its cause.
func DriverError(t testing.TB, c grpccodes.Code, msg, reason string) error {
	t.Helper()
	st, err := withReason(c, msg, reason)
	if err != nil {
		t.Fatal(err)
	}
	return status.WrapError(codes.Code(c), msg, st.Err())
}

func withReason(c grpccodes.Code, msg, reason string) (*grpcstatus.Status, error) {
	return grpcstatus.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: driver.ErrorDomain})
}

// Counter is the value of the Prometheus counter c.
func Counter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
