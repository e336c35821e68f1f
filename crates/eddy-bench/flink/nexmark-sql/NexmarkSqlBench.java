import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;

/**
 * Runs one published Nexmark SQL query (nexmark-flink/src/main/resources/queries) on Flink's
 * local MiniCluster: streaming mode, heap state, no checkpoints. Executes ddl_gen.sql,
 * ddl_views.sql and qN.sql with the placeholders substituted, waits for the INSERT job to end
 * and prints one result line:
 *
 *   flink qN p=P events=N seconds=S events_per_second=E wall_seconds=W peak_rss_mib=R ...
 *
 * seconds is the job's net runtime (JobExecutionResult#getNetRuntime, submission to end);
 * wall_seconds also counts planning (from executeSql to the job's end); peak_rss_mib is the
 * JVM's VmHWM at the end (the MiniCluster runs inside this JVM).
 *
 *   java ... NexmarkSqlBench QUERIES_DIR QUERY EVENTS PARALLELISM TPS NEXMARK_DIR [KEY=VALUE ...]
 *
 * KEY=VALUE pairs are extra Flink configuration (e.g. table.exec.mini-batch.enabled=true).
 */
public class NexmarkSqlBench {

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: NexmarkSqlBench QUERIES_DIR QUERY EVENTS PARALLELISM TPS NEXMARK_DIR [KEY=VALUE ...]");
            System.exit(2);
        }
        Path queries = Paths.get(args[0]);
        String query = args[1];
        long events = Long.parseLong(args[2]);
        int parallelism = Integer.parseInt(args[3]);
        long tps = Long.parseLong(args[4]);
        String nexmarkDir = args[5];

        Map<String, String> vars = new LinkedHashMap<>();
        vars.put("TPS", Long.toString(tps));
        vars.put("EVENTS_NUM", Long.toString(events));
        vars.put("PERSON_PROPORTION", "1");
        vars.put("AUCTION_PROPORTION", "3");
        vars.put("BID_PROPORTION", "46");
        vars.put("NEXMARK_TABLE", "datagen");
        vars.put("NEXMARK_DIR", nexmarkDir);
        vars.put("SUBMIT_TIME", Long.toString(System.currentTimeMillis()));
        // q13's side input, as the benchmark's side_input_gen.sh writes it: "i,i" for i < 10000.
        vars.put("FLINK_HOME", nexmarkDir);
        StringBuilder side = new StringBuilder();
        for (int i = 0; i < 10000; i++) {
            side.append(i).append(',').append(i).append('\n');
        }
        Files.createDirectories(Path.of(nexmarkDir, "data"));
        Files.write(Path.of(nexmarkDir, "data", "side_input.txt"), side.toString().getBytes(StandardCharsets.UTF_8));

        List<String> statements = new ArrayList<>();
        for (String file : new String[] {"ddl_gen.sql", "ddl_views.sql", query + ".sql"}) {
            String text = new String(Files.readAllBytes(queries.resolve(file)), StandardCharsets.UTF_8);
            if (file.equals("q23.sql")) {
                // Flink's parser refuses the published file's A.dateTime without backticks.
                text = text.replace("A.dateTime", "A.`dateTime`");
            }
            statements.addAll(splitStatements(substitute(text, vars, file)));
        }

        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_PORT, "0");
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.setString("execution.runtime-mode", "streaming");
        conf.setString("parallelism.default", Integer.toString(parallelism));
        conf.setString("table.local-time-zone", "UTC");
        StringBuilder extra = new StringBuilder();
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("not KEY=VALUE: " + args[i]);
            }
            conf.setString(args[i].substring(0, eq), args[i].substring(eq + 1));
            extra.append(" conf:").append(args[i]);
        }
        TableEnvironment tEnv = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());

        System.err.println("jvm=" + System.getProperty("java.vm.version") + " max_heap_mib="
                + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " cpus="
                + Runtime.getRuntime().availableProcessors());

        int inserts = 0;
        for (String stmt : statements) {
            boolean isInsert = stmt.trim().toUpperCase().startsWith("INSERT");
            if (!isInsert) {
                tEnv.executeSql(stmt);
                continue;
            }
            inserts++;
            long gc0 = gcMillis(), gcn0 = gcCount();
            long t0 = System.nanoTime();
            TableResult result = tEnv.executeSql(stmt);
            JobClient client = result.getJobClient().orElseThrow(() -> new IllegalStateException("no job"));
            JobExecutionResult res = client.getJobExecutionResult().get();
            double wall = (System.nanoTime() - t0) / 1e9;
            double seconds = res.getNetRuntime() / 1000.0;
            System.out.printf("flink %s p=%d events=%d seconds=%.3f events_per_second=%.0f"
                            + " wall_seconds=%.3f peak_rss_mib=%d max_heap_mib=%d gc_ms=%d gc_count=%d tps=%d%s%n",
                    query, parallelism, events, seconds, events / seconds, wall, peakRssMib(),
                    Runtime.getRuntime().maxMemory() / (1024 * 1024), gcMillis() - gc0, gcCount() - gcn0, tps, extra);
            System.out.flush();
        }
        if (inserts != 1) {
            throw new IllegalStateException(query + ": expected one INSERT, found " + inserts);
        }
        System.exit(0);
    }

    static String substitute(String text, Map<String, String> vars, String file) {
        Matcher m = Pattern.compile("\\$\\{([A-Z_]+)\\}").matcher(text);
        StringBuilder sb = new StringBuilder();
        while (m.find()) {
            String v = vars.get(m.group(1));
            if (v == null) {
                throw new IllegalArgumentException(file + ": no value for ${" + m.group(1) + "}");
            }
            m.appendReplacement(sb, Matcher.quoteReplacement(v));
        }
        m.appendTail(sb);
        return sb.toString();
    }

    /** Splits a SQL script on ';' outside quotes, dropping '--' comments outside quotes. */
    static List<String> splitStatements(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        char quote = 0;
        for (int i = 0; i < script.length(); i++) {
            char c = script.charAt(i);
            if (quote != 0) {
                cur.append(c);
                if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '`' || c == '"') {
                quote = c;
                cur.append(c);
            } else if (c == '-' && i + 1 < script.length() && script.charAt(i + 1) == '-') {
                while (i < script.length() && script.charAt(i) != '\n') {
                    i++;
                }
                cur.append('\n');
            } else if (c == ';') {
                if (!cur.toString().isBlank()) {
                    out.add(cur.toString().trim());
                }
                cur.setLength(0);
            } else {
                cur.append(c);
            }
        }
        if (!cur.toString().isBlank()) {
            out.add(cur.toString().trim());
        }
        return out;
    }

    static long peakRssMib() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024;
                }
            }
        } catch (IOException | NumberFormatException e) {
            // not Linux
        }
        return -1;
    }

    static long gcMillis() {
        long t = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            t += Math.max(0, gc.getCollectionTime());
        }
        return t;
    }

    static long gcCount() {
        long n = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            n += Math.max(0, gc.getCollectionCount());
        }
        return n;
    }
}
