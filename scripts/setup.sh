#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian machine with Rust.
# Idempotent; runs as root without prompts. Safe to call before every test run.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
# The CNCF distribution registry, for module tests against a real OCI registry.
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
# Debian's kubectl, for the kube-emu fidelity session (installed beside any other kubectl).
[ -x /usr/bin/kubectl ] && dpkg -S /usr/bin/kubectl 2>/dev/null | grep -q '^kubernetes-client:' || need+=(kubernetes-client)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 update -qq
  # kubernetes-client ships /usr/bin/kubectl; another package may already own that path.
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 install -y -qq -o Dpkg::Options::=--force-overwrite "${need[@]}" >/dev/null
fi

command -v cargo-nextest >/dev/null 2>&1 || cargo install --locked cargo-nextest
echo "setup: ok (docker-registry: $(command -v docker-registry), kubectl: $(command -v kubectl))"
