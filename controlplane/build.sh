#!/usr/bin/env bash
# Builds the test control plane's binaries, etcd and kube-apiserver, from the Go modules
# pinned in controlplane/binaries/go.mod, and MCM's own machine-controller-manager
# (cmd/machine-controller-manager of the MCM version controlplane/go.mod requires, built in
# MCM's module with MCM's own go.sum, as MCM's Makefile builds it), into a cache directory
# outside the clone:
#   ${MACHINE_DRIVER_CACHE:-$HOME/.cache/machine-driver}/controlplane/<k8s>-etcd-<etcd>/
# It builds once and skips when the binaries there were built from the same go.mod, go.sum,
# sources and Go version (the stamp files: stamp, machine-controller-manager.stamp). Prints the
# directory on its last line, and its time. CONTROLPLANE_BIN_DIR, when set, is the directory
# to use instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mod="$here/binaries"
export GOFLAGS=-mod=mod
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
started=$SECONDS

version_of() { (cd "$mod" && go list -m -f '{{.Version}}' "$1"); }
k8s="$(version_of k8s.io/kubernetes)"
etcd="$(version_of go.etcd.io/etcd/server/v3)"
out="${CONTROLPLANE_BIN_DIR:-${MACHINE_DRIVER_CACHE:-$HOME/.cache/machine-driver}/controlplane/$k8s-etcd-$etcd}"
stamp="$( (go version; cd "$mod" && cat go.mod go.sum etcd/main.go) | sha256sum | cut -d' ' -f1)"

if [[ -x "$out/etcd" && -x "$out/kube-apiserver" && "$(cat "$out/stamp" 2>/dev/null)" == "$stamp" ]]; then
    echo "==> control plane binaries up to date (kube-apiserver $k8s, etcd $etcd)"
else
    echo "==> building kube-apiserver $k8s and etcd $etcd into $out"
    mkdir -p "$out"
    rm -f "$out/stamp"
    major="${k8s#v}"; major="${major%%.*}"
    minor="${k8s#v*.}"; minor="${minor%%.*}"
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    (cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.new" ./etcd \
        && go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.new" k8s.io/kubernetes/cmd/kube-apiserver)
    mv "$out/etcd.new" "$out/etcd"
    mv "$out/kube-apiserver.new" "$out/kube-apiserver"
    echo "$stamp" > "$out/stamp"
fi

# MCM's machine-controller-manager (MachineDeployment, MachineSet and safety controllers):
# the version controlplane/go.mod requires, built inside MCM's module (read-only, in the
# module cache) with MCM's go.mod and go.sum, so that its dependencies are the ones MCM
# pins; the version stamped as MCM's Makefile stamps it (pkg/version.Version).
mcm_module=github.com/gardener/machine-controller-manager
(cd "$here" && go mod download "$mcm_module")
mcm="$(cd "$here" && go list -m -f '{{.Version}}' "$mcm_module")"
mcm_dir="$(cd "$here" && go list -m -f '{{.Dir}}' "$mcm_module")"
mcm_stamp="$( (go version; echo "$mcm"; cat "$mcm_dir/go.mod" "$mcm_dir/go.sum") | sha256sum | cut -d' ' -f1)"
if [[ -x "$out/machine-controller-manager" && "$(cat "$out/machine-controller-manager.stamp" 2>/dev/null)" == "$mcm_stamp" ]]; then
    echo "==> machine-controller-manager $mcm up to date"
else
    echo "==> building machine-controller-manager $mcm into $out"
    mkdir -p "$out"
    rm -f "$out/machine-controller-manager.stamp"
    (cd "$mcm_dir" && GOFLAGS=-mod=readonly go build -trimpath \
        -ldflags "-s -w -X $mcm_module/pkg/version.Version=$mcm" \
        -o "$out/machine-controller-manager.new" ./cmd/machine-controller-manager)
    mv "$out/machine-controller-manager.new" "$out/machine-controller-manager"
    echo "$mcm_stamp" > "$out/machine-controller-manager.stamp"
fi
echo "==> control plane binaries ready in $((SECONDS - started)) s"
echo "$out"
