// Package mcmharness runs MCM's own machine controller (machinecontroller.NewController of
// github.com/gardener/machine-controller-manager v0.62.1) in-process in front of any
// driver.Driver, on fake clientsets and informers as MCM's own controller tests build them,
// with or without a fake target cluster. It is test support, shared by the adapter's
// end-to-end tests (adapter/driver) and the Go-provider migration tests (goproviders/).
//
// The fake clientsets write and delete as the API server does: every write gives the object
// a new resourceVersion (an informer delivers an update whose version did not change as a
// resync only, so MCM's handlers would miss updates at random), and an object with
// finalizers gets a deletion timestamp and a new generation and is removed by the update
// that drops its last finalizer.
package mcmharness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/drain"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	machinecontroller "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecontroller"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machineutils"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/options"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// NodeConditions is MCM's default --node-conditions.
const NodeConditions = "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"

// TargetVersion is the Kubernetes version the fake target cluster's discovery advertises.
const TargetVersion = "v1.33.4"

// Options configure one controller.
type Options struct {
	// Namespace is the control namespace MCM watches (its --namespace).
	Namespace string
	// Driver is what the controller calls (the adapter on a sidecar, a Go provider, ...).
	Driver mcmdriver.Driver
	// MachineObjects are the control cluster's MachineClasses, Machines, ... at start.
	MachineObjects []runtime.Object
	// CoreObjects are the control cluster's core objects (Secrets) at start.
	CoreObjects []runtime.Object
	// TargetCluster gives the controller a fake target cluster (Nodes, Pods, PVs, PVCs,
	// VolumeAttachments, PDBs); without it MCM gets nil interfaces, as without a
	// --target-kubeconfig.
	TargetCluster bool
	// TargetObjects are the target cluster's objects at start (Nodes, Pods).
	TargetObjects []runtime.Object
	// OnEviction, when set, is called as the target cluster evicts a pod, before the pod is deleted.
	OnEviction func()
	// OnNodeDeletion, when set, is called as the target cluster is asked to delete a Node,
	// before it does.
	OnNodeDeletion func()
	// Safety replaces DefaultSafety() when set.
	Safety *options.SafetyOptions
}

// DefaultSafety is MCM's safety options with a 2 s orphan collection period (so that
// tests see it run) and its defaults otherwise.
func DefaultSafety() options.SafetyOptions {
	return options.SafetyOptions{
		MachineCreationTimeout:                   metav1.Duration{Duration: 20 * time.Minute},
		MachineHealthTimeout:                     metav1.Duration{Duration: 10 * time.Minute},
		MachineDrainTimeout:                      metav1.Duration{Duration: 5 * time.Minute},
		MaxEvictRetries:                          drain.DefaultMaxEvictRetries,
		PvDetachTimeout:                          metav1.Duration{Duration: 2 * time.Minute},
		PvReattachTimeout:                        metav1.Duration{Duration: 90 * time.Second},
		MachineSafetyOrphanVMsPeriod:             metav1.Duration{Duration: 2 * time.Second},
		MachineSafetyAPIServerStatusCheckPeriod:  metav1.Duration{Duration: time.Minute},
		MachineSafetyAPIServerStatusCheckTimeout: metav1.Duration{Duration: 30 * time.Second},
	}
}

// watchListOff turns client-go's WatchListClient off once per process, as MCM v0.62.1
// runs (it builds with client-go v0.34, where it is off by default). A module that
// resolves client-go v0.35 or later (goproviders/, through the OpenStack Go provider's
// v0.36) has it on by default, and then the informers of MCM's generated machine clientset
// (code-generator v0.34, no IsWatchListSemanticsUnSupported) ask its fake for a watch-list
// stream that the fake never ends with the initial-events bookmark: the caches never sync.
var watchListOff sync.Once

type withoutWatchList struct{ clientfeatures.Gates }

func (g withoutWatchList) Enabled(key clientfeatures.Feature) bool {
	return key != clientfeatures.WatchListClient && g.Gates.Enabled(key)
}

// Harness is one MCM machine controller with its fake clusters.
type Harness struct {
	// Machines is the control cluster's machine clientset (MachineClasses, Machines).
	Machines *machinefake.Clientset
	// Core is the control cluster's core clientset (Secrets).
	Core *k8sfake.Clientset
	// Target is the target cluster's clientset; nil without a target cluster.
	Target *k8sfake.Clientset
	// Controller is MCM's machine controller.
	Controller machinecontroller.Controller

	t         testing.TB
	stop      chan struct{}
	factories []interface{ Start(<-chan struct{}) }
}

