#!/usr/bin/env bash
# Runs the Gardener image of each provider the way a seed runs it
# (deploy/gardener.md, "How it is tested"):
#
#   deploy/gardener-pod-test.sh [PROVIDER...]     # default: every provider
#
# Per provider:
# 1. deploy/image.sh gardener PROVIDER: localhost/machine-controller-manager-provider-PROVIDER:debug
#    (the machine-controller and the debug driver binary, non-root, no shell);
# 2. the Deployment as gardenlet and the extension's webhook render it, with
#    only that image swapped in (gardener-pod-test render; aws with the
#    workload identity volume), validated with kubernetes-validate --strict
#    (the versions deploy/check.sh uses);
# 3. the provider container of it, as admitted and run by the kubelet, played
#    with podman against two real kube-apiservers (the seed, reached through the
#    in-cluster configuration with a token of the Deployment's service account,
#    authorized by the Role gardenlet grants it; the shoot, through the generic
#    kubeconfig with a token of kube-system/machine-controller-manager,
#    authorized by deploy/target) and the provider's fake cloud
#    (gardener-pod-test run): a machine's lifecycle, a driver crash recovered,
#    a scrape of :10259, SIGTERM within the 5 s grace, no Forbidden logged.
# The API servers are controlplane/'s: controlplane/build.sh builds etcd and
# kube-apiserver once into its cache (a no-op when they are there), or
# CONTROLPLANE_BIN_DIR names a directory that has them.
# Each provider's time and the total are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/podman/env.sh
target="${CARGO_TARGET_DIR:-target}"
versions=(1.30.0 1.37.0)

if [[ $# -gt 0 ]]; then
    providers=("$@")
else
    providers=()
    for conf in providers/*/examples/conformance.json; do
        providers+=("$(basename "$(dirname "$(dirname "$conf")")")")
    done
fi

started=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/gardener-pod-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The same venv as deploy/check.sh.
venv="${TMPDIR:-/tmp}/kubernetes-validate-1.37.0"
if [[ ! -f "$venv/.installed" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 PyYAML==6.0.3
    touch "$venv/.installed"
fi

# etcd and kube-apiserver for the seed and the shoot (the directory is build.sh's last line).
# Built (its output shown as it goes), then asked again for the directory: a no-op then.
# (Not `tee /dev/stderr`: with stderr a file, reopening it truncates the log.)
controlplane/build.sh
CONTROLPLANE_BIN_DIR="$(controlplane/build.sh | tail -n 1)"
export CONTROLPLANE_BIN_DIR

# Built once for every provider's image.
(cd adapter && CGO_ENABLED=0 go build -trimpath -o "$work/machine-controller" ./cmd/machine-controller \
    && go build -o "$work/gardener-pod-test" ./cmd/gardener-pod-test)

fake_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fake"])' "providers/$1/examples/conformance.json"; }

for p in "${providers[@]}"; do
    began=$SECONDS
    echo "--- $p"
    MACHINE_CONTROLLER_BIN="$work/machine-controller" IMAGE_ARCHIVE=no deploy/image.sh gardener "$p"
    dir="$work/$p"
    mkdir -p "$dir"
    wi=()
    # AWS runs with workload identity, as extension-aws mounts it (the fake STS exchanges the token).
    [[ "$p" == aws ]] && wi=(--workload-identity)
    "$work/gardener-pod-test" render --provider "$p" --image "localhost/machine-controller-manager-provider-$p:debug" \
        "${wi[@]}" >"$dir/deployment.yaml"
    for v in "${versions[@]}"; do
        "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$dir/deployment.yaml"
    done
    echo "ok $p: the rendered Deployment is valid for Kubernetes ${versions[*]} (--strict)"
    "$work/gardener-pod-test" run --provider "$p" --deployment "$dir/deployment.yaml" \
        --examples "providers/$p/examples" --fake "$target/debug/$(fake_of "$p")" --work "$dir"
    echo "--- $p took $((SECONDS - began)) s"
done
echo "gardener pod test: ${#providers[@]} provider(s) in $((SECONDS - started)) s"
