package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"strconv"
	"sync"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/constants"
	machineclientset "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	machinescheme "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/scheme"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	"github.com/gardener/machine-controller-manager/pkg/handlers"
	coreclientbuilder "github.com/gardener/machine-controller-manager/pkg/util/clientbuilder/core"
	machineclientbuilder "github.com/gardener/machine-controller-manager/pkg/util/clientbuilder/machine"
	"github.com/gardener/machine-controller-manager/pkg/util/configz"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app/options"
	mcmdriver "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/machine-driver/adapter/hotupdate"
	"github.com/machine-driver/adapter/reclaim"
)

// controller is MCM's machine controller as MCM's app.Run starts it (same
// kubeconfigs, QPS and burst, event recorder, leader election on the lease
// "machine-controller" in --namespace, app.StartControllers), with what
// app.Run cannot do: stop on SIGTERM (close stop: the informers and workers
// end), release the lease after the calls in flight returned, and report a
// failure instead of exiting the process from inside.
type controller struct {
	stop     chan struct{}
	failed   chan error
	leCancel context.CancelFunc
	leDone   chan struct{}
	stopOnce sync.Once
}

// startController builds the clients and starts the controllers, the spot
// reclaim watcher and (with --hot-update) the class-update reconciler, the
// latter two on shared informers (ownInformers); all under leader election
// when --leader-elect, MCM's default, is on. It returns at once.
func startController(s *options.MCServer, d mcmdriver.Driver, f flags) (*controller, error) {
	var (
		targetkubeconfig *rest.Config
		err              error
	)
	if s.TargetKubeconfig != constants.TargetKubeconfigDisabledValue {
		targetkubeconfig, err = clientcmd.BuildConfigFromFlags("", s.TargetKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("target kubeconfig: %w", err)
		}
	}
	var controlkubeconfig *rest.Config
	switch s.ControlKubeconfig {
	case "":
		controlkubeconfig = targetkubeconfig
	case "inClusterConfig":
		controlkubeconfig, err = clientcmd.BuildConfigFromFlags("", "")
	default:
		controlkubeconfig, err = clientcmd.BuildConfigFromFlags("", s.ControlKubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("control kubeconfig: %w", err)
	}
	if controlkubeconfig == nil {
		return nil, errors.New("no control kubeconfig: set --control-kubeconfig or --target-kubeconfig")
	}
	// As app.Run: QPS and burst from the flags (the content type flag is not
	// applied there either: protobuf does not work for MCM's types).
	if targetkubeconfig != nil {
		targetkubeconfig.QPS = s.KubeAPIQPS
		targetkubeconfig.Burst = int(s.KubeAPIBurst)
	}
	controlkubeconfig.QPS = s.KubeAPIQPS
	controlkubeconfig.Burst = int(s.KubeAPIBurst)

	kubeClientControl, err := kubernetes.NewForConfig(rest.AddUserAgent(controlkubeconfig, "machine-controller"))
	if err != nil {
		return nil, fmt.Errorf("control cluster client: %w", err)
	}
	leaderElectionClient, err := kubernetes.NewForConfig(rest.AddUserAgent(controlkubeconfig, "machine-leader-election"))
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	recorder := createRecorder(kubeClientControl)

	c := &controller{stop: make(chan struct{}), failed: make(chan error, 2), leDone: make(chan struct{})}
	run := func(context.Context) {
		if f.reclaimWatch || f.hotUpdate {
			own, err := newOwnInformers(s, controlkubeconfig)
			if err != nil {
				c.failed <- err
				return
			}
			if f.reclaimWatch {
				if err := startReclaimWatcher(s, own, targetkubeconfig, d, recorder, f.reclaimPeriod, c.stop); err != nil {
					c.failed <- fmt.Errorf("spot reclaim watcher: %w", err)
					return
				}
			}
			if f.hotUpdate {
				if err := startHotUpdate(s, own, d, recorder, f.hotUpdateWorkers, c.stop); err != nil {
					c.failed <- fmt.Errorf("hot update: %w", err)
					return
				}
			}
			own.start(c.stop)
		}
		var targetCoreClientBuilder coreclientbuilder.ClientBuilder
		if targetkubeconfig != nil {
			targetCoreClientBuilder = coreclientbuilder.SimpleControllerClientBuilder{ClientConfig: targetkubeconfig}
		}
		// StartControllers blocks while the controllers run; it returns only on a failure.
		err := app.StartControllers(s, controlkubeconfig, targetkubeconfig,
			machineclientbuilder.SimpleClientBuilder{ClientConfig: controlkubeconfig},
			coreclientbuilder.SimpleControllerClientBuilder{ClientConfig: controlkubeconfig},
			targetCoreClientBuilder, d, recorder, c.stop)
		c.failed <- fmt.Errorf("error running controllers: %w", err)
	}

	if !s.LeaderElection.LeaderElect {
		close(c.leDone)
		c.leCancel = func() {}
		go run(context.Background())
		return c, nil
	}
	id, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	rl, err := resourcelock.New(s.LeaderElection.ResourceLock, s.Namespace, "machine-controller",
		leaderElectionClient.CoreV1(), leaderElectionClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	leCtx, cancel := context.WithCancel(context.Background())
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          rl,
		LeaseDuration: s.LeaderElection.LeaseDuration.Duration,
		RenewDeadline: s.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:   s.LeaderElection.RetryPeriod.Duration,
		// Released at shutdown, after the calls in flight returned, so that
		// the next pod's controller need not wait for the lease to expire.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() {
				if leCtx.Err() == nil {
					c.failed <- errors.New("leader election lost")
				}
			},
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("leader election: %w", err)
	}
	c.leCancel = cancel
	go func() {
		defer close(c.leDone)
		elector.Run(leCtx)
	}()
	return c, nil
}

