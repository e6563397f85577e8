#!/usr/bin/env bash
# The project's test command (see README):
#   1. unit and integration tests of every crate (all features, so the
#      embedded fakes are compiled in);
#   2. each fake cloud that has one runs its cross-check with the cloud's own
#      client (tests/fake-*/crosscheck/ via scripts/crosscheck-fake.sh, e.g.
#      Azure's and Alibaba's Python SDKs);
#      the benchmark harness with tiny numbers, so that it keeps working;
#   3. the conformance suite against each provider binary on its fake cloud,
#      with a canary secret, trace-level JSON logs and OTLP export, after which
#      no secret value may appear in anything captured (scripts/canary-check.sh),
#      then its soak at small N (mixed faults and driver kills; each well
#      under a minute, its time printed);
#   4. the Go adapter's tests, its lifecycle run through each provider's sidecar,
#      the machine-controller on a real control plane (controlplane/build.sh first);
#   5. gardener's Go providers (OpenStack, Azure) against the fakes (goproviders/).
#   6. a real control plane (controlplane/): etcd and kube-apiserver built from Go
#      modules, deploy/'s RBAC applied and enforced on MCM's Machines.
# Providers are discovered: every providers/<cloud>/examples/conformance.json
# names the fake its binary machine-driver-<cloud> is tested against.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}"

echo "==> cargo test --workspace --all-features"
cargo test --workspace --all-features

echo "==> building the driver binaries with their embedded fakes"
cargo build --workspace --all-features --bins

for check in tests/fake-*/crosscheck; do
    [[ -d "$check" ]] || continue
    fake="$(basename "$(dirname "$check")")"
    echo "==> $fake cross-checked with the cloud's own client ($check)"
    scripts/crosscheck-fake.sh "$check" "$TARGET/debug/$fake"
done

clouds=()
for conf in providers/*/examples/conformance.json; do
    clouds+=("$(basename "$(dirname "$(dirname "$conf")")")")
done
fake_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fake"])' "providers/$1/examples/conformance.json"; }

for cloud in "${clouds[@]}"; do
    echo "==> benchmark harness (quick sizes): machine-driver-$cloud"
    "$TARGET/debug/machine-driver-bench" --quick --driver "$TARGET/debug/machine-driver-$cloud"
done

# The conformance run is also the secret-leak check (scripts/canary-check.sh):
# a canary secret, trace-level JSON logs, OTLP export, then the search.
for cloud in "${clouds[@]}"; do
    echo "==> conformance suite: machine-driver-$cloud on its fake cloud ($(fake_of "$cloud")), canary secret checked"
    scripts/canary-check.sh "$TARGET/debug" "$cloud" --repeat 5 --junit "$TARGET/conformance-$cloud.xml"
done

# The soak (tests/conformance/README.md, "Soak"): 12 machines at once through
# the lifecycle while the fake fails 30 % of the cloud calls and the driver is
# killed 5 times; fixed seed, so the restart points are the same every run.
for cloud in "${clouds[@]}"; do
    fake="$(fake_of "$cloud")"
    echo "==> soak: machine-driver-$cloud on $fake (12 machines, 5 restarts, fault rate 0.3)"
    started=$SECONDS
    "$TARGET/debug/machine-driver-conformance" \
        --spawn "$TARGET/debug/machine-driver-$cloud" \
        --spawn-fake "$TARGET/debug/$fake" \
        --machine-class "providers/$cloud/examples/machine-class.json" \
        --secret "providers/$cloud/examples/secret.json" \
        --soak-machines 12 --soak-restarts 5 --soak-fault-rate 0.3 --soak-seed 1 \
        --soak-timeout-secs 120 \
        --junit "$TARGET/soak-$cloud.xml"
    echo "==> soak of machine-driver-$cloud took $((SECONDS - started)) s"
done

# etcd, kube-apiserver and MCM for the adapter's machine-controller tests and the control
# plane stage below (controlplane/README.md): built once into a cache outside the clone, a
# no-op when the cached binaries match; the directory is build.sh's last line.
# Built (its output shown as it goes), then asked again for the directory: a no-op then.
# (Not `tee /dev/stderr`: with stderr a file, reopening it truncates the log.)
controlplane/build.sh
CONTROLPLANE_BIN_DIR="$(controlplane/build.sh | tail -n 1)"
export CONTROLPLANE_BIN_DIR

echo "==> Go adapter (adapter/): translation tests, the lifecycle through every provider's sidecar, the machine-controller on a real control plane"
bin_dir="$(cd "$TARGET/debug" && pwd)"
# -count=1: the tests run the Rust binaries, which Go's test cache does not track. CI=true:
# a test that needs the control plane's binaries fails without them, never skips.
(cd adapter && CI=true MACHINE_DRIVER_BIN_DIR="$bin_dir" go test -count=1 ./...)

# The Go providers as independent clients (goproviders/README.md): gardener's
# OpenStack and Azure drivers, unmodified, against the fakes; a missing fake
# binary fails these tests here (CI=true), it never skips them.
echo "==> Go providers (goproviders/): gardener's OpenStack and Azure drivers against the fakes"
started=$SECONDS
(cd goproviders && CI=true GOFLAGS=-mod=mod MACHINE_DRIVER_BIN_DIR="$bin_dir" go test -count=1 -v ./...)
echo "==> Go providers took $((SECONDS - started)) s"

# A real control plane (controlplane/README.md): etcd and kube-apiserver built
# from Go modules into a cache outside the clone (once; build.sh skips when the
# cached binaries match), deploy/'s rendered RBAC applied and enforced. With
# CI=true the test fails, never skips, when the binaries are missing.
echo "==> control plane (controlplane/): etcd + kube-apiserver + MCM from Go modules; deploy/'s RBAC enforced; MCM, machine-controller, sidecar and fake per provider"
started=$SECONDS
(cd controlplane && CI=true GOFLAGS=-mod=mod MACHINE_DRIVER_BIN_DIR="$bin_dir" go test -count=1 -v -timeout 20m ./...)
echo "==> control plane took $((SECONDS - started)) s"
