// Package hotupdate changes running machines in place when their
// MachineClass is edited, instead of leaving them as they were created.
//
// MCM never applies a class edit to existing machines: a MachineDeployment
// rolls only when its machine template changes (EqualIgnoreHash,
// pkg/controller/deployment_util.go:884, ignores even the node template), and
// the template names the class, not its content. A class whose providerSpec
// is edited in place (same name) therefore only reaches machines created
// afterwards. The Reconciler closes that gap with the driver's UpdateMachine
// (proto/machinedriver/v1/driver.proto), when the driver advertises
// CAPABILITY_UPDATE_MACHINE (New answers ErrUnsupported otherwise):
//
//   - Every Machine of the namespace records, in the annotation
//     SpecHashAnnotation, the hash (SpecHash) of the providerSpec of its
//     class that it was last brought to. A machine first seen without one
//     (created, or existing when the reconciler first runs) gets its class's
//     current hash without a call: its VM is taken to have been created with
//     the class as it is.
//   - When a class's providerSpec changes (an informer update whose old and
//     new providerSpec differ), or when a machine's recorded hash differs from
//     its class's (also after a restart), every Running machine of that class
//     with a providerID is sent UpdateMachine: the machine, its class, the
//     merge of the class's secretRef and credentialsSecretRef, and as
//     previous_machine_class the version of the class whose hash the machine
//     records, when this process saw it (the old object of the update event,
//     or the class as it was at start; for a machine moved to another class,
//     a version of any class with that hash). Tags that version has and the new
//     one lacks are then removed; without it (after a restart the old object
//     is gone) the driver removes no tag.
//   - At most Workers calls are open at a time; machines of other classes are
//     never sent anything.
//   - The answer is recorded on the Machine: ResultAnnotation (JSON, Result)
//     and the new SpecHashAnnotation; a Normal event EventApplied names what
//     was applied, a Warning event EventNeedsReplacement names the fields only
//     a new VM can have (never forced: the machine keeps running as it is),
//     and Updates counts the outcome.
//   - Errors follow the error table of proto/machinedriver/v1/driver.proto.
//     UNAVAILABLE, DEADLINE_EXCEEDED, an error that is not a status, a failure
//     to read the class's secrets or to patch the Machine are retried with
//     exponential backoff per machine (RetryBase doubling to RetryMax, never
//     sooner than the sidecar's RetryInfo), nothing recorded. The
//     replacement-only answer (FAILED_PRECONDITION, reason NEEDS_REPLACEMENT)
//     is recorded with the new hash and not retried. INVALID_ARGUMENT,
//     UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL and UNKNOWN are recorded
//     (ResultAnnotation, Warning event EventFailed, the old hash kept) and
//     retried after the table's 3 minutes (RESOURCE_EXHAUSTED: 10 minutes),
//     or the backoff when longer. Any other error (NOT_FOUND: no VM of this
//     machine; UNIMPLEMENTED; FAILED_PRECONDITION without that reason) is
//     recorded likewise and not retried by this process until the class
//     changes again. Machine events that arrive while a machine waits for its
//     retry do not shorten the wait.
//   - Ownership is the sidecar's check, as on every call: whether the VM of
//     the providerID belongs to this machine and cluster (NOT_FOUND
//     otherwise). The reconciler sends only the Machine and its classes.
//   - Nothing of a providerSpec or a secret is logged, recorded or put in an
//     event: those carry names, hashes, field paths and the driver's
//     messages, which never contain secret values (driver.proto).
package hotupdate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/typed/machine/v1alpha1"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/gardener/machine-controller-manager/pkg/client/listers/machine/v1alpha1"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/machine-driver/adapter/driver"
	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
	"github.com/machine-driver/adapter/ownctl"
)

// Annotations the reconciler writes on a Machine.
const (
	// SpecHashAnnotation is SpecHash of the class providerSpec the machine was
	// last brought to (or, first seen, created with).
	SpecHashAnnotation = "machine-driver.gardener.cloud/hot-update-spec-hash"
	// ResultAnnotation is the JSON of the last UpdateMachine answer (Result).
	ResultAnnotation = "machine-driver.gardener.cloud/hot-update-result"
)