// ownInformers are the control cluster clients and the Machine informers of
// --namespace that the spot reclaim watcher and the hot-update reconciler
// share (MCM's informers are local to app.StartControllers): one cache of the
// namespace's Machines for both. Each adds its index and handlers before
// start; the informers start once both are built, and stop with the
// controllers.
type ownInformers struct {
	machineClient *machineclientset.Clientset
	controlCore   *kubernetes.Clientset
	machines      machineinformers.SharedInformerFactory
	started       []func(stop <-chan struct{}) // further factories to start
}

func newOwnInformers(s *options.MCServer, control *rest.Config) (*ownInformers, error) {
	const agent = "machine-controller-adapter"
	machineClient, err := machineclientset.NewForConfig(rest.AddUserAgent(control, agent))
	if err != nil {
		return nil, fmt.Errorf("control cluster machine client: %w", err)
	}
	controlCore, err := kubernetes.NewForConfig(rest.AddUserAgent(control, agent))
	if err != nil {
		return nil, fmt.Errorf("control cluster client: %w", err)
	}
	return &ownInformers{
		machineClient: machineClient,
		controlCore:   controlCore,
		machines:      machineinformers.NewFilteredSharedInformerFactory(machineClient, s.MinResyncPeriod.Duration, s.Namespace, nil),
	}, nil
}

// start starts the informers that were asked for.
func (o *ownInformers) start(stop <-chan struct{}) {
	o.machines.Start(stop)
	for _, start := range o.started {
		start(stop)
	}
}

// untilStopped is a context that ends when stop is closed.
func untilStopped(stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	return ctx
}

// startReclaimWatcher builds the spot reclaim watcher (package reclaim) on
// own's Machine informer and a Node informer of its own on the target
// cluster (caching only the Nodes' names, deletion and Ready condition); it
// reads classes and secrets only when it calls the driver, and runs once
// own's informers start. Without a target cluster there are no Nodes to
// watch: it does not run.
func startReclaimWatcher(s *options.MCServer, own *ownInformers, target *rest.Config, d mcmdriver.Driver, recorder record.EventRecorder,
	period time.Duration, stop <-chan struct{}) error {
	if target == nil {
		klog.Info("spot reclaim watcher off: no target cluster")
		return nil
	}
	targetCore, err := kubernetes.NewForConfig(rest.AddUserAgent(target, "machine-controller-spot-reclaim"))
	if err != nil {
		return err
	}
	nodeFactory := kubeinformers.NewSharedInformerFactory(targetCore, s.MinResyncPeriod.Duration)
	w, err := reclaim.New(reclaim.Config{
		Namespace:       s.Namespace,
		Machines:        own.machineClient.MachineV1alpha1(),
		Secrets:         own.controlCore.CoreV1(),
		MachineInformer: own.machines.Machine().V1alpha1().Machines(),
		NodeInformer:    nodeFactory.Core().V1().Nodes(),
		Driver:          d,
		Recorder:        recorder,
		Period:          period,
	})
	if err != nil {
		return err
	}
	own.started = append(own.started, nodeFactory.Start)
	go w.Run(untilStopped(stop))
	return nil
}

