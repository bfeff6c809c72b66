#!/usr/bin/env bash
# make image: the replicator's OCI image, localhost/mirrorlake:latest, built here without a registry.
#
# Installs podman, runc and mmdebstrap (apt) if missing; makes the base image once from Debian's
# packages (mmdebstrap --variant=minbase bookworm, with this machine's apt sources, then podman
# import); then builds deploy/image/Containerfile FROM it. Idempotent: the base is reused, podman's
# layer cache makes a rebuild quick.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=localhost/mirrorlake-base:bookworm
IMAGE=${IMAGE:-localhost/mirrorlake:latest}
export CONTAINERS_CONF="$PWD/deploy/image/containers.conf"

missing=()
for tool in podman runc mmdebstrap; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "installing ${missing[*]} (apt-get)" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi

if ! podman image exists "$BASE"; then
  echo "making the base image $BASE (mmdebstrap, minbase bookworm)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  mmdebstrap --quiet --variant=minbase bookworm "$work/rootfs.tar" "$sources"
  podman import --quiet "$work/rootfs.tar" "$BASE" >/dev/null
fi

ca=()  # the CA bundle pip trusts here, for the build stage (an intercepting proxy's CA, say)
bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$bundle" ] && ca=(--secret "id=pip_ca,src=$bundle")
podman build --quiet --network=host "${ca[@]}" --build-arg "BASE=$BASE" -f deploy/image/Containerfile -t "$IMAGE" . >/dev/null
echo "built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
