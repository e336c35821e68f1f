#!/usr/bin/env bash
# What eddy's build and tests need besides Rust, on a fresh Debian machine:
# - librocksdb-dev and libclang-dev: the RocksDB state backend links to the system's
#   RocksDB 7.8 (the rocksdb crate's bundled C++ build takes over half an hour here);
# - moto[server] from PyPI: an S3-compatible server the checkpoint-storage tests start.
# Installs only what is missing; safe to run again.
set -euo pipefail
need=()
[ -e /usr/include/rocksdb/c.h ] || need+=(librocksdb-dev)
compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" > /dev/null || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" > /dev/null
fi
command -v moto_server > /dev/null || python3 -m pip install --quiet "moto[server]"
