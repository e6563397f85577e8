// Command machine-controller is MCM's machine controller, built the way the
// provider repositories build theirs (MCM's options and controllers), with
// the machine driver as its driver: every Driver call goes over the driver's
// Unix socket. Two ways to run it (deploy/README.md says when to use which):
//
//   - next to the driver in another container of the pod (the three-container
//     layout of deploy/base): --machine-driver-socket names the shared socket;
//   - with the driver inside its own container (the image that replaces
//     Gardener's machine-controller-manager-provider-<cloud>, deploy/gardener.md):
//     --machine-driver-binary names the driver's executable, which this
//     process starts, supervises and stops (package supervise); the socket is
//     in a private directory, the controllers start once the driver answers
//     Probe, a dead driver is restarted with backoff, /healthz is unhealthy
//     while it is down, and /metrics serves the driver's cloud API series
//     next to MCM's (package metricsmerge).
//
// Every MCM flag parses and means what it means in MCM's provider images
// (options.MCServer), so Gardener's arguments work unchanged.
//
// Beside MCM's controllers (and like them, only while holding the lease) runs
// the spot reclaim watcher (package reclaim, --spot-reclaim-watch, on by
// default): a Running or Unknown machine whose Node is down is asked about
// (GetMachineStatus, at most once per --spot-reclaim-check-period), and set to
// Failed, so that MCM replaces it at once, when the cloud reclaimed its Spot
// VM; machine_controller_spot_reclaims_total counts those. With --hot-update
// (off by default) the class-update reconciler runs there too (package
// hotupdate): a MachineClass whose providerSpec is edited in place has its
// Running machines changed in place through the driver's UpdateMachine, at
// most --hot-update-concurrency (5) at a time, with the result recorded on
// each Machine; machine_controller_hot_updates_total counts the outcomes.
//
// On SIGTERM (or SIGINT) the process stops taking work, sends SIGTERM to the
// supervised driver, waits for the driver calls in flight (answered, or
// refused with UNAVAILABLE by a driver whose --shutdown-grace ran out),
// releases the leader election lease and exits, all within --shutdown-timeout
// (default 4.5 s: Gardener's pod gets SIGKILL 5 s after SIGTERM). Every wait
// is bounded by that one deadline, counted from the signal, whatever the
// driver does (hangs, ignores SIGTERM):
//
//	0 s            controllers stopped, new driver calls refused, SIGTERM to the driver
//	               (a Probe in flight is cancelled, not waited for);
//	timeout-0.6 s  calls still in flight given up; the driver is killed if it still runs;
//	timeout-0.3 s  the driver's exit given up (it is reported, exit status 3);
//	timeout-0.1 s  the lease release given up;
//	timeout        exit.
//
// Exit status: 0 after a clean stop; 1 when the machine-controller failed
// (flags MCM refuses, a kubeconfig or API server problem, lost leader
// election, its port taken); 2 for flags that do not parse; 3 when the machine
// driver failed (its binary cannot start, it did not become ready within
// --machine-driver-wait, it cannot be reached, or it did not stop cleanly).
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/gardener/machine-controller-manager/pkg/util/client/metrics/prometheus" // client metrics
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app/options"
	_ "github.com/gardener/machine-controller-manager/pkg/util/reflector/prometheus" // reflector metrics
	_ "github.com/gardener/machine-controller-manager/pkg/util/workqueue/prometheus" // workqueue metrics
	"github.com/gardener/machine-controller-manager/pkg/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/machine-driver/adapter/driver"
	"github.com/machine-driver/adapter/hotupdate"
	"github.com/machine-driver/adapter/metricsmerge"
	"github.com/machine-driver/adapter/reclaim"
	"github.com/machine-driver/adapter/supervise"
)

// Exit statuses (see the package comment).
const (
	exitOK         = 0
	exitController = 1
	exitUsage      = 2
	exitDriver     = 3
)

// releaseMargin is the part of --shutdown-timeout kept for releasing the
// lease: the driver is killed 2*releaseMargin before the deadline, and its
// exit waited for until releaseMargin before it.
const releaseMargin = 300 * time.Millisecond

func main() {
	os.Exit(run())
}

