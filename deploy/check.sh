#!/usr/bin/env bash
# Checks the deploy manifests of every provider (one overlay per folder under
# providers/; a provider without one, or an overlay without a provider, fails):
# kustomize render, kubernetes-validate --strict against the oldest and newest
# Kubernetes the project supports, and check-manifests.py (Pod Security
# "restricted", read-only roots, pinned images, the native sidecar); and the
# target cluster's manifests (deploy/target): render and kubernetes-validate.
# kubernetes-validate comes from PyPI into a venv under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
versions=(1.30.0 1.37.0)

venv="${TMPDIR:-/tmp}/kubernetes-validate-1.37.0"
if [[ ! -f "$venv/.installed" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 PyYAML==6.0.3
    touch "$venv/.installed"
fi

providers=$(cd providers && for d in */; do [[ -f "$d/Cargo.toml" ]] && echo "${d%/}"; done)
overlays=$(cd deploy/overlays && for d in */; do echo "${d%/}"; done)
if [[ "$providers" != "$overlays" ]]; then
    echo "providers ($(echo $providers)) and deploy/overlays ($(echo $overlays)) differ: one overlay per provider" >&2
    exit 1
fi

out="$(mktemp -d "${TMPDIR:-/tmp}/deploy-check.XXXXXX")"
trap 'rm -rf "$out"' EXIT
for p in $providers; do
    deploy/render.sh "deploy/overlays/$p" >"$out/$p.yaml"
    for v in "${versions[@]}"; do
        "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$out/$p.yaml"
    done
    echo "ok $p: valid for Kubernetes ${versions[*]} (--strict)"
    "$venv/bin/python" deploy/check-manifests.py "$p" "$out/$p.yaml"
done
deploy/render.sh deploy/target >"$out/target.yaml"
for v in "${versions[@]}"; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$out/target.yaml"
done
echo "ok target: valid for Kubernetes ${versions[*]} (--strict)"
