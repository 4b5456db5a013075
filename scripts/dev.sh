#!/usr/bin/env bash
# Sets up the machine and runs the main job with no cluster at all: the admission webhooks over
# TLS with a self-signed dev CA (written to .dev/certs), probes and metrics, all on 127.0.0.1.
# Extra arguments go to `opm-operator serve` (see `cargo run -- serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec cargo run --bin opm-operator -- serve --self-signed \
  --self-signed-dir .dev/certs \
  --webhook-addr 127.0.0.1:9443 --probe-addr 127.0.0.1:8081 --metrics-addr 127.0.0.1:8080 "$@"
