#!/usr/bin/env bash
# Checks that the workspace's `rust-version` is true: no dependency in Cargo.lock needs a
# newer Rust. (Uses of newer std APIs in eddy's own code are caught by clippy's
# `incompatible_msrv` lint, which reads the same field; every crate inherits it.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
meta = json.load(sys.stdin)
def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))
root = next(p for p in meta["packages"] if p["name"] == "eddy")
declared = root["rust_version"]
newer = sorted(
    (p["rust_version"], p["name"], p["version"])
    for p in meta["packages"]
    if p.get("rust_version") and version(p["rust_version"]) > version(declared)
)
if newer:
    for needs, name, ver in newer:
        print(f"{name} {ver} needs Rust {needs}", file=sys.stderr)
    sys.exit(f"rust-version is {declared} in Cargo.toml, but the dependencies above need a newer Rust: raise it")
print(f"rust-version {declared}: every dependency builds with it")
'
