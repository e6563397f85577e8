#!/usr/bin/env bash
# The project's test command (see README):
#   1. unit and integration tests of every crate (all features, so the
#      embedded fakes are compiled in);
#   2. each fake cloud that has one runs its cross-check with the cloud's own
#      client (tests/fake-*/crosscheck/ via scripts/crosscheck-fake.sh, e.g.
#      Azure's and Alibaba's Python SDKs);
#      the benchmark harness with tiny numbers, so that it keeps working;
#   3. the conformance suite against each provider binary on its fake cloud;
#   4. the Go adapter's tests, its lifecycle run through each provider's sidecar.
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

for cloud in "${clouds[@]}"; do
    fake="$(fake_of "$cloud")"
    echo "==> conformance suite: machine-driver-$cloud on its fake cloud ($fake)"
    "$TARGET/debug/machine-driver-conformance" \
        --spawn "$TARGET/debug/machine-driver-$cloud" \
        --spawn-fake "$TARGET/debug/$fake" \
        --machine-class "providers/$cloud/examples/machine-class.json" \
        --secret "providers/$cloud/examples/secret.json" \
        --repeat 5 \
        --junit "$TARGET/conformance-$cloud.xml"
done

echo "==> Go adapter (adapter/): translation tests and the lifecycle through every provider's sidecar"
bin_dir="$(cd "$TARGET/debug" && pwd)"
# -count=1: the tests run the Rust binaries, which Go's test cache does not track.
(cd adapter && MACHINE_DRIVER_BIN_DIR="$bin_dir" go test -count=1 ./...)
