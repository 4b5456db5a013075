#!/usr/bin/env bash
# Builds the opm-operator image on this machine with no network and no daemon, and writes it as an
# OCI archive: target/image/opm-operator.oci.tar (plus the CycloneDX SBOM of the binary beside it,
# target/image/opm-operator.cdx.json, and image.env: the reference, digest and labels).
#
#   bash scripts/image.sh                      # build the archive
#   bash scripts/image.sh --push REF           # also push it, e.g. 127.0.0.1:5000/opm/opm-operator:dev
#                                              # (--tls-verify=false for 127.0.0.1 / localhost)
#
# Where a registry is reachable, `docker build -f deploy/image/Containerfile .` builds the same image
# on distroless. Here no base image can be pulled, so the base is assembled from this machine's own
# files, exactly what distroless "cc" provides and nothing more: the shared libraries `ldd` lists
# for the binary, CA certificates, /etc/passwd and /etc/group with the nonroot user (65532), a
# minimal nsswitch.conf, an empty /tmp. No shell, no package manager. Then deploy/image/Containerfile
# is built on that base with Debian's buildah (as root: --storage-driver vfs --isolation chroot).
#
# Idempotent: each run rebuilds the release binary (incremental), replaces the archive, and removes
# the images it created from buildah's storage. Set OPM_IMAGE_DIR to write elsewhere, and
# OPM_IMAGE_BINARY=target/debug/opm-operator to package an already built binary instead of the
# release build (for iterating on the install test; CI and releases use the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

push_ref=""
tls_verify=true
while [ $# -gt 0 ]; do
  case "$1" in
    --push) push_ref="$2"; shift 2 ;;
    --tls-verify=*) tls_verify="${1#--tls-verify=}"; shift ;;
    *) echo "usage: $0 [--push REF] [--tls-verify=false]" >&2; exit 2 ;;
  esac
done

sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v python3 >/dev/null 2>&1 || need+=(python3)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -gt 0 ]; then
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 update -qq
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >/dev/null
fi

target_dir=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
out=${OPM_IMAGE_DIR:-$target_dir/image}
mkdir -p "$out"

if [ -n "${OPM_IMAGE_BINARY:-}" ]; then
  bin=$(realpath "$OPM_IMAGE_BINARY")
else
  cargo build --release --locked --bin opm-operator
  bin="$target_dir/release/opm-operator"
fi

# Version, commit and date as the binary reports them, so labels and --version agree.
ver_line=$("$bin" --version)             # opm-operator 0.1.0 (commit <sha>, built <date>)
version=$(sed -E 's/^opm-operator ([^ ]+) .*/\1/' <<<"$ver_line")
revision=$(sed -E 's/.*\(commit ([^,]+),.*/\1/' <<<"$ver_line")
created=$(sed -E 's/.*, built ([^)]+)\)$/\1/' <<<"$ver_line")

# --- the base root filesystem ---------------------------------------------------------------
work="$out/work"
rm -rf "$work"
base="$work/base"
ctx="$work/context"
mkdir -p "$base" "$ctx"
# Shared libraries the dynamic loader needs (resolved through symlinks, at their listed paths).
for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
  cp -L --parents "$lib" "$base/"
done
mkdir -p "$base/etc/ssl/certs" "$base/tmp" "$base/home/nonroot"
cp -L /etc/ssl/certs/ca-certificates.crt "$base/etc/ssl/certs/ca-certificates.crt"
cat >"$base/etc/passwd" <<'EOT'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOT
cat >"$base/etc/group" <<'EOT'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOT
printf 'hosts: files dns\n' >"$base/etc/nsswitch.conf"
chmod 1777 "$base/tmp"
chown 65532:65532 "$base/home/nonroot"
cp "$bin" "$ctx/opm-operator"

# --- buildah ------------------------------------------------------------------------------
B=(buildah --storage-driver vfs)
base_ref="localhost/opm-operator-base:local"
image_ref="localhost/opm-operator:$version"
cleanup() {
  "${B[@]}" rm --all >/dev/null 2>&1 || true
  "${B[@]}" rmi -f "$image_ref" "$base_ref" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

ctr=$("${B[@]}" from scratch)
"${B[@]}" copy --quiet "$ctr" "$base/" / >/dev/null
"${B[@]}" commit --quiet --rm "$ctr" "$base_ref" >/dev/null

"${B[@]}" build --quiet --isolation chroot --pull=never \
  --timestamp "$(date -d "$created" +%s 2>/dev/null || date +%s)" \
  -f deploy/image/Containerfile \
  --build-arg BASE="$base_ref" \
  --build-arg BINARY=opm-operator \
  --build-arg VERSION="$version" \
  --build-arg REVISION="$revision" \
  --build-arg CREATED="$created" \
  -t "$image_ref" "$ctx" >/dev/null

archive="$out/opm-operator.oci.tar"
rm -f "$archive"
"${B[@]}" push --quiet --compression-format gzip "$image_ref" "oci-archive:$archive:opm-operator:$version"
if [ -n "$push_ref" ]; then
  "${B[@]}" push --quiet --tls-verify="$tls_verify" "$image_ref" "docker://$push_ref"
  echo "image: pushed $push_ref"
fi

python3 scripts/sbom.py "$bin" "$out/opm-operator.cdx.json"
rm -rf "$work"

digest=$(tar -xOf "$archive" index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["digest"])')
cat >"$out/image.env" <<EOT
OPM_IMAGE_ARCHIVE=$archive
OPM_IMAGE_REF=opm-operator:$version
OPM_IMAGE_MANIFEST_DIGEST=$digest
OPM_IMAGE_VERSION=$version
OPM_IMAGE_REVISION=$revision
OPM_IMAGE_CREATED=$created
EOT
echo "image: $archive ($(du -h "$archive" | cut -f1), manifest $digest), opm-operator $version commit $revision"
