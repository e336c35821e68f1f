#!/usr/bin/env bash
# What eddy's tests need besides Rust, on a fresh Debian machine (the main example needs
# none of it):
# - librocksdb-dev: the RocksDB state backend links to the system's RocksDB 7.8 (the
#   rocksdb crate's bundled C++ build takes over half an hour here);
# - libclang-dev: bindgen generates librocksdb-sys's bindings through libclang;
# - moto[server] from PyPI: an S3-compatible server the checkpoint-storage tests start;
# - cmake and libcurl4-openssl-dev: the rdkafka crate builds librdkafka from its bundled
#   sources with cmake (Kafka connector, crate eddy-kafka);
# - Apache Kafka (the broker the Kafka tests and benchmarks start, and its Java console
#   consumer), its jars copied from Maven Central by Maven (scripts/kafka/pom.xml) into
#   ~/.cache/eddy/apache-kafka/libs (EDDY_KAFKA_LIBS elsewhere); runs on the machine's Java 17;
# - chromium: the dashboard test loads the dashboard in headless Chromium;
# - etcd-server: the high-availability tests start etcd for the JobManagers' election.
# Installs only what is missing; safe to run again.
set -euo pipefail
need=()
{ [ -e /usr/include/rocksdb/c.h ] && compgen -G "/usr/lib/*/librocksdb.so" > /dev/null; } || need+=(librocksdb-dev)
# bindgen loads libclang itself (libclang.so*) and needs clang's own headers (stddef.h):
# libclang-cpp, which other packages bring, is another library and does not count.
{ compgen -G "/usr/lib/llvm-*/lib/libclang.so*" > /dev/null \
  && compgen -G "/usr/lib/llvm-*/lib/clang/*/include/stddef.h" > /dev/null; } || need+=(libclang-dev)
command -v cmake > /dev/null || need+=(cmake)
[ -e /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -e /usr/include/curl/curl.h ] \
  || compgen -G "/usr/include/*/curl/curl.h" > /dev/null || need+=(libcurl4-openssl-dev)
command -v chromium > /dev/null || need+=(chromium)
command -v etcd > /dev/null || need+=(etcd-server)
# Apache Kafka runs on Java 17 and is fetched by Maven (both on the project's machines);
# the Kafka tests' watchdog uses pkill.
command -v java > /dev/null || need+=(openjdk-17-jre-headless)
command -v mvn > /dev/null || need+=(maven)
command -v pkill > /dev/null || need+=(procps)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" > /dev/null
fi
if ! { command -v moto_server > /dev/null && python3 -c "import moto.server" 2> /dev/null; }; then
  echo "install-deps: installing moto[server]"
  python3 -m pip install --quiet "moto[server]"
fi
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$(dirname "$0")/kafka/pom.xml")
kafka_libs=${EDDY_KAFKA_LIBS:-$HOME/.cache/eddy/apache-kafka/libs}
if [ ! -e "$kafka_libs/kafka_2.13-$kafka_version.jar" ]; then
  echo "install-deps: copying Apache Kafka $kafka_version from Maven Central into $kafka_libs"
  # Into a fresh folder first: an interrupted copy must not pass for a complete one.
  rm -rf "$kafka_libs.partial"
  mvn --batch-mode --quiet --file "$(dirname "$0")/kafka/pom.xml" \
    dependency:copy-dependencies -DoutputDirectory="$kafka_libs.partial"
  rm -rf "$kafka_libs"
  mv "$kafka_libs.partial" "$kafka_libs"
fi
