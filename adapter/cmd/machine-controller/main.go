// Command machine-controller is MCM's machine controller, built the way the
// provider repositories build theirs (MCM's app and options), with the
// machine driver sidecar as its driver: every Driver call goes over the
// sidecar's Unix socket (--machine-driver-socket).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	_ "github.com/gardener/machine-controller-manager/pkg/util/client/metrics/prometheus" // client metrics
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app/options"
	_ "github.com/gardener/machine-controller-manager/pkg/util/reflector/prometheus" // reflector metrics
	_ "github.com/gardener/machine-controller-manager/pkg/util/workqueue/prometheus" // workqueue metrics
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"

	"github.com/machine-driver/adapter/driver"
)

func main() {
	s := options.NewMCServer()
	s.AddFlags(pflag.CommandLine)
	socket := pflag.String("machine-driver-socket", "/run/machine-driver/driver.sock",
		"Unix socket of the machine driver sidecar (absolute path)")
	wait := pflag.Duration("machine-driver-wait", 2*time.Minute,
		"how long to wait at start for the sidecar's socket to appear and answer")

	flag.InitFlags()
	logs.InitLogs()
	defer logs.FlushLogs()

	d, err := driver.Dial(context.Background(), *socket, *wait)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	defer func() { _ = d.Close() }()

	if err := app.Run(s, d); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
