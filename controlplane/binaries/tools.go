//go:build tools

// Package binaries pins the modules controlplane/build.sh builds: etcd (./etcd, from
// go.etcd.io/etcd/server/v3) and kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver).
package binaries

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
