#!/usr/bin/env bash
# Installs what mirrorlake needs on a fresh Debian machine, idempotently:
# Java 17, Maven and Chromium (apt-get, only if missing; Chromium drives the dashboard's browser
# tests through Playwright), gcc with Python's and librdkafka's headers (the flow's compiled
# produce path, replicator/flow/copying/_copycore.c), a virtualenv with the package and its extras
# (pip, with pip's cache). Kafka jars (mvn) and Spark packages (ivy) are fetched on first use
# into ${MIRRORLAKE_CACHE:-~/.cache/mirrorlake}. Re-running it after a pyproject change reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)  # certificates of the secured test clusters
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
[ -f /usr/include/librdkafka/rdkafka.h ] || need_apt+=(librdkafka-dev)
[ -x /usr/sbin/iptables ] || need_apt+=(iptables)  # network partitions of the chaos soak (bench/netsplit.py, root)
"$PYTHON" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
  || need_apt+=(python3-dev)
"$PYTHON" -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need_apt[*]} with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"bootstrap: mirrorlake needs Python 3.11+, {sys.executable} is {sys.version.split()[0]}")
PY

# a change to the package's metadata or to the compiled module reinstalls (and rebuilds it)
stamp="$VENV/.mirrorlake-installed-$(cat pyproject.toml setup.py replicator/flow/copying/_copycore.c | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[lakehouse,dashboard,test,dev]"
  rm -f "$VENV"/.mirrorlake-installed-*
  touch "$stamp"
  echo "bootstrap: virtualenv $VENV ready"
fi
