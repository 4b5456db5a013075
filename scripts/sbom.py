#!/usr/bin/env python3
"""Writes a CycloneDX 1.5 SBOM (JSON) of the opm-operator binary.

usage: sbom.py BINARY OUT.json

What it lists: every package compiled into the binary, i.e. the transitive *normal* dependencies of
the `opm-operator` package for the host platform, as `cargo metadata` resolves them from
Cargo.lock (build-only and dev dependencies are not in the binary and are left out). Each component
carries its purl (`pkg:cargo/NAME@VERSION`), its SPDX license expression as the crate declares it,
and the SHA-256 checksum Cargo.lock records for crates.io sources; workspace crates are marked with
the property `opm:workspace`. The metadata component is the binary itself with its SHA-256. The
timestamp is the binary's build date (from `--version`), so one commit gives one SBOM.
"""

import hashlib
import json
import re
import subprocess
import sys
import tomllib
import uuid


def host_triple():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("host: "):
            return line.split(": ", 1)[1].strip()
    raise SystemExit("sbom: rustc -vV printed no host triple")


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: sbom.py BINARY OUT.json")
    binary, out_path = sys.argv[1], sys.argv[2]

    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked",
             "--filter-platform", host_triple()],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    with open("Cargo.lock", "rb") as f:
        lock = tomllib.load(f)
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock.get("package", [])}

    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    workspace = set(meta["workspace_members"])
    root = next(pid for pid in workspace if packages[pid]["name"] == "opm-operator")

    # Transitive normal dependencies of the root (what is linked into the binary).
    seen, stack, edges = set(), [root], {}
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        deps = []
        for d in nodes[pid]["deps"]:
            if any(k.get("kind") is None for k in d["dep_kinds"]):
                deps.append(d["pkg"])
                stack.append(d["pkg"])
        edges[pid] = sorted(set(deps))

    def purl(p):
        return f"pkg:cargo/{p['name']}@{p['version']}"

    components = []
    for pid in sorted(seen - {root}, key=lambda i: (packages[i]["name"], packages[i]["version"])):
        p = packages[pid]
        c = {"type": "library", "bom-ref": purl(p), "name": p["name"], "version": p["version"],
             "purl": purl(p)}
        if p.get("description"):
            c["description"] = " ".join(p["description"].split())
        if p.get("license"):
            c["licenses"] = [{"expression": p["license"]}]
        sha = checksums.get((p["name"], p["version"]))
        if sha:
            c["hashes"] = [{"alg": "SHA-256", "content": sha}]
        if pid in workspace:
            c["properties"] = [{"name": "opm:workspace", "value": "true"}]
        components.append(c)

    version_line = subprocess.run([binary, "--version"], check=True, capture_output=True,
                                  text=True).stdout.strip()
    m = re.match(r"^opm-operator (\S+) \(commit ([^,]+), built ([^)]+)\)$", version_line)
    if not m:
        raise SystemExit(f"sbom: unexpected --version output: {version_line!r}")
    version, commit, built = m.groups()
    with open(binary, "rb") as f:
        binary_sha = hashlib.sha256(f.read()).hexdigest()

    rp = packages[root]
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        # One serial number per binary: derived from its hash, so a rebuild of one commit matches.
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'opm-operator:' + binary_sha)}",
        "version": 1,
        "metadata": {
            "timestamp": built if built != "unknown" else "1970-01-01T00:00:00Z",
            "tools": {"components": [{"type": "application", "name": "opm-operator scripts/sbom.py"}]},
            "component": {
                "type": "application", "bom-ref": purl(rp), "name": rp["name"], "version": version,
                "purl": purl(rp), "licenses": [{"expression": rp.get("license") or "NOASSERTION"}],
                "hashes": [{"alg": "SHA-256", "content": binary_sha}],
                "properties": [{"name": "opm:git-commit", "value": commit}],
            },
        },
        "components": components,
        "dependencies": [
            {"ref": purl(packages[pid]), "dependsOn": [purl(packages[d]) for d in edges[pid]]}
            for pid in sorted(edges, key=lambda i: (packages[i]["name"], packages[i]["version"]))
        ],
    }
    with open(out_path, "w") as f:
        json.dump(bom, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"sbom: {out_path} ({len(components)} components)")


if __name__ == "__main__":
    main()
