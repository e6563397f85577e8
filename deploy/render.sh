#!/usr/bin/env bash
# Renders a kustomize directory: `kubectl kustomize` when kubectl is installed,
# else the standalone `kustomize build` (.ci/run installs it from the Go module
# proxy on a machine without kubectl).
set -euo pipefail
if command -v kubectl >/dev/null 2>&1; then
    exec kubectl kustomize "$1"
fi
exec kustomize build "$1"
