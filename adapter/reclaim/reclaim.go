// Package reclaim replaces a Machine whose Spot VM the cloud reclaimed as
// soon as its Node goes down, instead of after MCM's health timeout.
//
// MCM v0.62.1 never asks the driver about a Running machine: its machine
// controller calls GetMachineStatus only in the creation flow (no providerID,
// phase "" or CrashLoopBackOff: reconcileClusterMachine,
// pkg/util/provider/machinecontroller/machine.go:256) and before a drain. When
// the cloud reclaims a Spot VM, MCM only sees the Node go NotReady (or away),
// moves the machine to Unknown and, after --machine-health-timeout (10 min in
// Gardener), to Failed (reconcileMachineHealth, machine_util.go:1008-1027 and
// 1092-1105).
//
// The Watcher closes that gap. When a Machine of the namespace with a
// providerID and a node is Running or Unknown and its Node is not Ready
// (NotReady or Unknown), is being deleted or is gone, it calls the driver's
// GetMachineStatus for it: at once, then, while the Node stays down, after
// Period, 2*Period, 4*Period, ... up to 8*Period between calls (never more
// than one call per machine per Period), with at most Workers calls at a
// time. Only the sidecar's answer for a reclaimed Spot VM (NotFound with the
// ErrorInfo reason SPOT_RECLAIMED, driver.SpotReclaimed) changes anything: the
// Machine's status.currentStatus.phase becomes Failed and its
// status.lastOperation records the driver's message with state Failed and type
// HealthCheck, as MCM records a failed health check (updateMachineToFailedState,
// machine_util.go:2096-2111; the preservation expiry kept), a Warning event
// SpotReclaimed is recorded on the Machine and Reclaims is counted. Any other
// answer leaves the machine to MCM's health timeout.
//
// MCM's MachineSet controller then replaces the machine at once: a Failed
// machine that is not preserved is stale and terminated
// (pkg/controller/machineset.go:446 and 470, shouldFailedMachineBeTerminated
// at :906; it counts the removal as a health-check replacement at :717), and a
// terminating machine no longer counts towards the replicas (:347), so a new
// one is created (:365). Unlike the health timeout, the watcher does not wait
// for MCM's one-replacement-at-a-time limit per MachineDeployment
// (canMarkMachineFailed, machine_util.go:2126, maxReplacements = 1 at :72):
// that limit guards against Nodes that only look dead (a network partition),
// while here the cloud itself says the VM is gone. A machine with
// disableHealthTimeout is left alone, as MCM leaves it
// (machine_util.go:1080 and 1094): its owner may restart a stopped or
// deallocated Spot VM.
package reclaim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/typed/machine/v1alpha1"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/gardener/machine-controller-manager/pkg/client/listers/machine/v1alpha1"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/machine-driver/adapter/driver"
	"github.com/machine-driver/adapter/ownctl"
)

// Reclaims counts the machines the watcher set to Failed.
var Reclaims = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "machine_controller_spot_reclaims_total",
	Help: "Machines set to Failed because the machine driver answered that the cloud reclaimed their Spot VM (MCM's MachineSet controller then replaces them).",
})

// EventReason is the reason of the Warning event recorded on a Machine set to Failed.
const EventReason = "SpotReclaimed"

// Defaults of Config.
const (
	DefaultPeriod  = 30 * time.Second
	DefaultWorkers = 2
)

const (
	// maxBackoff bounds the wait between two calls for one machine whose Node
	// stays down: maxBackoff*Period.
	maxBackoff = 8
	// callTimeout bounds one GetMachineStatus call.
	callTimeout = time.Minute
	// byNode is the machine informer's index on the `node` label.
	byNode = "spot-reclaim-node"
)

// StatusGetter is the part of MCM's driver.Driver the watcher calls (the
// adapter's driver.Driver, or the machine-controller's call tracker around it).
type StatusGetter interface {
	GetMachineStatus(context.Context, *mcmdriver.GetMachineStatusRequest) (*mcmdriver.GetMachineStatusResponse, error)
}

// Config is what a Watcher reads, calls and writes.
type Config struct {
	// Namespace is the control namespace (MCM's --namespace).
	Namespace string
	// Machines reads MachineClasses and Machines and writes Machine status in Namespace.
	Machines machineclient.MachineV1alpha1Interface
	// Secrets reads the classes' secrets (control cluster).
	Secrets corev1client.SecretsGetter
	// MachineInformer watches the Machines of Namespace; not started yet (New adds an index).
	MachineInformer machineinformers.MachineInformer
	// NodeInformer watches the target cluster's Nodes; the watcher's own and not
	// started yet (New makes it keep only what the watcher reads).
	NodeInformer coreinformers.NodeInformer
	// Driver answers GetMachineStatus.
	Driver StatusGetter
	// Recorder records the event on a reclaimed Machine.
	Recorder record.EventRecorder
	// Period is the shortest time between two calls for one machine (default DefaultPeriod).
	Period time.Duration
	// Workers is how many calls may be open at a time (default DefaultWorkers).
	Workers int
}

