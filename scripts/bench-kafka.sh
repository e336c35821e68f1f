#!/usr/bin/env bash
# Kafka → W1 → Kafka against Apache Kafka on this machine, all figures from one run:
# a bare rdkafka consumer loop, then eddy at p=1 and p=2 with the sink's three delivery
# guarantees (1 M events, 4 partitions, 10,000 keys, checkpoints every second), the bare
# loop again, then produce-to-readable latency at 5,000 events/s through an exactly-once
# job at p=2. Needs a release build (cargo build --release -p eddy-bench) and
# scripts/install-deps.sh. Prints one line per run; checksums must all be equal.
set -euo pipefail
cd "$(dirname "$0")/.."
B=target/release/eddy-bench
EVENTS=${EVENTS:-1000000}
work=$(mktemp -d /tmp/eddy-bench-kafka.XXXXXX)
trap 'kill $(jobs -p) 2> /dev/null; rm -rf "$work"' EXIT
$B kafka-broker > "$work/broker.txt" &
until grep -q '^brokers=' "$work/broker.txt" 2> /dev/null; do sleep 0.2; done
K=$(sed -n 's/^brokers=//p' "$work/broker.txt")
echo "broker $K started in $(sed -n 's/^started_seconds=//p' "$work/broker.txt") s"
$B kafka-produce --brokers "$K" --topic w1 --partitions 4 --events "$EVENTS" --keys 10000 | tail -1
run() { echo "$1: $($B "${@:2}" 2> "$work/log" | tail -1)"; }
run "bare" api-count --kafka "$K" --input-topic w1 --bare
for p in 1 2; do
  for d in none at-least-once exactly-once; do
    run "p=$p $d" api-count --kafka "$K" --input-topic w1 --output-topic "out-$p-$d" --bounded \
      --delivery "$d" --parallelism "$p" --checkpoint-ms 1000 --checkpoint-dir "$work/chk-$p-$d"
  done
done
run "bare" api-count --kafka "$K" --input-topic w1 --bare
# Empty topics, made with Kafka's own tool: the job must find its input when it starts.
for topic in lat-in lat-out; do
  java -Dlog4j2.level=OFF -cp "${EDDY_KAFKA_LIBS:-$HOME/.cache/eddy/apache-kafka/libs}/*" \
    org.apache.kafka.tools.TopicCommand --bootstrap-server "$K" --create --topic $topic --partitions 4 > /dev/null
done
$B api-count --kafka "$K" --input-topic lat-in --output-topic lat-out --parallelism 2 \
  --delivery exactly-once --checkpoint-ms 1000 --checkpoint-dir "$work/chk-latency" 2> "$work/latency-job.log" &
job=$!
sleep 5
echo "latency at 5000 events/s, exactly-once, p=2: $($B kafka-latency --brokers "$K" --topic lat-in \
  --output-topic lat-out --rate 5000 --events 50000 --keys 10000 2> /dev/null | tr '\n' ' ')"
kill $job
