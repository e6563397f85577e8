package main

import (
	"context"
	"sync"
	"time"

	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/hotupdate"
)

// callsInFlight is the number of driver calls MCM's controllers have open.
var callsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "machine_controller_driver_calls_in_flight",
	Help: "Driver calls (CreateMachine, GetMachineStatus, ...) the machine-controller has sent and not yet got an answer to.",
})

// tracked counts MCM's calls into the driver, so that shutdown can wait for
// the ones in flight; once shutdown began it refuses new ones with
// Unavailable (MCM retries those; the next controller will).
type tracked struct {
	d mcmdriver.Driver

	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed once closed and no call is in flight
}

var (
	_ mcmdriver.Driver = (*tracked)(nil)
	_ hotupdate.Driver = (*tracked)(nil)
)

func newTracked(d mcmdriver.Driver) *tracked {
	return &tracked{d: d, idle: make(chan struct{})}
}

func (t *tracked) enter(operation string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return status.Error(codes.Unavailable, "machine-controller is shutting down: "+operation+" not sent to the machine driver")
	}
	t.n++
	callsInFlight.Set(float64(t.n))
	return nil
}

func (t *tracked) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	callsInFlight.Set(float64(t.n))
	if t.closed && t.n == 0 {
		close(t.idle)
	}
}

// refuse makes every later call fail with Unavailable and returns how many
// calls are in flight now.
func (t *tracked) refuse() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		if t.n == 0 {
			close(t.idle)
		}
	}
	return t.n
}

// wait waits until the calls in flight at refuse have returned, or until
// deadline; it tells how many are still open.
func (t *tracked) wait(deadline time.Time) int {
	select {
	case <-t.idle:
		return 0
	case <-time.After(time.Until(deadline)):
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.n
	}
}

func call[Req, Resp any](t *tracked, operation string, f func(context.Context, Req) (Resp, error), ctx context.Context, req Req) (Resp, error) {
	if err := t.enter(operation); err != nil {
		var zero Resp
		return zero, err
	}
	defer t.leave()
	return f(ctx, req)
}

func (t *tracked) CreateMachine(ctx context.Context, req *mcmdriver.CreateMachineRequest) (*mcmdriver.CreateMachineResponse, error) {
	return call(t, "CreateMachine", t.d.CreateMachine, ctx, req)
}

func (t *tracked) InitializeMachine(ctx context.Context, req *mcmdriver.InitializeMachineRequest) (*mcmdriver.InitializeMachineResponse, error) {
	return call(t, "InitializeMachine", t.d.InitializeMachine, ctx, req)
}

func (t *tracked) DeleteMachine(ctx context.Context, req *mcmdriver.DeleteMachineRequest) (*mcmdriver.DeleteMachineResponse, error) {
	return call(t, "DeleteMachine", t.d.DeleteMachine, ctx, req)
}

func (t *tracked) GetMachineStatus(ctx context.Context, req *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error) {
	return call(t, "GetMachineStatus", t.d.GetMachineStatus, ctx, req)
}

func (t *tracked) ListMachines(ctx context.Context, req *mcmdriver.ListMachinesRequest) (*mcmdriver.ListMachinesResponse, error) {
	return call(t, "ListMachines", t.d.ListMachines, ctx, req)
}

func (t *tracked) GetVolumeIDs(ctx context.Context, req *mcmdriver.GetVolumeIDsRequest) (*mcmdriver.GetVolumeIDsResponse, error) {
	return call(t, "GetVolumeIDs", t.d.GetVolumeIDs, ctx, req)
}

// UpdateMachine is the hot-update reconciler's call (not MCM's), tracked as
// MCM's are; Unimplemented when the wrapped driver has no UpdateMachine.
func (t *tracked) UpdateMachine(ctx context.Context, req *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error) {
	u, ok := t.d.(hotupdate.Driver)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the machine driver cannot send UpdateMachine")
	}
	return call(t, "UpdateMachine", u.UpdateMachine, ctx, req)
}

// Has tells whether the wrapped driver advertised capability c.
func (t *tracked) Has(c pb.Capability) bool {
	h, ok := t.d.(interface{ Has(pb.Capability) bool })
	return ok && h.Has(c)
}
