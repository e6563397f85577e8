// Package sidecartest is test support for the adapter's controllers beside
// MCM's (packages reclaim and hotupdate, and the machine-controller's tests
// of them): a fake machine driver sidecar served on a Unix socket (its
// identity, a count of the calls open at once, its errors with an ErrorInfo),
// the adapter's real gRPC client dialled to it, a signal that an informer's
// watch of a fake clientset has opened, a wait for a controller's informers,
// an informer cache filled by hand, and a counter's value.
package sidecartest

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// Serve serves identity and machines over gRPC on the socket driver.sock of
// a new temporary directory (short, for the Unix socket path limit); the
// server stops and the directory is removed when t ends.
func Serve(t testing.TB, identity pb.IdentityServiceServer, machines pb.MachineDriverServiceServer) (dir, socket string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket = filepath.Join(dir, "driver.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterIdentityServiceServer(srv, identity)
	pb.RegisterMachineDriverServiceServer(srv, machines)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return dir, socket
}

// WatchStarted makes fake's watches of resource close the answer once one
// is open (a fake clientset delivers nothing written before its watch began,
// so a test writes only after the informers watch).
func WatchStarted(fake *k8stesting.Fake, tracker k8stesting.ObjectTracker, resource string) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	fake.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(started) })
		return true, w, nil
	})
	return started
}
