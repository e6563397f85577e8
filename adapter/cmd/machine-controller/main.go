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
// On SIGTERM (or SIGINT) the process stops taking work, sends SIGTERM to the
// supervised driver, waits for the driver calls in flight (answered, or
// refused with UNAVAILABLE by a driver whose --shutdown-grace ran out),
// releases the leader election lease and exits, all within --shutdown-timeout.
//
// Exit status: 0 after a clean stop; 1 when the machine-controller failed
// (flags MCM refuses, a kubeconfig or API server problem, lost leader
// election, its port taken); 2 for flags that do not parse; 3 when the machine
// driver failed (its binary cannot start, it did not become ready within
// --machine-driver-wait, it cannot be reached, or it did not stop cleanly).
package main

import (
	"context"
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
	"github.com/machine-driver/adapter/metricsmerge"
	"github.com/machine-driver/adapter/supervise"
)

// Exit statuses (see the package comment).
const (
	exitOK         = 0
	exitController = 1
	exitUsage      = 2
	exitDriver     = 3
)

// releaseMargin is the part of --shutdown-timeout kept for releasing the lease.
const releaseMargin = 300 * time.Millisecond

func main() {
	os.Exit(run())
}

type flags struct {
	socket, binary, socketDir string
	wait, grace, shutdown     time.Duration
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

	flag.InitFlags()
	logs.InitLogs()
	defer logs.FlushLogs()
	version.LogVersionInfoWithLevel(4)

	if f.binary != "" && f.shutdown < f.grace+2*releaseMargin {
		klog.Errorf("--shutdown-timeout (%s) must exceed --machine-driver-shutdown-grace (%s) by at least %s", f.shutdown, f.grace, 2*releaseMargin)
		return exitUsage
	}
	if err := s.Validate(); err != nil {
		klog.Errorf("%v", err)
		return exitController
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	prometheus.MustRegister(callsInFlight)

	var sup *supervise.Supervisor
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
				return stopDriver(sup, exitOK)
			}
			klog.Errorf("machine driver did not become ready within %s: %v", f.wait, err)
			return stopDriver(sup, exitDriver)
		}
		socket = sup.Socket()
	}
	d, err := driver.Dial(ctx, socket, f.wait)
	if err != nil {
		if ctx.Err() != nil {
			return stopDriver(sup, exitOK)
		}
		klog.Errorf("%v", err)
		return stopDriver(sup, exitDriver)
	}
	defer func() { _ = d.Close() }()
	calls := newTracked(d)

	c, err := startController(s, calls)
	if err != nil {
		klog.Errorf("machine-controller: %v", err)
		return stopDriver(sup, exitController)
	}
	select {
	case <-ctx.Done():
		return shutdown(f, c, calls, sup)
	case err := <-c.failed:
		klog.Errorf("machine-controller failed: %v", err)
	case err := <-httpFailed:
		klog.Errorf("machine-controller HTTP server on port %d: %v", s.Port, err)
	}
	c.stopControllers()
	calls.refuse()
	return stopDriver(sup, exitController)
}

// shutdown stops the controllers and the driver within --shutdown-timeout.
func shutdown(f flags, c *controller, calls *tracked, sup *supervise.Supervisor) int {
	began := time.Now()
	deadline := began.Add(f.shutdown)
	klog.Infof("shutting down: stopping the controllers and the machine driver (at most %s)", f.shutdown)
	c.stopControllers()
	inFlight := calls.refuse()
	driverStopped := make(chan error, 1)
	if sup != nil {
		// The driver refuses new calls and finishes those in flight within its grace.
		go func() { driverStopped <- sup.Stop() }()
	} else {
		driverStopped <- nil
	}
	open := calls.wait(deadline.Add(-2 * releaseMargin))
	klog.Infof("driver calls in flight at shutdown: %d; still open after %s: %d", inFlight, time.Since(began).Round(time.Millisecond), open)
	driverErr := <-driverStopped
	c.release(deadline.Add(-releaseMargin / 3))
	klog.Infof("machine-controller stopped after %s", time.Since(began).Round(time.Millisecond))
	if driverErr != nil {
		klog.Errorf("%v", driverErr)
		return exitDriver
	}
	return exitOK
}

// stopDriver stops the supervised driver (if any) and returns code, or
// exitDriver when code is exitOK and the driver did not stop cleanly.
func stopDriver(sup *supervise.Supervisor, code int) int {
	if sup == nil {
		return code
	}
	if err := sup.Stop(); err != nil {
		klog.Errorf("%v", err)
		if code == exitOK {
			return exitDriver
		}
	}
	return code
}