// New builds the controller (not started: see Run). It fails t when MCM refuses the setup.
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	watchListOff.Do(func() { clientfeatures.ReplaceFeatureGates(withoutWatchList{clientfeatures.FeatureGates()}) })
	h := &Harness{t: t, stop: make(chan struct{})}
	driver := &parkingDriver{Driver: o.Driver, parked: make(chan struct{})}
	t.Cleanup(func() { close(driver.parked) })
	h.Machines = machinefake.NewSimpleClientset(o.MachineObjects...)
	apiServerDeletion(&h.Machines.Fake, versioned(&h.Machines.Fake, h.Machines.Tracker()), "machines")
	h.Core = k8sfake.NewSimpleClientset(o.CoreObjects...)
	versioned(&h.Core.Fake, h.Core.Tracker())
	machineFactory := machineinformers.NewSharedInformerFactoryWithOptions(h.Machines, 100*time.Millisecond, machineinformers.WithNamespace(o.Namespace))
	coreFactory := kubeinformers.NewSharedInformerFactoryWithOptions(h.Core, 100*time.Millisecond, kubeinformers.WithNamespace(o.Namespace))
	h.factories = append(h.factories, machineFactory, coreFactory)

	// Without a target cluster MCM gets nil interfaces (a typed nil would count as a cluster).
	var (
		targetClient  kubernetes.Interface
		targetFactory kubeinformers.SharedInformerFactory
		targetVersion *semver.Version
	)
	if o.TargetCluster {
		h.Target = newTargetCluster(o)
		targetClient = h.Target
		// As MCM's app builds it: all namespaces, the version from discovery.
		targetFactory = kubeinformers.NewSharedInformerFactory(h.Target, 100*time.Millisecond)
		h.factories = append(h.factories, targetFactory)
		info, err := h.Target.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if targetVersion, err = semver.NewVersion(info.GitVersion); err != nil {
			t.Fatal(err)
		}
	}
	safety := DefaultSafety()
	if o.Safety != nil {
		safety = *o.Safety
	}
	c, err := machinecontroller.NewController(o.Namespace, h.Machines.MachineV1alpha1(), h.Core, targetClient, driver, targetFactory,
		coreFactory.Core().V1().Secrets(), machineFactory.Machine().V1alpha1().MachineClasses(),
		machineFactory.Machine().V1alpha1().Machines(), record.NewFakeRecorder(1000), safety, NodeConditions, "", targetVersion,
		machineutils.RetryPeriod(10*time.Minute))
	if err != nil {
		t.Fatal(fmt.Errorf("MCM's NewController: %w", err))
	}
	h.Controller = c
	return h
}

// Run starts the informers and the controller (one worker); both stop when the test ends.
func (h *Harness) Run() {
	for _, f := range h.factories {
		f.Start(h.stop)
	}
	go h.Controller.Run(1, h.stop)
	h.t.Cleanup(func() {
		close(h.stop)
		// Run registered the controller as a metrics collector once its caches
		// synced (Run itself does not return: its workers wait on queues it shuts
		// down only after they end); the next controller registers again.
		if collector, ok := h.Controller.(prometheus.Collector); ok {
			prometheus.Unregister(collector)
		}
	})
}

// parkingDriver is the controller's driver until the test ends; from then on every call
// waits for its context (forever for MCM's context.Background calls). MCM v0.62.1's Run
// does not return once stopped: it waits for its workers before it shuts down the queues
// they wait on, so the workers outlive the test and keep reconciling (the orphan
// collection every period). Parked, they send nothing to the driver (a sidecar already
// stopped, a fake already gone) and log no failures into the next test's output.
type parkingDriver struct {
	mcmdriver.Driver
	parked chan struct{}
}

// park returns nil while the test runs; once it has ended, it waits for ctx and returns its error.
func (p *parkingDriver) park(ctx context.Context) error {
	select {
	case <-p.parked:
		<-ctx.Done()
		return ctx.Err()
	default:
		return nil
	}
}

func (p *parkingDriver) CreateMachine(ctx context.Context, req *mcmdriver.CreateMachineRequest) (*mcmdriver.CreateMachineResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.CreateMachine(ctx, req)
}

func (p *parkingDriver) InitializeMachine(ctx context.Context, req *mcmdriver.InitializeMachineRequest) (*mcmdriver.InitializeMachineResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.InitializeMachine(ctx, req)
}

func (p *parkingDriver) DeleteMachine(ctx context.Context, req *mcmdriver.DeleteMachineRequest) (*mcmdriver.DeleteMachineResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.DeleteMachine(ctx, req)
}

func (p *parkingDriver) GetMachineStatus(ctx context.Context, req *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.GetMachineStatus(ctx, req)
}

func (p *parkingDriver) ListMachines(ctx context.Context, req *mcmdriver.ListMachinesRequest) (*mcmdriver.ListMachinesResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.ListMachines(ctx, req)
}