// Watcher is the reclaim watcher (see the package comment).
type Watcher struct {
	cfg      Config
	machines machinelisters.MachineLister
	byNode   cache.Indexer
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedDelayingInterface[string]
	now      func() time.Time

	mu   sync.Mutex
	pace map[string]*pace // by machine name: machines whose Node is down
}

// pace is when a machine may be asked about next, and how long after that.
type pace struct {
	next     time.Time
	interval time.Duration
}

// New builds a watcher on cfg's informers (which must not have started).
func New(cfg Config) (*Watcher, error) {
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Period < 0 {
		return nil, fmt.Errorf("spot reclaim check period %s: must be positive", cfg.Period)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	machineInformer := cfg.MachineInformer.Informer()
	nodeInformer := cfg.NodeInformer.Informer()
	if err := nodeInformer.SetTransform(slimNode); err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	w := &Watcher{
		cfg:      cfg,
		machines: cfg.MachineInformer.Lister(),
		byNode:   machineInformer.GetIndexer(),
		nodes:    cfg.NodeInformer.Lister(),
		synced:   []cache.InformerSynced{machineInformer.HasSynced, nodeInformer.HasSynced},
		queue:    workqueue.NewTypedDelayingQueue[string](),
		now:      time.Now,
		pace:     map[string]*pace{},
	}
	if err := ownctl.WatchMachines(machineInformer, byNode, nodeOfMachine, w.machineChanged, w.machineDeleted); err != nil {
		return nil, err
	}
	if _, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && nodeDown(n) {
				w.nodeChanged(n.Name)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*corev1.Node)
			n, ok := obj.(*corev1.Node)
			if ok && (nodeDown(n) || o == nil || nodeDown(o)) {
				w.nodeChanged(n.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				w.nodeChanged(key)
			}
		},
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// Run checks machines until ctx ends, once the informers (started by the
// caller) have synced.
func (w *Watcher) Run(ctx context.Context) {
	ownctl.Run(ctx, w.queue, w.synced, w.cfg.Workers, func() {
		klog.Infof("spot reclaim watcher: checking machines whose node is down (at most once per %s per machine, %d at a time)", w.cfg.Period, w.cfg.Workers)
	}, w.check)
}

func (w *Watcher) machineChanged(obj any) {
	if m, ok := obj.(*v1alpha1.Machine); ok && watchedPhase(m.Status.CurrentStatus.Phase) {
		w.queue.Add(m.Name)
	}
}

func (w *Watcher) machineDeleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	if _, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		w.forget(name)
	}
}

// nodeChanged queues the machines whose `node` label names the node.
func (w *Watcher) nodeChanged(node string) {
	objs, err := w.byNode.ByIndex(byNode, node)
	if err != nil {
		return
	}
	for _, obj := range objs {
		w.machineChanged(obj)
	}
}

// check looks at one machine and calls the driver when its node is down and
// its pace allows; it returns when to look again (0: only on the next event).
func (w *Watcher) check(ctx context.Context, name string) time.Duration {
	m, err := w.machines.Machines(w.cfg.Namespace).Get(name)
	if err != nil || !eligible(m) {
		w.forget(name)
		return 0
	}
	node, err := w.nodes.Get(m.Labels[v1alpha1.NodeLabelKey])
	switch {
	case err == nil && !nodeDown(node):
		w.forget(name)
		return 0
	case err != nil && !apierrors.IsNotFound(err):
		return w.cfg.Period
	}
	now := w.now()
	w.mu.Lock()
	p := w.pace[name]
	if p == nil {
		p = &pace{interval: w.cfg.Period}
		w.pace[name] = p
	}
	if now.Before(p.next) {
		w.mu.Unlock()
		return p.next.Sub(now)
	}
	interval := p.interval
	p.next = now.Add(interval)
	p.interval = min(2*interval, maxBackoff*w.cfg.Period)
	w.mu.Unlock()

	req, err := w.request(ctx, m)
	if err != nil {
		klog.Warningf("spot reclaim watcher: machine %q: %v", name, err)
		return interval
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err = w.cfg.Driver.GetMachineStatus(callCtx, req)
	cancel()
	msg, reclaimed := driver.SpotReclaimed(err)
	if !reclaimed {
		klog.V(3).Infof("spot reclaim watcher: machine %q (node %q down): status %v; left to the health timeout", name, m.Labels[v1alpha1.NodeLabelKey], err)
		return interval
	}
	marked, err := w.markFailed(ctx, m, msg)
	if err != nil {
		klog.Errorf("spot reclaim watcher: machine %q: the cloud reclaimed its Spot VM, but its status was not updated: %v", name, err)
		return interval
	}
	if marked {
		w.forget(name)
	}
	return 0
}

// request is the GetMachineStatus request MCM would send for m: its class and
// the merge of the class's secretRef and credentialsSecretRef (ownctl.ClassSecret).
func (w *Watcher) request(ctx context.Context, m *v1alpha1.Machine) (*mcmdriver.GetMachineStatusRequest, error) {
	class, err := w.cfg.Machines.MachineClasses(w.cfg.Namespace).Get(ctx, m.Spec.Class.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("machine class %q: %w", m.Spec.Class.Name, err)
	}
	secret, err := ownctl.ClassSecret(ctx, w.cfg.Secrets, class)
	if err != nil {
		return nil, err
	}
	return &mcmdriver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret}, nil
}

