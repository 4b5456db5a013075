#!/usr/bin/env bash
# opm-real.sh WORKSPACE [OUT] — the real-OPM check (issue 28): publish the public Open Platform
# Model sources and render the public modules with the operator's own kernel, next to the CUE
# harness that imitates it.
#
# WORKSPACE is a directory made by the opm-real tool's assemble.sh (../shared/tools/opm-real, see
# its README): third-party sources assembled on this machine, never committed here. OUT (default
# a fresh temporary directory) receives the staged modules, the OCI layout, the Platform CR, every
# render's output/stderr/`/usr/bin/time -v` report and summary.tsv.
#
# What it does:
#  1. Stages and publishes into OUT/layout with `opm-operator module publish`, at the versions the
#     module files declare:
#       - opmodel.dev/core@v2           WORKSPACE/core without its *_pins.cue (assemble.sh vendors
#                                       core the same way), at the version the catalog pins;
#       - cue.dev/x/k8s.io@v0           the generated stand-in (WORKSPACE/catalog/cue.mod/pkg/...);
#       - opmodel.dev/catalogs/opm@v2   WORKSPACE/catalog at its identity's metadata.version;
#       - web_app, podinfo, harness_mini  at their metadata.version;
#       - gen_components20              the 20-component real-shaped module, generated into
#                                       WORKSPACE from web_app and the catalog's blueprints by
#                                       scripts/opm-real-gen20.py (issue 43: < 1 s and < 300 MB
#                                       through the CUE harness, < 0.3 s and < 100 MB through
#                                       the kernel).
#     assemble.sh strips every `deps` block (it vendors instead), so each staged module file is
#     rewritten with deps: the catalog's are catalog_opm 2.0.0-alpha.4's own (core
#     v2.0.0-alpha.4, k8s v0.7.0 with `default: true`); the modules require core and the catalog
#     at the versions published here (upstream web_app pins catalog alpha.3 and podinfo core
#     alpha.5, which this workspace does not hold; the platform's pins win either way).
#  2. Writes OUT/platform.yaml, a Platform CR subscribing the catalog, and renders each module
#     with `opm-operator render MODULE@VERSION --platform OUT/platform.yaml` (core alpha.4's
#     `#Subscription` registry shape) under `/usr/bin/time -v`, with the values the CUE harness
#     instantiates it with (exported from WORKSPACE/<ws>/opm-synth-instance by `cue`).
#  3. Checks that the rendered (component, transformer) pairs contain every pair of the harness's
#     expect.tsv and equal the pairs with objects of the CUE harness's own render (a pair whose
#     output is an empty list renders no object)
#     (`cue export ./opm-synth-instance -e rendered`, the command run.sh runs, timed the same way).
#  4. Checks that an unknown values key is refused naming `values.<key>` with a position in the
#     module's module.cue.
#  5. Prints a table: module, pairs expected/kernel/cue, kernel time and peak RSS, cue harness
#     time and peak RSS. The goal (issue 28): every module under 0.5 s and 100 MB, release build.
#
# Environment: OPM_OPERATOR (default target/release/opm-operator), CUE (default
# target/release/cue); build both with `cargo build --release --bin opm-operator` and
# `cargo build --release -p cue --bin cue`.
# Exit status: 0 when every check holds, 1 when one fails, 2 on bad usage.
set -euo pipefail

