#!/usr/bin/env bash
# MSRV check: no dependency in Cargo.lock asks for a newer Rust than the workspace's
# `rust-version`. The workspace's own code is held to it by clippy's `incompatible_msrv` lint
# (standard-library items stabilised after `rust-version` are warnings, and CI denies
# warnings); only one toolchain is installed on these machines, so the build itself cannot
# be run on the older compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
m = json.load(sys.stdin)
ours = {p["id"]: p for p in m["packages"] if p["id"] in set(m["workspace_members"])}
def v(s):
    parts = [int(x) for x in s.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))
msrv = {p.get("rust_version") for p in ours.values()} - {None}
if len(msrv) != 1:
    sys.exit(f"msrv: the workspace members disagree on rust-version: {sorted(msrv)}")
msrv = msrv.pop()
newer = sorted((p["rust_version"], p["name"], p["version"]) for p in m["packages"]
               if p["id"] not in ours and p.get("rust_version") and v(p["rust_version"]) > v(msrv))
if newer:
    for r, n, ver in newer:
        print(f"msrv: {n} {ver} needs Rust {r}, above the workspace rust-version {msrv}", file=sys.stderr)
    sys.exit(1)
deps = [p for p in m["packages"] if p["id"] not in ours and p.get("rust_version")]
top = max(deps, key=lambda p: v(p["rust_version"]))
name, top_rv = top["name"], top["rust_version"]
print(f"msrv: rust-version {msrv}; {len(deps)} dependencies declare one, the highest {name} {top_rv}")
'