// Reasons of the events recorded on a Machine.
const (
	// EventApplied (Normal): fields changed in place.
	EventApplied = "HotUpdateApplied"
	// EventNeedsReplacement (Warning): fields only a new VM can have; not applied.
	EventNeedsReplacement = "HotUpdateNeedsReplacement"
	// EventFailed (Warning): the driver refused the update for another reason.
	EventFailed = "HotUpdateFailed"
)

// Outcomes: the values of Result.Outcome and of Updates' label.
const (
	// OutcomeApplied: every differing field was changed in place.
	OutcomeApplied = "applied"
	// OutcomePartiallyApplied: some fields were changed in place, others need a replacement.
	OutcomePartiallyApplied = "partially_applied"
	// OutcomeUnchanged: the VM already had what the class asks for.
	OutcomeUnchanged = "unchanged"
	// OutcomeNeedsReplacement: only a replacement can change what differs; nothing applied.
	OutcomeNeedsReplacement = "needs_replacement"
	// OutcomeRetried: UNAVAILABLE or DEADLINE_EXCEEDED; the call is retried with backoff.
	OutcomeRetried = "retried"
	// OutcomeFailed: any other error; recorded, retried later or not by its code (see the package comment).
	OutcomeFailed = "failed"
)

// Updates counts UpdateMachine calls by outcome.
var Updates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "machine_controller_hot_updates_total",
	Help: "UpdateMachine calls the hot-update reconciler sent after a MachineClass edit, by outcome (applied, partially_applied, unchanged, needs_replacement, retried, failed).",
}, []string{"outcome"})

// ErrUnsupported is New's answer when the driver does not advertise
// CAPABILITY_UPDATE_MACHINE.
var ErrUnsupported = errors.New("the machine driver does not advertise CAPABILITY_UPDATE_MACHINE")

// Defaults of Config.
const (
	DefaultWorkers   = 5
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
)

const (
	// callTimeout bounds one UpdateMachine call.
	callTimeout = time.Minute
	// slowRetry and exhaustedRetry are the error table's delays
	// (driver.proto) for a bad class, credentials or permissions, or a driver
	// bug, and for an exhausted quota.
	slowRetry      = 3 * time.Minute
	exhaustedRetry = 10 * time.Minute
	// byClass is the machine informer's index on spec.class.name.
	byClass = "hot-update-class"
	// keptVersions is how many versions of one class are kept to be sent as
	// previous_machine_class.
	keptVersions = 16
)

// Driver is what the reconciler calls: the adapter's driver.Driver, or the
// machine-controller's call tracker around it.
type Driver interface {
	UpdateMachine(context.Context, *driver.UpdateMachineRequest) (*driver.UpdateMachineResponse, error)
	Has(pb.Capability) bool
}

// Config is what a Reconciler reads, calls and writes.
type Config struct {
	// Namespace is the control namespace (MCM's --namespace).
	Namespace string
	// Machines patches Machines' annotations in Namespace.
	Machines machineclient.MachineV1alpha1Interface
	// Secrets reads the classes' secrets (control cluster).
	Secrets corev1client.SecretsGetter
	// MachineInformer watches the Machines of Namespace; not started yet (New adds an index).
	MachineInformer machineinformers.MachineInformer
	// ClassInformer watches the MachineClasses of Namespace; not started yet.
	ClassInformer machineinformers.MachineClassInformer
	// Driver answers UpdateMachine.
	Driver Driver
	// Recorder records the events on Machines.
	Recorder record.EventRecorder
	// Workers is how many calls may be open at a time (default DefaultWorkers).
	Workers int
	// RetryBase and RetryMax bound the backoff of retried calls (defaults
	// DefaultRetryBase, DefaultRetryMax).
	RetryBase, RetryMax time.Duration
}

