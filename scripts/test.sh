#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# Crates by dependency weight: the evaluator and the render kernel stay free of the async runtime,
# HTTP and the Kubernetes client in their normal dependencies.
for crate in cue opm-kernel; do
  if cargo tree -p "$crate" -e normal --prefix none | grep -E '^(tokio|hyper|kube|axum)( |-)' ; then
    echo "error: crate $crate depends on tokio/hyper/kube/axum (see above)" >&2
    exit 1
  fi
done

# Every package of Cargo.lock into the cargo registry, including the optional `k8s-pb` no build
# compiles: kube-emu's protobuf drift test reads its sources (kube-emu/src/protobuf/codegen.rs), and
# the tests themselves run on loopback only.
cargo fetch --locked

# The operator image (release build + buildah, no network): the install test runs the operator from
# it, as a kubelet would (tests/it/install.rs).
bash scripts/image.sh

cargo nextest run --workspace --no-fail-fast "$@"
