#!/usr/bin/env bash
# Guided (coverage-instrumented) libFuzzer run of one fuzz target, in one command:
#
#   scripts/fuzz.sh TARGET [SECONDS]      TARGET: eval | parse (cue/fuzz) | render_values (fuzz/)
#
# Installs cargo-fuzz if missing (idempotent), builds the target with cargo-fuzz's instrumentation
# (`-Cpasses=sancov-module`, `-Zsanitizer=…`: nightly flags, enabled on the stable toolchain through
# RUSTC_BOOTSTRAP=1) and runs it for SECONDS (default 600) under `nice -n 19`, seeded from the
# checked-in corpora: cue/fuzz/seeds (the `.cue` files of cue/testdata and fixtures/opm) plus
# cue/fuzz/regressions/<target>, or fuzz/corpus/demo_values for render_values.
#
# New corpus entries and crash/timeout/OOM reproducers go OUTSIDE the worktree, to
# $FUZZ_DIR (default /tmp/opm-fuzz)/{corpus,artifacts}/TARGET; the log to $FUZZ_DIR/TARGET.log.
# A reproducer found: `cargo fuzz tmin TARGET FILE` in the target's directory, then keep it in
# cue/fuzz/regressions/TARGET with a note in its README and a test.
#
# Environment: FUZZ_SANITIZER (address | none; default address: ASan's larger frames find stack
# overflows sooner; `none` runs about twice as fast), FUZZ_RSS_MB (default 2048), FUZZ_TIMEOUT
# (seconds per input, default 10), FUZZ_JOBS (cargo build jobs, default all cores: the build is
# niced), FUZZ_STOP=1 (stop at the first finding; by default the run goes on in libFuzzer's fork
# mode, `-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1`, so that one known finding,
# say a seed that runs out of memory, does not end it: every finding lands in the artifacts
# directory and the `oom/timeout/crash:` counts of the log), FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

target="${1:-}"
seconds="${2:-600}"
case "$target" in
  eval | parse)
    dir="$root/cue/fuzz"
    seeds=("$root/cue/fuzz/seeds")
    [ -d "$root/cue/fuzz/regressions/$target" ] && seeds+=("$root/cue/fuzz/regressions/$target")
    ;;
  render_values)
    dir="$root/fuzz"
    seeds=("$root/fuzz/corpus/demo_values")
    ;;
  *)
    echo "usage: scripts/fuzz.sh eval|parse|render_values [SECONDS]" >&2
    echo "(render_values_mutate is a plain binary: cd fuzz && cargo run --release --bin render_values_mutate -- SECONDS)" >&2
    exit 2
    ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  nice -n 19 cargo install --locked cargo-fuzz
fi

out="${FUZZ_DIR:-/tmp/opm-fuzz}"
corpus="$out/corpus/$target"
artifacts="$out/artifacts/$target"
log="$out/$target.log"
mkdir -p "$corpus" "$artifacts"

export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-address}"
cd "$dir"
CARGO_BUILD_JOBS="${FUZZ_JOBS:-$(nproc)}" nice -n 19 cargo fuzz build --sanitizer "$sanitizer" "$target"

echo "fuzzing $target for ${seconds}s (sanitizer $sanitizer); log $log, reproducers in $artifacts" >&2
keep_going="-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1"
[ "${FUZZ_STOP:-0}" = 1 ] && keep_going=""
# shellcheck disable=SC2086 # FUZZ_ARGS and keep_going are lists of flags
nice -n 19 cargo fuzz run --sanitizer "$sanitizer" "$target" "$corpus" "${seeds[@]}" -- \
  -max_total_time="$seconds" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -timeout="${FUZZ_TIMEOUT:-10}" \
  -artifact_prefix="$artifacts/" -print_final_stats=1 $keep_going ${FUZZ_ARGS:-} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "exit $status; last status line:" >&2
grep -E '^#[0-9]+' "$log" | tail -1 >&2 || true
echo "findings in $artifacts:" >&2
ls -l "$artifacts" >&2
exit "$status"