// errChanged: the machine is no longer the one the driver was asked about, or no longer eligible.
var errChanged = errors.New("machine changed")

// markFailed sets m to Failed (read again, retried on conflicts), records the
// event and counts it; false when the machine changed meanwhile.
func (w *Watcher) markFailed(ctx context.Context, m *v1alpha1.Machine, msg string) (bool, error) {
	description := fmt.Sprintf("Machine %s: the cloud reclaimed its Spot VM (machine driver: %s). Updating machine phase to Failed.", m.Name, msg)
	var updated *v1alpha1.Machine
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := w.cfg.Machines.Machines(w.cfg.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != m.UID || cur.Spec.ProviderID != m.Spec.ProviderID || !eligible(cur) {
			return errChanged
		}
		clone := cur.DeepCopy()
		now := metav1.Now()
		// As updateMachineToFailedState (machine_util.go:2096), with the type
		// of a failed health check (reconcileMachineHealth, :1020-1025).
		clone.Status.LastOperation = v1alpha1.LastOperation{
			Description:    description,
			State:          v1alpha1.MachineStateFailed,
			Type:           v1alpha1.MachineOperationHealthCheck,
			LastUpdateTime: now,
		}
		clone.Status.CurrentStatus = v1alpha1.CurrentStatus{
			Phase:              v1alpha1.MachineFailed,
			LastUpdateTime:     now,
			PreserveExpiryTime: cur.Status.CurrentStatus.PreserveExpiryTime,
		}
		updated, err = w.cfg.Machines.Machines(w.cfg.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
		return err
	})
	if errors.Is(err, errChanged) || apierrors.IsNotFound(err) {
		klog.V(2).Infof("spot reclaim watcher: machine %q changed meanwhile; not set to Failed", m.Name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	klog.Warning(description)
	w.cfg.Recorder.Eventf(updated, corev1.EventTypeWarning, EventReason,
		"The cloud reclaimed the machine's Spot VM (%s): machine set to Failed, to be replaced", msg)
	Reclaims.Inc()
	return true, nil
}

func (w *Watcher) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pace, name)
}

// eligible: a machine MCM would otherwise leave to its health timeout.
func eligible(m *v1alpha1.Machine) bool {
	return m.DeletionTimestamp == nil && m.Spec.ProviderID != "" && m.Labels[v1alpha1.NodeLabelKey] != "" &&
		watchedPhase(m.Status.CurrentStatus.Phase) &&
		(m.Spec.MachineConfiguration == nil || !ptr.Deref(m.Spec.DisableHealthTimeout, false))
}

func watchedPhase(p v1alpha1.MachinePhase) bool {
	return p == v1alpha1.MachineRunning || p == v1alpha1.MachineUnknown
}

// nodeDown: the node is being deleted or its Ready condition is not True
// (False, Unknown or missing).
func nodeDown(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return true
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

func nodeOfMachine(obj any) ([]string, error) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.Labels[v1alpha1.NodeLabelKey] != "" {
		return []string{m.Labels[v1alpha1.NodeLabelKey]}, nil
	}
	return nil, nil
}

// slimNode keeps of a Node what the watcher reads (name, deletion, Ready), so
// that its cache of the target cluster's Nodes stays small.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:              n.Name,
		UID:               n.UID,
		ResourceVersion:   n.ResourceVersion,
		DeletionTimestamp: n.DeletionTimestamp,
	}}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return slim, nil
}
