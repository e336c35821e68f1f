#!/usr/bin/env bash
# Apache Flink 2.3 runs of eddy's workloads W3 (window), W6 (interval-join) and W7 (window-join), local MiniCluster.
#
#   run.sh window|interval-join|window-join [--events N] [--keys K] [--parallelism P] [--interval-ms J] [--window-ms W]
#   run.sh reference-interval|reference-window [...]   expected emitted/checksum computed without Flink
#
# Needs Java 17 and Flink 2.3's jars as cached by shared/flink-oracle/flink-oracle (run it once
# to download them): $FLINK_ORACLE_CACHE/flink-2.3.0/pyflink/lib (default ~/.cache/eddy-flink-oracle).
# JVM options: $JAVA_OPTS (default -Xms4g -Xmx4g -XX:+UseG1GC).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
V="${FLINK_VERSION:-2.3.0}"
CACHE="${FLINK_ORACLE_CACHE:-$HOME/.cache/eddy-flink-oracle}"
LIB="$CACHE/flink-$V/pyflink/lib"
[[ -f "$LIB/flink-dist-$V.jar" ]] || { echo "run.sh: $LIB/flink-dist-$V.jar missing; run shared/flink-oracle/flink-oracle once to fetch the jars" >&2; exit 1; }
[[ $# -ge 1 ]] || { sed -n '2,10p' "$0"; exit 2; }
CP="$LIB/flink-dist-$V.jar"; for j in "$LIB"/log4j-*.jar; do CP="$CP:$j"; done
CLASSES="${TMPDIR:-/tmp}/eddy-flink-join-bench-classes"
if [[ ! -f "$CLASSES/FlinkJoinBench.class" || "$HERE/FlinkJoinBench.java" -nt "$CLASSES/FlinkJoinBench.class" ]]; then
  rm -rf "$CLASSES"; mkdir -p "$CLASSES"
  javac -nowarn -encoding UTF-8 --release 17 -cp "$CP" -d "$CLASSES" "$HERE/FlinkJoinBench.java" >&2
fi
exec java ${JAVA_OPTS:--Xms4g -Xmx4g -XX:+UseG1GC} \
  --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
  -Dlog4j.configurationFile="$HERE/log4j2.properties" -cp "$CLASSES:$CP" FlinkJoinBench "$@"