// Result is the JSON of ResultAnnotation: the last answer for the machine.
type Result struct {
	// Class is the machine class's name.
	Class string `json:"class"`
	// SpecHash is SpecHash of the class providerSpec sent.
	SpecHash string `json:"specHash"`
	// PreviousSpecHash is the hash the machine recorded before the call.
	PreviousSpecHash string `json:"previousSpecHash"`
	// PreviousClassSent tells whether that version of the class was sent as
	// previous_machine_class (only then are removed tags removed).
	PreviousClassSent bool `json:"previousClassSent"`
	// Outcome is one of the Outcome constants (never OutcomeRetried).
	Outcome string `json:"outcome"`
	// Applied, Unchanged and NeedsReplacement are the field paths by outcome.
	Applied          []string `json:"applied,omitempty"`
	Unchanged        []string `json:"unchanged,omitempty"`
	NeedsReplacement []string `json:"needsReplacement,omitempty"`
	// Message is what was changed or refused, in the driver's words.
	Message string `json:"message,omitempty"`
	// NextAttempt is when a failed call is retried (absent: not retried
	// until the class changes again).
	NextAttempt *metav1.Time `json:"nextAttempt,omitempty"`
	// Time is when the answer arrived.
	Time metav1.Time `json:"time"`
}

// Reconciler is the class-update reconciler (see the package comment).
type Reconciler struct {
	cfg      Config
	machines machinelisters.MachineLister
	byClass  cache.Indexer
	classes  machinelisters.MachineClassLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedDelayingInterface[string]
	now      func() time.Time

	mu       sync.Mutex
	versions map[string]*versions // by class name
	handled  map[types.UID]string // machine → class hash last handled by this process
	attempts map[string]*attempt  // by machine name: machines waiting for a retry
}

// attempt is the backoff of one machine's retried calls for one class hash.
type attempt struct {
	hash      string
	failures  int
	notBefore time.Time
}

// versions are the providerSpec versions of one class seen by this process, by hash.
type versions struct {
	order  []string
	byHash map[string]*v1alpha1.MachineClass
}

// New builds a reconciler on cfg's informers (which must not have started);
// ErrUnsupported when the driver cannot update machines.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Driver == nil || !cfg.Driver.Has(pb.Capability_CAPABILITY_UPDATE_MACHINE) {
		return nil, ErrUnsupported
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("hot update concurrency %d: must be positive", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryBase)
	}
	machineInformer := cfg.MachineInformer.Informer()
	classInformer := cfg.ClassInformer.Informer()
	r := &Reconciler{
		cfg:      cfg,
		machines: cfg.MachineInformer.Lister(),
		byClass:  machineInformer.GetIndexer(),
		classes:  cfg.ClassInformer.Lister(),
		synced:   []cache.InformerSynced{machineInformer.HasSynced, classInformer.HasSynced},
		queue:    workqueue.NewTypedDelayingQueue[string](),
		now:      time.Now,
		versions: map[string]*versions{},
		handled:  map[types.UID]string{},
		attempts: map[string]*attempt{},
	}
	if err := ownctl.WatchMachines(machineInformer, byClass, classOfMachine, r.machineChanged, r.machineDeleted); err != nil {
		return nil, err
	}
	if _, err := classInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.classChanged(nil, obj) },
		UpdateFunc: r.classChanged,
		DeleteFunc: r.classDeleted,
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// Run reconciles machines until ctx ends, once the informers (started by the
// caller) have synced.
func (r *Reconciler) Run(ctx context.Context) {
	ownctl.Run(ctx, r.queue, r.synced, r.cfg.Workers, func() {
		klog.Infof("hot update: machine class edits are applied to their Running machines through UpdateMachine, %d at a time", r.cfg.Workers)
	}, r.sync)
}

func (r *Reconciler) machineChanged(obj any) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.DeletionTimestamp == nil {
		r.queue.Add(m.Name)
	}
}

