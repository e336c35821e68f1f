#!/usr/bin/env bash
# Apache Flink 2.3's throughput on the Nexmark benchmark's published SQL queries, local MiniCluster.
#
#   run.sh NEXMARK [--query q0[,q1,...]] [--events N] [--parallelism P[,P2,...]] [--tps T]
#          [--conf KEY=VALUE]... [--published-conf]
#
# NEXMARK is the Nexmark repository (https://github.com/nexmark/nexmark): a checkout or a bare
# git mirror. Nothing of it is copied into eddy: each run extracts nexmark-flink's `nexmark`
# table connector (source, generator, model, NexmarkConfiguration, NexmarkUtils), the UDF
# CountChar and the queries/*.sql into $NEXMARK_FLINK_CACHE/nexmark-<hash>/ (default ~/.cache/eddy-flink-nexmark) and compiles them (once per
# content hash) against Flink 2.3's jars together with NexmarkSqlBench.java.
# Each query runs in its own JVM and prints one line:
#   flink q0 p=1 events=10000000 seconds=X events_per_second=Y wall_seconds=W peak_rss_mib=R ...
# Defaults: --query q0 --events 10000000 --parallelism 1 --tps 10000000 (the value of the
# published benchmark; it sets the event-time spacing, 1e6/T us per event, not a throttle).
# Flink runs with its defaults plus heap state, no checkpoints, UTC; --conf adds Flink options,
# --published-conf the table options of nexmark-flink's conf/config.yaml (mini-batch 2s/50000,
# split distinct aggregates).
# Needs Java 17 and Flink 2.3's jars as cached by shared/flink-oracle/flink-oracle:
# $FLINK_ORACLE_CACHE/flink-2.3.0/pyflink/lib (default ~/.cache/eddy-flink-oracle).
# JVM options: $JAVA_OPTS (default -Xmx8g -XX:+UseG1GC). $NEXMARK_TIMEOUT (seconds): kill a
# query's JVM after that long.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
V="${FLINK_VERSION:-2.3.0}"
CACHE="${FLINK_ORACLE_CACHE:-$HOME/.cache/eddy-flink-oracle}"
LIB="$CACHE/flink-$V/pyflink/lib"
[[ -f "$LIB/flink-dist-$V.jar" ]] || { echo "run.sh: $LIB/flink-dist-$V.jar missing; run shared/flink-oracle/flink-oracle once to fetch the jars" >&2; exit 1; }
[[ $# -ge 1 && "$1" != -* ]] || { sed -n '2,22p' "$0"; exit 2; }
SRC="$1"; shift
QUERIES=q0; EVENTS=10000000; PARS=1; TPS=10000000; CONFS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --query|--queries) QUERIES="$2"; shift 2 ;;
    --events) EVENTS="$2"; shift 2 ;;
    --parallelism) PARS="$2"; shift 2 ;;
    --tps) TPS="$2"; shift 2 ;;
    --conf) CONFS+=("$2"); shift 2 ;;
    --published-conf) CONFS+=(table.exec.mini-batch.enabled=true table.exec.mini-batch.allow-latency=2s
                              table.exec.mini-batch.size=50000 table.optimizer.distinct-agg.split.enabled=true); shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# --- extract the needed part of nexmark-flink ----------------------------------------------
M=nexmark-flink/src/main
J=$M/java/com/github/nexmark/flink
NEEDED=("$J/source" "$J/generator" "$J/model" "$J/udf" "$J/utils/NexmarkUtils.java"
        "$J/NexmarkConfiguration.java" "$M/resources/META-INF/services/org.apache.flink.table.factories.Factory"
        "$M/resources/queries")
STAGE="$(mktemp -d "${TMPDIR:-/tmp}/eddy-nexmark-stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
if [[ "$(git -C "$SRC" rev-parse --is-bare-repository 2>/dev/null || true)" == true ]]; then
  git -C "$SRC" archive HEAD "${NEEDED[@]}" | tar -x -C "$STAGE"
elif [[ -d "$SRC/$M" ]]; then
  for p in "${NEEDED[@]}"; do mkdir -p "$STAGE/$(dirname "$p")"; cp -r "$SRC/$p" "$STAGE/$p"; done
else
  echo "run.sh: $SRC is neither a Nexmark checkout nor a bare mirror of it" >&2; exit 1
fi
# unused by the table connector, and it needs commons-io / a side-input file
rm -f "$STAGE/$J/generator/SideInputGenerator.java"
HASH="$( (cd "$STAGE" && find . -type f | LC_ALL=C sort | xargs sha256sum; sha256sum "$HERE/NexmarkSqlBench.java"; echo "$V") | sha256sum | cut -c1-16)"
WORK="${NEXMARK_FLINK_CACHE:-$HOME/.cache/eddy-flink-nexmark}/nexmark-$HASH"
CP=""; for j in "$LIB"/*.jar; do CP="$CP${CP:+:}$j"; done
if [[ ! -f "$WORK/.ok" ]]; then
  rm -rf "$WORK"; mkdir -p "$WORK/classes"
  cp -r "$STAGE/nexmark-flink" "$WORK/"
  echo "run.sh: compiling the nexmark connector and NexmarkSqlBench into $WORK" >&2
  javac -nowarn -encoding UTF-8 --release 17 -cp "$CP" -d "$WORK/classes" \
    $(find "$WORK/$J" -name '*.java') "$HERE/NexmarkSqlBench.java" 2>&1 | grep -v '^Note:' >&2 || true
  [[ -f "$WORK/classes/NexmarkSqlBench.class" && -f "$WORK/classes/com/github/nexmark/flink/source/NexmarkTableSourceFactory.class" ]] \
    || { echo "run.sh: compilation failed" >&2; exit 1; }
  mkdir -p "$WORK/classes/META-INF/services"
  cp "$WORK/$M/resources/META-INF/services/org.apache.flink.table.factories.Factory" "$WORK/classes/META-INF/services/"
  touch "$WORK/.ok"
fi

# --- run each query in its own JVM ----------------------------------------------------------
IFS=, read -r -a QS <<<"$QUERIES"
IFS=, read -r -a PS <<<"$PARS"
status=0
for P in "${PS[@]}"; do
  for Q in "${QS[@]}"; do
    [[ -f "$WORK/$M/resources/queries/$Q.sql" ]] || { echo "run.sh: no query $Q" >&2; status=1; continue; }
    OUT="$(mktemp -d "${TMPDIR:-/tmp}/eddy-nexmark-out.XXXXXX")"   # q10's filesystem sink
    ${NEXMARK_TIMEOUT:+timeout "$NEXMARK_TIMEOUT"} java ${JAVA_OPTS:--Xmx8g -XX:+UseG1GC} \
      --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
      --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
      -Dlog4j.configurationFile="$HERE/../log4j2.properties" -cp "$WORK/classes:$CP" \
      NexmarkSqlBench "$WORK/$M/resources/queries" "$Q" "$EVENTS" "$P" "$TPS" "$OUT" ${CONFS[@]+"${CONFS[@]}"} || status=1
    rm -rf "$OUT"
  done
done
exit $status
