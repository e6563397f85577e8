// Command gardener-pod-test runs one provider's Gardener image the way a seed
// runs it (deploy/gardener-pod-test.sh builds the image and calls it):
//
//	gardener-pod-test render --provider CLOUD --image localhost/... [--workload-identity] > deployment.yaml
//	gardener-pod-test run --provider CLOUD --deployment deployment.yaml --examples providers/CLOUD/examples \
//	    --fake target/debug/fake-API --work DIR
//
// render prints the Deployment (and its service account, Role and RoleBinding)
// as gardenlet and the provider extension's webhook render it (render.go names
// the files); run takes the provider container out of that Deployment, as
// admitted and run by the kubelet, and plays it with podman against two real
// kube-apiservers on one etcd (controlplane/cluster, clusters.go: the seed,
// with MCM's CRDs and render's objects, reached through the in-cluster
// configuration with a token of the Deployment's service account; the shoot,
// with deploy/target's RBAC (--target-manifests), through the generic
// kubeconfig with a token of kube-system/machine-controller-manager) and the
// provider's fake cloud on the host, then checks, each step timed:
//
//  1. /healthz on :10259 turns healthy;
//  2. a machine's lifecycle: created (one VM in the fake cloud), Pending,
//     its Node registered by the test (playing the kubelet), Running;
//  3. one scrape of :10259 has MCM's series and the driver's cloud API series,
//     and no family or series twice;
//  4. the driver process killed inside the container: /healthz unhealthy,
//     then healthy again, the controller process the same, the driver a new one;
//  5. the machine deleted: its pod evicted, its VM gone, its Node deleted,
//     the Machine gone; the driver's series there again after the restart;
//  6. SIGTERM (podman stop -t 5, the pod's grace) with a CreateMachine in
//     flight: the container exits by itself, with status 0, within 5 s,
//     after the call returned;
//  7. no line of the container's log says forbidden.
//
// The etcd and kube-apiserver binaries are controlplane/build.sh's
// (CONTROLPLANE_BIN_DIR, or its cache directory).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gardener-pod-test render|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "render":
		err = renderCommand(os.Args[2:])
	case "run":
		err = runCommand(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: render or run", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gardener-pod-test: %v\n", err)
		os.Exit(1)
	}
}