func (r *Reconciler) machineDeleted(obj any) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if m, ok = tomb.Obj.(*v1alpha1.Machine); !isTomb || !ok {
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.handled, m.UID)
	delete(r.attempts, m.Name)
}

// classChanged remembers the class's versions (old is nil for an add) and
// queues its machines; each is compared with the class by its recorded hash.
func (r *Reconciler) classChanged(old, obj any) {
	c, ok := obj.(*v1alpha1.MachineClass)
	if !ok {
		return
	}
	hash, err := SpecHash(c.ProviderSpec.Raw)
	if err != nil {
		klog.Warningf("hot update: machine class %q: %v", c.Name, err)
		return
	}
	if o, ok := old.(*v1alpha1.MachineClass); ok {
		if oldHash, err := SpecHash(o.ProviderSpec.Raw); err == nil && oldHash != hash {
			r.remember(o, oldHash)
			klog.Infof("hot update: machine class %q: providerSpec changed (%s -> %s)", c.Name, short(oldHash), short(hash))
		}
	}
	r.remember(c, hash)
	objs, err := r.byClass.ByIndex(byClass, c.Name)
	if err != nil {
		return
	}
	for _, m := range objs {
		r.machineChanged(m)
	}
}

func (r *Reconciler) classDeleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	if _, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.versions, name)
	}
}

// remember keeps c as the version hash of its class (the latest keptVersions).
func (r *Reconciler) remember(c *v1alpha1.MachineClass, hash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.versions[c.Name]
	if v == nil {
		v = &versions{byHash: map[string]*v1alpha1.MachineClass{}}
		r.versions[c.Name] = v
	}
	if _, seen := v.byHash[hash]; !seen {
		v.order = append(v.order, hash)
		if len(v.order) > keptVersions {
			delete(v.byHash, v.order[0])
			v.order = v.order[1:]
		}
	}
	v.byHash[hash] = c
}

// version is the version of class whose providerSpec hashes to hash, if
// seen; else a version of another class with that providerSpec (for a
// machine whose spec.class was changed by hand or by another controller; MCM
// v0.62.1 never changes it: the providerSpec, not the name, is what the VM
// was brought to).
func (r *Reconciler) version(class, hash string) *v1alpha1.MachineClass {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := r.versions[class]; v != nil && v.byHash[hash] != nil {
		return v.byHash[hash]
	}
	for _, v := range r.versions {
		if c := v.byHash[hash]; c != nil {
			return c
		}
	}
	return nil
}

func (r *Reconciler) wasHandled(uid types.UID, hash string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled[uid] == hash
}

func (r *Reconciler) markHandled(uid types.UID, hash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled[uid] = hash
}

// backoff records a failed attempt for machine name at class hash and
// answers the wait before the next: RetryBase doubling per failure up to
// RetryMax, at least floor. A new hash starts again at RetryBase.
func (r *Reconciler) backoff(name, hash string, floor time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attempts[name]
	if a == nil || a.hash != hash {
		a = &attempt{hash: hash}
		r.attempts[name] = a
	}
	d := r.cfg.RetryBase
	for range a.failures {
		if d >= r.cfg.RetryMax {
			break
		}
		d *= 2
	}
	d = max(min(d, r.cfg.RetryMax), floor)
	a.failures++
	a.notBefore = r.now().Add(d)
	return d
}

// waiting is how long machine name still waits for its retry at class hash (0: not waiting).
func (r *Reconciler) waiting(name, hash string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.attempts[name]; a != nil && a.hash == hash {
		return max(a.notBefore.Sub(r.now()), 0)
	}
	return 0
}

func (r *Reconciler) clearAttempts(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.attempts, name)
}

