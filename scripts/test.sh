#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# The evaluator must stay a leaf: no async runtime, HTTP or Kubernetes client in its normal deps.
if cargo tree -p cue -e normal --prefix none | grep -E '^(tokio|hyper|kube|axum)( |-)' ; then
  echo "error: crate cue depends on tokio/hyper/kube/axum (see above)" >&2
  exit 1
fi

cargo nextest run --workspace --no-fail-fast "$@"
