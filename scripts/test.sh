#!/usr/bin/env bash
# The test command of the README: installs what the tests need, then runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo test --workspace "$@"
