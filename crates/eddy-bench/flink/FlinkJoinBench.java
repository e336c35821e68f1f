import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.JoinFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * eddy benchmark workloads W6 (interval-join) and W7 (window-join) on Apache Flink 2.3 (DataStream API,
 * local MiniCluster, heap state backend, no checkpointing).
 *
 *   FlinkJoinBench interval-join|window-join|window|reference-interval|reference-window
 *       [--events N] [--keys K] [--parallelism P] [--interval-ms J] [--window-ms W]
 *
 * The reference-* modes compute the expected emitted count and checksum without Flink (plain loops),
 * as a cross-check of the job's output.
 */
public class FlinkJoinBench {

    static long splitmix64(long x) {
        long z = x + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static long key(long i, long s, long keys) {
        long h = splitmix64(i ^ (s * 0x100000001B3L));
        return Long.remainderUnsigned(h, keys);
    }

    static long pairHash(long a, long b) {
        return splitmix64((a << 32) ^ b);
    }

    /** Event i of stream s -> (key, i). */
    static final class ToEvent implements MapFunction<Long, Tuple2<Long, Long>> {
        final long s, keys;
        ToEvent(long s, long keys) { this.s = s; this.keys = keys; }
        @Override public Tuple2<Long, Long> map(Long i) { return Tuple2.of(key(i, s, keys), i); }
    }

    static final class ByKey implements KeySelector<Tuple2<Long, Long>, Long> {
        @Override public Long getKey(Tuple2<Long, Long> e) { return e.f0; }
    }

    static final class Ts implements SerializableTimestampAssigner<Tuple2<Long, Long>> {
        @Override public long extractTimestamp(Tuple2<Long, Long> e, long recordTs) { return e.f1; }
    }

    static final class IntervalEmit extends ProcessJoinFunction<Tuple2<Long, Long>, Tuple2<Long, Long>, Tuple3<Long, Long, Long>> {
        @Override public void processElement(Tuple2<Long, Long> a, Tuple2<Long, Long> b, Context ctx,
                                             Collector<Tuple3<Long, Long, Long>> out) {
            out.collect(Tuple3.of(a.f0, a.f1, b.f1));
        }
    }

    static final class WindowEmit implements JoinFunction<Tuple2<Long, Long>, Tuple2<Long, Long>, Tuple3<Long, Long, Long>> {
        @Override public Tuple3<Long, Long, Long> join(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple3.of(a.f0, a.f1, b.f1);
        }
    }

    /** W3: a count per key and window. */
    static final class Count implements AggregateFunction<Tuple2<Long, Long>, Long, Long> {
        @Override public Long createAccumulator() { return 0L; }
        @Override public Long add(Tuple2<Long, Long> e, Long acc) { return acc + 1; }
        @Override public Long getResult(Long acc) { return acc; }
        @Override public Long merge(Long a, Long b) { return a + b; }
    }

    /** W3: (key, window start, count). */
    static final class CountEmit extends ProcessWindowFunction<Long, Tuple3<Long, Long, Long>, Long, TimeWindow> {
        @Override public void process(Long key, Context ctx, Iterable<Long> counts, Collector<Tuple3<Long, Long, Long>> out) {
            for (Long c : counts) out.collect(Tuple3.of(key, ctx.window().getStart(), c));
        }
    }

    /** Sums splitmix64((a << 32) ^ b) (wrapping) and counts pairs (W3: splitmix64(key ^ start) * count per
     * window); combined over subtasks by accumulators. */
    static final class ChecksumSink extends RichSinkFunction<Tuple3<Long, Long, Long>> {
        final boolean windowCounts;
        ChecksumSink(boolean windowCounts) { this.windowCounts = windowCounts; }
        private transient LongCounter checksum, emitted;
        @Override public void open(OpenContext ctx) {
            checksum = new LongCounter();
            emitted = new LongCounter();
            getRuntimeContext().addAccumulator("checksum", checksum);
            getRuntimeContext().addAccumulator("emitted", emitted);
        }
        @Override public void invoke(Tuple3<Long, Long, Long> t, Context ctx) {
            checksum.add(windowCounts ? splitmix64(t.f0 ^ t.f1) * t.f2 : pairHash(t.f1, t.f2));
            emitted.add(1L);
        }
    }

    static DataStream<Tuple2<Long, Long>> stream(StreamExecutionEnvironment env, long s, long events, long keys, int sp) {
        TypeInformation<Tuple2<Long, Long>> t = Types.TUPLE(Types.LONG, Types.LONG);
        return env.fromSequence(0, events - 1).setParallelism(sp).name("source-" + s)
            .map(new ToEvent(s, keys)).returns(t).setParallelism(sp).name("event-" + s)
            .assignTimestampsAndWatermarks(WatermarkStrategy.<Tuple2<Long, Long>>forMonotonousTimestamps()
                .withTimestampAssigner(new Ts())).setParallelism(sp).name("watermarks-" + s);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) usage();
        String workload = argv[0];
        Map<String, String> flags = new HashMap<>();
        for (int k = 1; k < argv.length; k += 2) {
            if (!argv[k].startsWith("--") || k + 1 >= argv.length) usage();
            flags.put(argv[k].substring(2), argv[k + 1]);
        }
        long events = Long.parseLong(flags.getOrDefault("events", "1000000"));
        long keys = Long.parseLong(flags.getOrDefault("keys", "10000"));
        int p = Integer.parseInt(flags.getOrDefault("parallelism", "1"));
        long j = Long.parseLong(flags.getOrDefault("interval-ms", "100"));
        long w = Long.parseLong(flags.getOrDefault("window-ms", "1000"));
        // diagnostic only (not part of the workload definition): parallelism of the source/map/watermark chain
        int sp = Integer.parseInt(flags.getOrDefault("source-parallelism", Integer.toString(p)));
        for (String f : flags.keySet())
            if (!List.of("events", "keys", "parallelism", "interval-ms", "window-ms", "source-parallelism").contains(f)) usage();

        if (workload.startsWith("reference-")) { reference(workload, events, keys, j, w); return; }

        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_PORT, "0");
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);

        DataStream<Tuple2<Long, Long>> left = stream(env, 1, events, keys, sp);
        DataStream<Tuple2<Long, Long>> right = workload.equals("window") ? null : stream(env, 2, events, keys, sp);
        TypeInformation<Tuple3<Long, Long, Long>> out = Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);
        DataStream<Tuple3<Long, Long, Long>> joined;
        switch (workload) {
            case "interval-join": {
                KeyedStream<Tuple2<Long, Long>, Long> l = left.keyBy(new ByKey());
                KeyedStream<Tuple2<Long, Long>, Long> r = right.keyBy(new ByKey());
                joined = l.intervalJoin(r).between(Duration.ofMillis(-j), Duration.ofMillis(j))
                    .process(new IntervalEmit()).returns(out).name("interval-join");
                break;
            }
            case "window-join":
                joined = left.join(right).where(new ByKey()).equalTo(new ByKey())
                    .window(TumblingEventTimeWindows.of(Duration.ofMillis(w)))
                    .apply(new WindowEmit(), out);
                break;
            case "window":
                joined = left.keyBy(new ByKey()).window(TumblingEventTimeWindows.of(Duration.ofMillis(w)))
                    .aggregate(new Count(), new CountEmit(), Types.LONG, Types.LONG, out).name("window-count");
                break;
            default: usage(); return;
        }
        joined.addSink(new ChecksumSink(workload.equals("window"))).name("checksum-sink");

        System.out.println("workload=" + workload + " events_per_stream=" + events + " keys=" + keys
            + " parallelism=" + p + (sp != p ? " source_parallelism=" + sp : "") + (workload.equals("interval-join") ? " interval_ms=" + j : " window_ms=" + w)
            + " flink=" + org.apache.flink.runtime.util.EnvironmentInformation.getVersion());
        List<String> gcs = new ArrayList<>();
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) gcs.add(gc.getName());
        System.out.println("jvm=" + System.getProperty("java.vm.version") + " max_heap_mb="
            + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " gc=" + String.join(",", gcs)
            + " jvm_args=" + String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments()));

        long gc0 = gcMillis(), gcn0 = gcCount();
        long t0 = System.nanoTime();
        JobExecutionResult res = env.execute("eddy-bench " + workload);
        double wall = (System.nanoTime() - t0) / 1e9;
        double seconds = res.getNetRuntime() / 1000.0;
        long checksum = res.<Long>getAccumulatorResult("checksum");
        long emitted = res.<Long>getAccumulatorResult("emitted");
        System.out.println("gc_count=" + (gcCount() - gcn0) + " gc_ms=" + (gcMillis() - gc0));
        System.out.printf("execute_wall_seconds=%.3f%n", wall);
        System.out.println("emitted=" + emitted);
        long total = workload.equals("window") ? events : 2 * events;
        System.out.printf("events=%d seconds=%.3f eps=%.0f checksum=%s%n",
            total, seconds, total / seconds, Long.toUnsignedString(checksum));
        System.exit(0);
    }

    static long gcMillis() {
        long t = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) t += Math.max(0, gc.getCollectionTime());
        return t;
    }

    static long gcCount() {
        long t = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) t += Math.max(0, gc.getCollectionCount());
        return t;
    }

    /** Expected output without Flink: pairs (a, b) of equal key with |a - b| <= J (interval) or a / W == b / W (window). */
    static void reference(String mode, long events, long keys, long j, long w) {
        int n = Math.toIntExact(events);
        long[] k1 = new long[n], k2 = new long[n];
        for (int i = 0; i < n; i++) { k1[i] = key(i, 1, keys); k2[i] = key(i, 2, keys); }
        long checksum = 0, emitted = 0;
        if (mode.equals("reference-interval")) {
            for (long a = 0; a < n; a++)
                for (long b = Math.max(0, a - j); b <= Math.min(n - 1, a + j); b++)
                    if (k1[(int) a] == k2[(int) b]) { checksum += pairHash(a, b); emitted++; }
        } else if (mode.equals("reference-window")) {
            // group right events of each window by key, then scan left events
            for (long start = 0; start < n; start += w) {
                int end = (int) Math.min(n, start + w);
                Map<Long, List<Long>> byKey = new HashMap<>();
                for (int b = (int) start; b < end; b++) byKey.computeIfAbsent(k2[b], x -> new ArrayList<>()).add((long) b);
                for (int a = (int) start; a < end; a++) {
                    List<Long> bs = byKey.get(k1[a]);
                    if (bs != null) for (long b : bs) { checksum += pairHash(a, b); emitted++; }
                }
            }
        } else usage();
        System.out.println("emitted=" + emitted);
        System.out.println("events=" + 2 * events + " seconds=0 eps=0 checksum=" + Long.toUnsignedString(checksum));
    }

    static void usage() {
        System.err.println("usage: FlinkJoinBench interval-join|window-join|window|reference-interval|reference-window"
            + " [--events N] [--keys K] [--parallelism P] [--interval-ms J] [--window-ms W] [--source-parallelism S (diagnostic)]");
        System.exit(2);
    }
}
