// Command etcd is etcd's server (go.etcd.io/etcd/server/v3, etcdmain.Main), built from
// its Go module for the test control plane (controlplane/README.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