func (p *parkingDriver) GetVolumeIDs(ctx context.Context, req *mcmdriver.GetVolumeIDsRequest) (*mcmdriver.GetVolumeIDsResponse, error) {
	if err := p.park(ctx); err != nil {
		return nil, err
	}
	return p.Driver.GetVolumeIDs(ctx, req)
}

// newTargetCluster is a fake target cluster that advertises what MCM looks up
// by discovery (the eviction subresource, VolumeAttachments, its version),
// evicts pods as the API server does (no PDB here: the pod is deleted) and
// deletes objects with finalizers as the API server does.
func newTargetCluster(o Options) *k8sfake.Clientset {
	target := k8sfake.NewSimpleClientset(o.TargetObjects...)
	discovery := target.Discovery().(*fakediscovery.FakeDiscovery)
	discovery.FakedServerVersion = &version.Info{Major: "1", Minor: "33", GitVersion: TargetVersion}
	discovery.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "Node"},
			{Name: "pods", Namespaced: true, Kind: "Pod"},
			{Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction"},
			{Name: "persistentvolumes", Kind: "PersistentVolume"},
			{Name: "persistentvolumeclaims", Namespaced: true, Kind: "PersistentVolumeClaim"},
			{Name: "secrets", Namespaced: true, Kind: "Secret"},
		}},
		{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{
			{Name: "poddisruptionbudgets", Namespaced: true, Kind: "PodDisruptionBudget"},
		}},
		{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "volumeattachments", Kind: "VolumeAttachment"},
		}},
	}
	apiServerDeletion(&target.Fake, versioned(&target.Fake, target.Tracker()), "nodes")
	// The fake clientset records an eviction without deleting the pod; the API
	// server deletes it (MCM's drain then waits for it to be gone).
	target.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		create, ok := a.(k8stesting.CreateAction)
		if !ok || create.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		eviction, err := meta.Accessor(create.GetObject())
		if err != nil {
			return true, nil, err
		}
		if o.OnEviction != nil {
			o.OnEviction()
		}
		return true, nil, target.Tracker().Delete(a.GetResource(), create.GetNamespace(), eviction.GetName())
	})
	// Observes only; the deletion itself happens below it.
	target.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if o.OnNodeDeletion != nil {
			o.OnNodeDeletion()
		}
		return false, nil, nil
	})
	return target
}

// versioned makes the fake clientset give every object it writes a new
// resourceVersion, as the API server does, and returns its tracker doing so.
// (The fake's own tracker keeps the version empty; an informer delivers an
// update whose version did not change as a resync, only to the handlers whose
// resync is due, so MCM's handlers would miss updates at random, e.g. the
// deletion timestamp of a Machine.)
func versioned(fake *k8stesting.Fake, tracker k8stesting.ObjectTracker) k8stesting.ObjectTracker {
	v := versionedTracker{ObjectTracker: tracker, last: new(atomic.Int64)}
	fake.PrependReactor("*", "*", k8stesting.ObjectReaction(v))
	return v
}

type versionedTracker struct {
	k8stesting.ObjectTracker
	last *atomic.Int64
}

// stamp is a copy of obj with the next resourceVersion (the caller's object,
// possibly an informer's, stays as it is).
func (v versionedTracker) stamp(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(v.last.Add(1), 10))
	}
	return obj
}

func (v versionedTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	return v.ObjectTracker.Create(gvr, v.stamp(obj), ns, opts...)
}

func (v versionedTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	return v.ObjectTracker.Update(gvr, v.stamp(obj), ns, opts...)
}

func (v versionedTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return v.ObjectTracker.Patch(gvr, v.stamp(obj), ns, opts...)
}

// apiServerDeletion makes the fake clientset delete objects of resource as the
// API server does: an object with finalizers only gets a deletion timestamp
// (and a new generation) and is removed by the update that drops its last
// finalizer.
func apiServerDeletion(fake *k8stesting.Fake, tracker k8stesting.ObjectTracker, resource string) {
	fake.PrependReactor("delete", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		del := a.(k8stesting.DeleteAction)
		obj, err := tracker.Get(a.GetResource(), a.GetNamespace(), del.GetName())
		if err != nil {
			return true, nil, err
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		if len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			now := metav1.Now()
			m.SetDeletionTimestamp(&now)
			m.SetGeneration(m.GetGeneration() + 1)
			err = tracker.Update(a.GetResource(), obj, a.GetNamespace())
		}
		return true, obj, err
	})
	fake.PrependReactor("update", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		update := a.(k8stesting.UpdateAction)
		m, err := meta.Accessor(update.GetObject())
		if err != nil || update.GetSubresource() != "" || m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
			return false, nil, nil
		}
		return true, update.GetObject(), tracker.Delete(a.GetResource(), a.GetNamespace(), m.GetName())
	})
}
