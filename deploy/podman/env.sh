# Sourced by deploy/image.sh and deploy/pod-test.sh: buildah and podman with
# deploy/podman/containers.conf and their own storage (vfs: works without
# overlay support), so nothing else on the machine is touched.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="$here/containers.conf"
state="${MACHINE_DRIVER_CONTAINERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machine-driver/containers}"
mkdir -p "$state"
cat > "$state/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$state/storage"
runroot = "$state/run"
CONF
export CONTAINERS_STORAGE_CONF="$state/storage.conf"
