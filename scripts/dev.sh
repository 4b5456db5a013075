#!/usr/bin/env bash
# Sets up the machine, builds, and runs the whole product with no cluster: `opm-operator dev`
# (an embedded Kubernetes API over HTTPS with the CRDs, the example catalog and module, Platform
# `cluster`, the example ModuleInstance demo/hello, the webhooks, controllers and render API).
# State (objects, kubeconfig, CA files, token) is kept in .dev/state; ports 7443-7446.
# Extra arguments go to `opm-operator dev` (see `cargo run -- dev --help`), e.g. --port-base 0.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --bin opm-operator
exec target/debug/opm-operator dev --state-dir .dev/state "$@"