usage() { echo "usage: $0 WORKSPACE [OUT]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
WS=$(cd "$1" && pwd) || usage
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OPM=${OPM_OPERATOR:-$ROOT/target/release/opm-operator}
CUE=${CUE:-$ROOT/target/release/cue}
for b in "$OPM" "$CUE"; do
	[ -x "$b" ] || { echo "not executable: $b (cargo build --release --bin opm-operator; cargo build --release -p cue --bin cue)" >&2; exit 2; }
done
for d in core catalog lib_web_app cli_podinfo harness_mini; do
	[ -d "$WS/$d" ] || { echo "$WS/$d is missing: not a workspace made by assemble.sh" >&2; exit 2; }
done
OUT=${2:-$(mktemp -d -t opm-real.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/stage" "$OUT/layout" "$OUT/runs"
mkdir -p "$OUT/stage" "$OUT/layout" "$OUT/runs"

CORE_PATH=opmodel.dev/core@v2
CORE_VERSION=${OPM_REAL_CORE_VERSION:-v2.0.0-alpha.4}
K8S_PATH=cue.dev/x/k8s.io@v0
K8S_VERSION=${OPM_REAL_K8S_VERSION:-v0.7.0}
CATALOG_PATH=opmodel.dev/catalogs/opm@v2
FAILED=0
fail() { echo "FAIL: $*" >&2; FAILED=1; }

# cue_string DIR EXPR — a concrete string of the package in DIR (evaluated with the vendored deps).
cue_string() { (cd "$1" && "$CUE" export . -e "$2") | python3 -c 'import json,sys; print(json.load(sys.stdin))'; }

# module_file PATH DEPS... — a module file; each DEP is "path=version[=default]".
module_file() {
	local path=$1 d p v def
	shift
	printf 'module: "%s"\nlanguage: {\n\tversion: "v0.17.0"\n}\nsource: {\n\tkind: "self"\n}\n' "$path"
	[ $# -gt 0 ] || return 0
	printf 'deps: {\n'
	for d in "$@"; do
		IFS== read -r p v def <<<"$d"
		printf '\t"%s": {\n\t\tv: "%s"\n' "$p" "$v"
		[ -z "$def" ] || printf '\t\tdefault: true\n'
		printf '\t}\n'
	done
	printf '}\n'
}

# stage SRC NAME — copy a module tree without vendored deps and harness files.
stage() {
	local dst=$OUT/stage/$2
	mkdir -p "$dst"
	(cd "$1" && tar -c --exclude=./cue.mod --exclude=./opm-synth-instance --exclude='./.opm_real_*' \
		--exclude='*_pins.cue' --exclude=./results .) | tar -x -C "$dst"
	mkdir -p "$dst/cue.mod"
}

publish() {
	local dir=$1 version=$2
	"$OPM" module publish "$dir" "$version" --no-cache --layout "$OUT/layout" >> "$OUT/publish.log" \
		|| { echo "publishing $dir at $version failed (see $OUT/publish.log)" >&2; exit 1; }
}

module_path() { sed -nE 's/^module:[[:space:]]*"([^"]+)".*/\1/p' "$1/cue.mod/module.cue"; }

############################################################################
# 1. stage and publish
############################################################################
: > "$OUT/publish.log"
stage "$WS/core" core
module_file "$CORE_PATH" > "$OUT/stage/core/cue.mod/module.cue"
publish "$OUT/stage/core" "$CORE_VERSION"

mkdir -p "$OUT/stage/k8s/cue.mod"
cp -r "$WS/catalog/cue.mod/pkg/cue.dev/x/k8s.io/." "$OUT/stage/k8s/"
module_file "$K8S_PATH" > "$OUT/stage/k8s/cue.mod/module.cue"
publish "$OUT/stage/k8s" "$K8S_VERSION"

CATALOG_VERSION=$(cue_string "$WS/catalog" metadata.version)
stage "$WS/catalog" catalog
module_file "$CATALOG_PATH" "$K8S_PATH=$K8S_VERSION=default" "$CORE_PATH=$CORE_VERSION" \
	> "$OUT/stage/catalog/cue.mod/module.cue"
publish "$OUT/stage/catalog" "v$CATALOG_VERSION"

# name → workspace directory
python3 "$ROOT/scripts/opm-real-gen20.py" "$WS" >> "$OUT/publish.log"
declare -A WSDIR=([web_app]=lib_web_app [podinfo]=cli_podinfo [harness_mini]=harness_mini
	[gen_components20]=gen_components20)
MODULES=(web_app podinfo harness_mini gen_components20)
declare -A COORD
for m in "${MODULES[@]}"; do
	src=$WS/${WSDIR[$m]}
	path=$(module_path "$src")
	version=$(cue_string "$src" metadata.version)
	stage "$src" "$m"
	module_file "$path" "$CATALOG_PATH=v$CATALOG_VERSION" "$CORE_PATH=$CORE_VERSION" \
		> "$OUT/stage/$m/cue.mod/module.cue"
	publish "$OUT/stage/$m" "v$version"
	COORD[$m]="${path%@*}@v$version"
done
echo "published into $OUT/layout:"
sed 's/^/  /' "$OUT/publish.log"

############################################################################
# 2. the platform
############################################################################
cat > "$OUT/platform.yaml" <<EOF
apiVersion: opmodel.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  type: kubernetes
  registry:
    $CATALOG_PATH:
      version: $CATALOG_VERSION
EOF
RENDER_FLAGS=(--layout "$OUT/layout" --platform "$OUT/platform.yaml" --core-module "$CORE_PATH"
	--core-version "$CORE_VERSION" --platform-shape subscription --runtime-name opm-cli -o json)

# timed NAME DIR CMD... — run CMD in DIR under /usr/bin/time -v; NAME.{out,err,time} in runs/.
timed() {
	local f=$OUT/runs/$1 dir=$2
	shift 2
	(cd "$dir" && /usr/bin/time -v -o "$f.time" "$@" > "$f.out" 2> "$f.err") || true
}
# figures NAME — "exit wall_s rss_mb" from NAME.time.
figures() {
	local t=$OUT/runs/$1.time
	local rc wall rss
	rc=$(sed -nE 's/^[[:space:]]*Exit status: ([0-9]+)/\1/p' "$t")
	wall=$(sed -nE 's/^[[:space:]]*Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): //p' "$t" |
		awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
	rss=$(sed -nE 's/^[[:space:]]*Maximum resident set size \(kbytes\): //p' "$t")
	echo "${rc:-?} ${wall:-?} $(( ${rss:-0} / 1024 ))"
}

############################################################################
# 3. renders: kernel and CUE harness
############################################################################
printf 'module\tpairs_expected\tpairs_kernel\tpairs_cue\tkernel_s\tkernel_mb\tcue_s\tcue_mb\tstatus\n' > "$OUT/summary.tsv"
for m in "${MODULES[@]}"; do
	ws=${WSDIR[$m]}
	src=$WS/$ws
	(cd "$src" && "$CUE" export ./opm-synth-instance -e values) > "$OUT/runs/$m.values.json" \
		|| { fail "$m: exporting the harness's values"; continue; }
	timed "$m.kernel" "$OUT" "$OPM" render "${COORD[$m]}" --values "$OUT/runs/$m.values.json" \
		--name "$(cd "$src" && "$CUE" export ./opm-synth-instance -e metadata.name | tr -d '"')" \
		--namespace default "${RENDER_FLAGS[@]}"
	timed "$m.cue" "$src" "$CUE" export ./opm-synth-instance -e rendered
	read -r krc ks kmb <<<"$(figures "$m.kernel")"
	read -r crc cs cmb <<<"$(figures "$m.cue")"
	[ "$krc" = 0 ] || fail "$m: the kernel render exited $krc: $(head -c 2000 "$OUT/runs/$m.kernel.err")"
	[ "$crc" = 0 ] || fail "$m: the CUE harness exited $crc: $(head -c 600 "$OUT/runs/$m.cue.err")"
	# Pairs: expect.tsv's "<component>/<transformer name>" against the kernel's objects
	# (component, transformer FQN → name) and the harness's `rendered` keys.
	counts=$(python3 - "$src/.opm_real_expect.tsv" "$ws" "$OUT/runs/$m.kernel.out" "$OUT/runs/$m.cue.out" <<'PY'
import json, sys
exp, ws, kout, cout = sys.argv[1:]
want = {l.split("\t")[1].strip() for l in open(exp) if l.startswith(ws + "\t")}
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
k, c = load(kout), load(cout)
kp = set()
if isinstance(k, dict):
    for o in k.get("objects", []):
        kp.add(o["component"] + "/" + o["transformer"].rsplit("/", 1)[-1].split("@")[0])
# A pair whose transformer outputs an empty list (the HPA transformer without autoscaling)
# renders no object: the harness keeps its key with [], the kernel has nothing to show.
cp = {p for p, v in c.items() if v != []} if isinstance(c, dict) else set()
problems = []
if want - kp:
    problems.append("kernel lacks " + ",".join(sorted(want - kp)))
if k is not None and c is not None and kp != cp:
    problems.append("kernel %s != cue %s" % (sorted(kp), sorted(cp)))
print(len(want), len(kp), len(cp), ";".join(problems) or "-")
PY
)
	read -r ne nk nc problems <<<"$counts"
	status=ok
	if [ "$problems" != "-" ]; then fail "$m: $problems"; status=pairs; fi
	[ "$krc" = 0 ] || status=kernel-failed
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$ne" "$nk" "$nc" "$ks" "$kmb" "$cs" "$cmb" "$status" >> "$OUT/summary.tsv"
done

############################################################################
# 4. an unknown values key
############################################################################
timed unknown-key "$OUT" "$OPM" render "${COORD[web_app]}" --values "$OUT/runs/web_app.values.json" \
	--set colour=blue "${RENDER_FLAGS[@]}"
read -r urc _ _ <<<"$(figures unknown-key)"
if [ "$urc" = 0 ]; then
	fail "an unknown values key rendered"
elif ! grep -q 'values\.colour' "$OUT/runs/unknown-key.err" || ! grep -qE 'module\.cue:[0-9]+:[0-9]+' "$OUT/runs/unknown-key.err"; then
	fail "the unknown values key's error does not name values.colour with a module.cue position: $(head -c 1000 "$OUT/runs/unknown-key.err")"
else
	echo "unknown values key: refused, naming values.colour and $(grep -oE '[^ ]*module\.cue:[0-9]+:[0-9]+' "$OUT/runs/unknown-key.err" | head -1)"
fi

############################################################################
# 5. summary
############################################################################
echo
column -t -s $'\t' "$OUT/summary.tsv"
echo "(kernel: opm-operator render, wall time and peak RSS of the whole process; cue: the harness's"
echo " cue export ./opm-synth-instance -e rendered; goal < 0.5 s and < 100 MB per module)"
echo "results: $OUT"
exit $FAILED