type flags struct {
	socket, binary, socketDir string
	wait, grace, shutdown     time.Duration
	reclaimWatch              bool
	reclaimPeriod             time.Duration
	hotUpdate                 bool
	hotUpdateWorkers          int
}

func run() int {
	s := options.NewMCServer()
	s.AddFlags(pflag.CommandLine)
	var f flags
	pflag.StringVar(&f.socket, "machine-driver-socket", "/run/machine-driver/driver.sock",
		"Unix socket of the machine driver running in another container (absolute path); ignored with --machine-driver-binary")
	pflag.StringVar(&f.binary, "machine-driver-binary", "",
		"executable of the machine driver to start and supervise in this container (absolute path; the Gardener image sets /machine-driver)")
	pflag.StringVar(&f.socketDir, "machine-driver-socket-dir", os.TempDir(),
		"where the supervised driver's private socket directory is created (must be writable)")
	pflag.DurationVar(&f.wait, "machine-driver-wait", 2*time.Minute,
		"how long to wait at start for the machine driver to answer")
	pflag.DurationVar(&f.grace, "machine-driver-shutdown-grace", 3*time.Second,
		"the supervised driver's --shutdown-grace: how long its calls in flight may take after SIGTERM")
	pflag.DurationVar(&f.shutdown, "shutdown-timeout", 4500*time.Millisecond,
		"longest time from SIGTERM to exit; keep it under the pod's terminationGracePeriodSeconds (Gardener: 5s)")
	pflag.BoolVar(&f.reclaimWatch, "spot-reclaim-watch", true,
		"ask the driver about a Running or Unknown machine whose node is down, and set it to Failed (replaced at once) when the cloud reclaimed its Spot VM (package reclaim); needs a target cluster")
	pflag.DurationVar(&f.reclaimPeriod, "spot-reclaim-check-period", reclaim.DefaultPeriod,
		"shortest time between two such driver calls for one machine (while its node stays down: period, 2x, 4x, up to 8x)")
	pflag.BoolVar(&f.hotUpdate, "hot-update", false,
		"when a MachineClass's providerSpec is edited in place, change its Running machines in place through the driver's UpdateMachine (package hotupdate; needs CAPABILITY_UPDATE_MACHINE); fields that need a replacement are reported, not forced")
	pflag.IntVar(&f.hotUpdateWorkers, "hot-update-concurrency", hotupdate.DefaultWorkers,
		"most UpdateMachine calls open at a time (must be positive)")

	flag.InitFlags()
	logs.InitLogs()
	defer logs.FlushLogs()
	version.LogVersionInfoWithLevel(4)

	if f.binary != "" && f.shutdown < f.grace+2*releaseMargin {
		klog.Errorf("--shutdown-timeout (%s) must exceed --machine-driver-shutdown-grace (%s) by at least %s", f.shutdown, f.grace, 2*releaseMargin)
		return exitUsage
	}
	if f.reclaimPeriod <= 0 {
		klog.Errorf("--spot-reclaim-check-period (%s) must be positive", f.reclaimPeriod)
		return exitUsage
	}
	if f.hotUpdateWorkers <= 0 {
		klog.Errorf("--hot-update-concurrency (%d) must be positive", f.hotUpdateWorkers)
		return exitUsage
	}
	if err := s.Validate(); err != nil {
		klog.Errorf("%v", err)
		return exitController
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	prometheus.MustRegister(callsInFlight, reclaim.Reclaims, hotupdate.Updates)

	var sup *supervise.Supervisor
	var stopSup func() error // nil without a supervised driver
	metrics := promhttp.Handler()
	var driverHealthy func() (bool, string)
	if f.binary != "" {
		var err error
		sup, err = supervise.Start(supervise.Config{
			Binary:        f.binary,
			SocketDir:     f.socketDir,
			ShutdownGrace: f.grace,
			StopTimeout:   f.shutdown - 2*releaseMargin,
		})
		if err != nil {
			klog.Errorf("machine driver: %v", err)
			return exitDriver
		}
		stopSup = sup.Stop
		prometheus.MustRegister(metricsmerge.ScrapeFailures)
		metrics = promhttp.InstrumentMetricHandler(prometheus.DefaultRegisterer,
			promhttp.HandlerFor(&metricsmerge.Gatherer{Own: prometheus.DefaultGatherer, URL: sup.MetricsURL}, promhttp.HandlerOpts{}))
		driverHealthy = sup.Healthy
	}
	// As app.Run: the HTTP server first, before the controllers (and leader election).
	httpFailed := serveHTTP(s, metrics, healthz(driverHealthy))

	socket := f.socket
	if sup != nil {
		waitCtx, cancelWait := context.WithTimeout(ctx, f.wait)
		err := sup.WaitReady(waitCtx)
		cancelWait()
		if err != nil {
			if ctx.Err() != nil {
				return stopDriver(stopSup, exitOK, time.Now().Add(f.shutdown))
			}
			klog.Errorf("machine driver did not become ready within %s: %v", f.wait, err)
			return stopDriver(stopSup, exitDriver, time.Now().Add(f.shutdown))
		}
		socket = sup.Socket()
	}
	d, err := driver.Dial(ctx, socket, f.wait)
	if err != nil {
		if ctx.Err() != nil {
			return stopDriver(stopSup, exitOK, time.Now().Add(f.shutdown))
		}
		klog.Errorf("%v", err)
		return stopDriver(stopSup, exitDriver, time.Now().Add(f.shutdown))
	}
	defer func() { _ = d.Close() }()
	calls := newTracked(d)

	c, err := startController(s, calls, f)
	if err != nil {
		klog.Errorf("machine-controller: %v", err)
		return stopDriver(stopSup, exitController, time.Now().Add(f.shutdown))
	}
	select {
	case <-ctx.Done():
		return shutdown(f, c, calls, stopSup)
	case err := <-c.failed:
		klog.Errorf("machine-controller failed: %v", err)
	case err := <-httpFailed:
		klog.Errorf("machine-controller HTTP server on port %d: %v", s.Port, err)
	}
	c.stopControllers()
	calls.refuse()
	return stopDriver(stopSup, exitController, time.Now().Add(f.shutdown))
}

// shutdown stops the controllers and the driver (stopDriver: nil without a
// supervised one) and releases the lease, returning by --shutdown-timeout.
func shutdown(f flags, c *controller, calls *tracked, stopDriver func() error) int {
	began := time.Now()
	deadline := began.Add(f.shutdown)
	klog.Infof("shutting down: stopping the controllers and the machine driver (at most %s)", f.shutdown)
	c.stopControllers()
	inFlight := calls.refuse()
	// The driver refuses new calls and finishes those in flight within its
	// grace; the supervisor kills it 2*releaseMargin before the deadline.
	driverStopped := stopAsync(stopDriver)
	open := calls.wait(deadline.Add(-2 * releaseMargin))
	klog.Infof("driver calls in flight at shutdown: %d; still open after %s: %d", inFlight, time.Since(began).Round(time.Millisecond), open)
	driverErr := waitStopped(driverStopped, deadline.Add(-releaseMargin))
	c.release(deadline.Add(-releaseMargin / 3))
	klog.Infof("machine-controller stopped after %s", time.Since(began).Round(time.Millisecond))
	if driverErr != nil {
		klog.Errorf("%v", driverErr)
		return exitDriver
	}
	return exitOK
}

// stopDriver stops the supervised driver (stop; nil without one), waiting
// for it until deadline, and returns code, or exitDriver when code is exitOK
// and the driver did not stop cleanly.
func stopDriver(stop func() error, code int, deadline time.Time) int {
	if err := waitStopped(stopAsync(stop), deadline.Add(-releaseMargin)); err != nil {
		klog.Errorf("%v", err)
		if code == exitOK {
			return exitDriver
		}
	}
	return code
}

// stopAsync runs stop (when not nil) and delivers its result.
func stopAsync(stop func() error) <-chan error {
	stopped := make(chan error, 1)
	if stop == nil {
		stopped <- nil
		return stopped
	}
	go func() { stopped <- stop() }()
	return stopped
}

// waitStopped waits for the driver's stop until deadline.
func waitStopped(stopped <-chan error, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-stopped:
		return err
	case <-timer.C:
		return errors.New("machine driver did not stop by the shutdown deadline: given up")
	}
}
