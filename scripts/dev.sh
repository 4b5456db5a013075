#!/usr/bin/env bash
# Sets up the machine and runs the main job with no cluster at all: the admission webhooks over
# TLS with a self-signed dev CA, probes and metrics on localhost. Extra arguments go to `serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec cargo run --release --bin opm-operator -- serve --self-signed "$@"
