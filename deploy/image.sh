#!/usr/bin/env bash
# Builds an image from a binary built on the host, with buildah, offline, and
# exports it as an OCI archive:
#
#   deploy/image.sh PROVIDER [--release]     # the sidecar: machine-driver-PROVIDER
#   deploy/image.sh machine-controller       # the Go adapter's machine-controller
#   deploy/image.sh gardener PROVIDER [--release]
#       # both in one image, the drop-in for Gardener's
#       # machine-controller-manager-provider-PROVIDER (deploy/gardener.md)
#
# PROVIDER is a folder under providers/. The sidecar's binary must exist
# ($CARGO_TARGET_DIR/{debug,release}/machine-driver-PROVIDER; CI has the debug
# ones, built with the embedded fake). The machine-controller is built here
# (CGO_ENABLED=0, static). The image goes onto a base assembled from the host's
# glibc, libgcc_s and CA bundle (localhost/machine-driver-base:glibc, a few MB,
# non-root user 65532, no shell) through deploy/Dockerfile's `packaged` target.
#
# Result: localhost/<name>:debug (or :release) in the storage of
# deploy/podman/env.sh, and $IMAGE_DIR/<name>.oci.tar (default
# $CARGO_TARGET_DIR/images; IMAGE_ARCHIVE=no skips the archive).
# MACHINE_CONTROLLER_BIN names a machine-controller built already (static,
# CGO_ENABLED=0) instead of building it here.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/podman/env.sh

what="${1:?usage: deploy/image.sh PROVIDER|machine-controller|gardener PROVIDER [--release]}"
gardener=""
if [[ "$what" == gardener ]]; then
    gardener="${2:?usage: deploy/image.sh gardener PROVIDER [--release]}"
    shift
fi
profile=debug
[[ "${2:-}" == "--release" ]] && profile=release
target="${CARGO_TARGET_DIR:-target}"
out="${IMAGE_DIR:-$target/images}"
mkdir -p "$out"
stage="$(mktemp -d "${TMPDIR:-/tmp}/image-context.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

controller() {
    if [[ -n "${MACHINE_CONTROLLER_BIN:-}" ]]; then
        cp "$MACHINE_CONTROLLER_BIN" "$1"
    else
        (cd adapter && CGO_ENABLED=0 go build -trimpath -o "$1" ./cmd/machine-controller)
    fi
}
packaged=packaged
if [[ "$what" == machine-controller ]]; then
    name=machine-controller
    controller "$stage/app"
elif [[ -n "$gardener" ]]; then
    [[ -d "providers/$gardener" ]] || { echo "no provider $gardener under providers/" >&2; exit 2; }
    name="machine-controller-manager-provider-$gardener"
    bin="$target/$profile/machine-driver-$gardener"
    [[ -x "$bin" ]] || { echo "$bin does not exist: cargo build -p machine-driver-$gardener-bin${profile/debug/} first" >&2; exit 2; }
    controller "$stage/machine-controller"
    cp "$bin" "$stage/machine-driver"
    packaged=gardener-packaged
else
    [[ -d "providers/$what" ]] || { echo "no provider $what under providers/" >&2; exit 2; }
    name="machine-driver-$what"
    bin="$target/$profile/$name"
    [[ -x "$bin" ]] || { echo "$bin does not exist: cargo build -p $name-bin${profile/debug/} first" >&2; exit 2; }
    cp "$bin" "$stage/app"
fi

# The base: the dynamic loader and the libraries the binaries link (ldd of a
# Rust binary here: libc, libm, libgcc_s), the CA bundle, a non-root user.
base=localhost/machine-driver-base:glibc
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    root="$stage/base"
    mkdir -p "$root/lib/x86_64-linux-gnu" "$root/lib64" "$root/etc/ssl/certs" "$root/tmp"
    cp -L /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,libgcc_s.so.1} "$root/lib/x86_64-linux-gnu/"
    cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
    cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
    chmod 1777 "$root/tmp"
    ctr="$(buildah from scratch)"
    buildah copy "$ctr" "$root/" / >/dev/null
    buildah config --user 65532:65532 "$ctr"
    buildah commit -q "$ctr" "$base" >/dev/null
    buildah rm "$ctr" >/dev/null
    rm -rf "$root"
fi

# A binary that needs a library the base lacks must not become an image.
for binary in "$stage"/app "$stage"/machine-controller "$stage"/machine-driver; do
    [[ -f "$binary" ]] || continue
    if ldd "$binary" >/dev/null 2>&1; then
        missing="$(ldd "$binary" | awk '/=>/ {print $1}' | grep -v -x -e libc.so.6 -e libm.so.6 -e libgcc_s.so.1 || true)"
        [[ -z "$missing" ]] || { echo "$name ($(basename "$binary")) links libraries the base lacks: $missing" >&2; exit 1; }
    fi
done

buildah build --quiet --isolation chroot --layers=false -f deploy/Dockerfile --target "$packaged" \
    --build-arg BASE_IMAGE="$base" -t "localhost/$name:$profile" "$stage" >/dev/null
if [[ "${IMAGE_ARCHIVE:-yes}" == no ]]; then
    echo "localhost/$name:$profile  $(podman image inspect --format '{{.Size}}' "localhost/$name:$profile" | numfmt --to=iec)"
    exit 0
fi
rm -f "$out/$name.oci.tar"
podman save --quiet --format oci-archive -o "$out/$name.oci.tar" "localhost/$name:$profile"
echo "localhost/$name:$profile  $(du -h "$out/$name.oci.tar" | cut -f1)  $out/$name.oci.tar"