// sync brings one machine to its class; it answers when to look at the
// machine again (0: at its next event).
func (r *Reconciler) sync(ctx context.Context, name string) time.Duration {
	m, err := r.machines.Machines(r.cfg.Namespace).Get(name)
	if err != nil || m.DeletionTimestamp != nil {
		r.clearAttempts(name)
		return 0
	}
	class, err := r.classes.MachineClasses(r.cfg.Namespace).Get(m.Spec.Class.Name)
	if err != nil {
		return 0 // when the class appears, its add queues the machine again
	}
	hash, err := SpecHash(class.ProviderSpec.Raw)
	if err != nil {
		return 0 // logged by classChanged; the class is broken for every call
	}
	recorded := m.Annotations[SpecHashAnnotation]
	if recorded == hash || r.wasHandled(m.UID, hash) {
		r.clearAttempts(name)
		return 0
	}
	if wait := r.waiting(name, hash); wait > 0 {
		return wait
	}
	if recorded == "" {
		// First seen: its VM was created with the class as it is.
		if err := r.annotate(ctx, m, hash, nil); err != nil {
			klog.Warningf("hot update: machine %q: recording the spec hash of class %q: %v", name, class.Name, err)
			return r.backoff(name, hash, 0)
		}
		r.markHandled(m.UID, hash)
		r.clearAttempts(name)
		return 0
	}
	if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning || m.Spec.ProviderID == "" {
		return 0 // queued again by the machine's update when it turns Running
	}
	previous := r.version(class.Name, recorded)
	secret, err := ownctl.ClassSecret(ctx, r.cfg.Secrets, class)
	if err != nil {
		klog.Warningf("hot update: machine %q: %v", name, err)
		return r.backoff(name, hash, 0)
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	resp, err := r.cfg.Driver.UpdateMachine(callCtx, &driver.UpdateMachineRequest{
		Machine:              m,
		MachineClass:         class,
		PreviousMachineClass: previous,
		Secret:               secret,
	})
	cancel()
	if ctx.Err() != nil {
		return 0 // stopping: the hash is unchanged, the next process calls again
	}
	res := &Result{Class: class.Name, SpecHash: hash, PreviousSpecHash: recorded, PreviousClassSent: previous != nil, Time: metav1.NewTime(r.now())}
	reached := hash
	var again time.Duration // > 0: a failed call retried after it
	if err != nil {
		transient, floor := retryPolicy(err)
		if transient {
			again = r.backoff(name, hash, floor)
			klog.Warningf("hot update: machine %q (class %q): %v; retried in %s", name, class.Name, err, again)
			Updates.WithLabelValues(OutcomeRetried).Inc()
			return again
		}
		if msg, ok := driver.NeedsReplacementOnly(err); ok {
			res.Outcome, res.Message = OutcomeNeedsReplacement, msg
		} else {
			// The hash stays, so that the next process tries again too.
			res.Outcome, res.Message = OutcomeFailed, errorMessage(err)
			reached = ""
			if floor > 0 {
				again = r.backoff(name, hash, floor)
				res.NextAttempt = &metav1.Time{Time: res.Time.Add(again)}
			}
		}
	} else {
		summarize(res, resp)
	}
	Updates.WithLabelValues(res.Outcome).Inc()
	r.events(m, res)
	if err := r.annotate(ctx, m, reached, res); err != nil {
		if again == 0 {
			again = r.backoff(name, hash, 0)
		}
		klog.Warningf("hot update: machine %q: recording the result (%s): %v; called again in %s", name, res.Outcome, err, again)
		return again
	}
	klog.Infof("hot update: machine %q (class %q, providerSpec %s -> %s): %s %s", name, class.Name, short(recorded), short(hash), res.Outcome, res.Message)
	if again > 0 {
		return again
	}
	r.markHandled(m.UID, hash)
	r.clearAttempts(name)
	return 0
}

// retryPolicy is what an UpdateMachine error asks for (the error table of
// proto/machinedriver/v1/driver.proto): transient errors are retried with
// backoff, at least floor (the sidecar's RetryInfo when it sent one), and not
// recorded; the others are recorded, and retried after floor when it is
// positive.
func retryPolicy(err error) (transient bool, floor time.Duration) {
	s, ok := status.FromError(err)
	if !ok {
		return true, 0
	}
	switch s.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		d, _ := driver.RetryDelay(err)
		return true, d
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.Internal, codes.Unknown:
		return false, slowRetry
	case codes.ResourceExhausted:
		return false, exhaustedRetry
	}
	return false, 0
}

func errorMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", s.Code(), s.Message())
	}
	return err.Error()
}

// summarize fills res from an answer.
func summarize(res *Result, resp *driver.UpdateMachineResponse) {
	var details []string
	for _, c := range resp.Changes {
		switch c.Outcome {
		case driver.Applied:
			res.Applied = append(res.Applied, c.Field)
		case driver.Unchanged:
			res.Unchanged = append(res.Unchanged, c.Field)
		case driver.NeedsReplacement:
			res.NeedsReplacement = append(res.NeedsReplacement, c.Field)
		}
		if c.Outcome != driver.Unchanged && c.Detail != "" {
			details = append(details, c.Field+": "+c.Detail)
		}
	}
	res.Message = strings.Join(details, "; ")
	switch {
	case len(res.Applied) > 0 && len(res.NeedsReplacement) > 0:
		res.Outcome = OutcomePartiallyApplied
	case len(res.Applied) > 0:
		res.Outcome = OutcomeApplied
	case len(res.NeedsReplacement) > 0:
		res.Outcome = OutcomeNeedsReplacement
	default:
		res.Outcome = OutcomeUnchanged
	}
}

// events records what the answer says on the machine: Normal for what was
// applied, Warning for what needs a replacement or a refusal.
func (r *Reconciler) events(m *v1alpha1.Machine, res *Result) {
	if len(res.Applied) > 0 {
		r.cfg.Recorder.Eventf(m, corev1.EventTypeNormal, EventApplied,
			"Machine class %s edited: applied in place %s (%s)", res.Class, strings.Join(res.Applied, ", "), res.Message)
	}
	switch {
	case len(res.NeedsReplacement) > 0:
		r.cfg.Recorder.Eventf(m, corev1.EventTypeWarning, EventNeedsReplacement,
			"Machine class %s edited: only a replacement can change %s; not applied, the machine keeps running as it is",
			res.Class, strings.Join(res.NeedsReplacement, ", "))
	case res.Outcome == OutcomeNeedsReplacement:
		r.cfg.Recorder.Eventf(m, corev1.EventTypeWarning, EventNeedsReplacement,
			"Machine class %s edited: nothing applied, the machine keeps running as it is (machine driver: %s)", res.Class, res.Message)
	case res.Outcome == OutcomeFailed:
		r.cfg.Recorder.Eventf(m, corev1.EventTypeWarning, EventFailed,
			"Machine class %s edited: the machine driver refused the update: %s", res.Class, res.Message)
	}
}

// annotate merges the annotations (hash when not empty, the result when not
// nil) into the machine; a merge patch, so that it never conflicts with MCM's writes.
func (r *Reconciler) annotate(ctx context.Context, m *v1alpha1.Machine, hash string, res *Result) error {
	annotations := map[string]string{}
	if hash != "" {
		annotations[SpecHashAnnotation] = hash
	}
	if res != nil {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		annotations[ResultAnnotation] = string(b)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = r.cfg.Machines.Machines(r.cfg.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SpecHash is the hex SHA-256 of a providerSpec's canonical JSON (object
// keys sorted, no insignificant whitespace, numbers as written), so that a
// class rewritten with the same content keeps its hash.
func SpecHash(raw []byte) (string, error) {
	var canonical []byte
	if len(bytes.TrimSpace(raw)) == 0 {
		canonical = []byte("null")
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", fmt.Errorf("providerSpec is not JSON: %w", err)
		}
		var err error
		if canonical, err = json.Marshal(v); err != nil {
			return "", err
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

func short(hash string) string {
	if hash == "" {
		return "(none)"
	}
	return hash[:min(12, len(hash))]
}

func classOfMachine(obj any) ([]string, error) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.Spec.Class.Name != "" {
		return []string{m.Spec.Class.Name}, nil
	}
	return nil, nil
}
