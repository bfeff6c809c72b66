#!/usr/bin/env bash
# make image: the replicator's OCI image, localhost/mirrorlake:latest, built here without a registry.
# make image-lakehouse (`scripts/build_image.sh lakehouse`): the lakehouse and dashboard image,
# localhost/mirrorlake-lakehouse:latest (Java and Spark's jars: the jars this checkout's venv resolved,
# staged into build/spark-jars/, resolved first if they are not yet).
#
# Installs podman, runc and mmdebstrap (apt) if missing; makes the base image once from Debian's
# packages (mmdebstrap --variant=minbase bookworm, with this machine's apt sources, then podman
# import); then builds deploy/image/Containerfile FROM it. Idempotent: the base is reused, podman's
# layer cache makes a rebuild quick.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=localhost/mirrorlake-base:bookworm
FLAVOR=${1:-replicator}
case "$FLAVOR" in
  replicator) IMAGE=${IMAGE:-localhost/mirrorlake:latest}; FILE=deploy/image/Containerfile ;;
  lakehouse) IMAGE=${IMAGE:-localhost/mirrorlake-lakehouse:latest}; FILE=deploy/image/Containerfile.lakehouse ;;
  *) echo "build_image.sh: unknown image '$FLAVOR' (replicator or lakehouse)" >&2; exit 2 ;;
esac
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

if [ "$FLAVOR" = lakehouse ]; then
  echo "staging Spark's jars into build/spark-jars" >&2
  rm -rf build/spark-jars && mkdir -p build/spark-jars
  .venv/bin/python - <<'PY'
import shutil
from pathlib import Path
from ingest.spark import resolved_jars, spark_session
from replicator.config import SparkConfig
jars = resolved_jars()
if not jars:  # resolved from Maven Central once, into the cache
    spark_session(SparkConfig(master="local[1]", conf={"spark.driver.memory": "512m"}), app_name="stage").stop()
    jars = resolved_jars()
for jar in jars:
    shutil.copy2(jar, Path("build/spark-jars") / jar.name)
PY
fi

ca=()  # the CA bundle pip trusts here, for the build stage (an intercepting proxy's CA, say)
bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$bundle" ] && ca=(--secret "id=pip_ca,src=$bundle")
podman build --quiet --network=host "${ca[@]}" --build-arg "BASE=$BASE" -f "$FILE" -t "$IMAGE" . >/dev/null
echo "built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