// startHotUpdate builds the class-update reconciler (package hotupdate) on
// own's MachineClass and Machine informers; it runs once they start. A
// driver without CAPABILITY_UPDATE_MACHINE leaves it off (logged).
func startHotUpdate(s *options.MCServer, own *ownInformers, d mcmdriver.Driver, recorder record.EventRecorder,
	workers int, stop <-chan struct{}) error {
	updater, ok := d.(hotupdate.Driver)
	if !ok {
		return errors.New("the driver cannot send UpdateMachine")
	}
	r, err := hotupdate.New(hotupdate.Config{
		Namespace:       s.Namespace,
		Machines:        own.machineClient.MachineV1alpha1(),
		Secrets:         own.controlCore.CoreV1(),
		MachineInformer: own.machines.Machine().V1alpha1().Machines(),
		ClassInformer:   own.machines.Machine().V1alpha1().MachineClasses(),
		Driver:          updater,
		Recorder:        recorder,
		Workers:         workers,
	})
	if errors.Is(err, hotupdate.ErrUnsupported) {
		klog.Warningf("hot update off: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	go r.Run(untilStopped(stop))
	return nil
}

// stopControllers ends the informers and workers (MCM turns its health off).
func (c *controller) stopControllers() {
	c.stopOnce.Do(func() { close(c.stop) })
}

// release gives the lease up (when held) and waits for it until deadline.
func (c *controller) release(deadline time.Time) {
	c.leCancel()
	select {
	case <-c.leDone:
	case <-time.After(time.Until(deadline)):
		klog.Warning("leader election lease not released in time")
	}
}

// createRecorder is app.Run's: events of the component "machine-controller".
func createRecorder(kubeClient *kubernetes.Clientset) record.EventRecorder {
	utilruntime.Must(machinescheme.AddToScheme(kubescheme.Scheme))
	eventBroadcaster := record.NewBroadcaster()
	eventBroadcaster.StartLogging(klog.Infof)
	eventBroadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: v1core.New(kubeClient.CoreV1().RESTClient()).Events("")})
	return eventBroadcaster.NewRecorder(kubescheme.Scheme, v1.EventSource{Component: "machine-controller"})
}

// serveHTTP serves what app.Run's startHTTP serves on --address:--port
// (profiling when enabled, configz, /metrics, /healthz), with the given
// /metrics and /healthz handlers; a failure to listen arrives on the channel.
func serveHTTP(s *options.MCServer, metrics http.Handler, healthz http.HandlerFunc) <-chan error {
	mux := http.NewServeMux()
	if s.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/goroutine", pprof.Handler("goroutine").ServeHTTP)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/heap", pprof.Handler("heap").ServeHTTP)
		mux.HandleFunc("/debug/pprof/threadcreate", pprof.Handler("threadcreate").ServeHTTP)
		mux.HandleFunc("/debug/pprof/block", pprof.Handler("block").ServeHTTP)
		mux.HandleFunc("/debug/pprof/mutex", pprof.Handler("mutex").ServeHTTP)
		if s.EnableContentionProfiling {
			goruntime.SetBlockProfileRate(1)
		}
	}
	configz.InstallHandler(mux)
	mux.Handle("/metrics", metrics)
	handlers.UpdateHealth(true)
	mux.HandleFunc("/healthz", healthz)
	server := &http.Server{ // #nosec G112 -- metrics, profiling and health only, as MCM's
		Addr:    net.JoinHostPort(s.Address, strconv.Itoa(int(s.Port))),
		Handler: mux,
	}
	failed := make(chan error, 1)
	go func() { failed <- server.ListenAndServe() }()
	return failed
}

// healthz is MCM's /healthz (unhealthy once its controllers stopped), and
// unhealthy too while the supervised driver does not answer Probe.
func healthz(driverHealthy func() (bool, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if driverHealthy != nil {
			if ok, why := driverHealthy(); !ok {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = fmt.Fprintf(w, "Unhealthy: %s\n", why)
				return
			}
		}
		handlers.Healthz(w, r)
	}
}
