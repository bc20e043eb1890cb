/*
 * Kafka's side of bench/compare.py: the storage-layer workloads run through Apache Kafka's own log
 * classes (kafka-storage 4.3.1: UnifiedLog, LogSegment, Cleaner), in process, without a broker or a
 * network. Ours, not Kafka's; bench/compare_processes.py compiles it at run time with
 *     javac -cp "<libs>/*" -d <cache> KafkaLogBench.java
 * (the .class files go to a cache outside the repository) and runs one subcommand per JVM:
 *
 *   append  --dir D --size-bytes N [--seed S] [--warmup-bytes W]
 *       A fresh one-partition log D/bench-0 (default topic configs: segment.bytes 1 GiB, no fsync),
 *       recovery-point checkpoint 0, then N bytes of 16 x 1 KiB-record uncompressed v2 batches
 *       (a pool of 64 distinct batches, round-robin) through UnifiedLog.appendAsLeader. Prints one
 *       JSON line, then waits for the parent's SIGKILL (nothing flushes or checkpoints after the
 *       appends, so the next open must recover from offset 0).
 *   open    --dir D [--reads R] [--fetch-bytes B]
 *       What Kafka's LogManager does for one log directory: read .kafka_cleanshutdown (and delete
 *       it), recovery-point-offset-checkpoint and log-start-offset-checkpoint, then UnifiedLog.create
 *       for each partition directory; timed. With --reads, R sequential reads of the whole log with
 *       UnifiedLog.read(offset, B, HIGH_WATERMARK, true), the bytes copied into a heap buffer and
 *       the next offset found from batch headers, as a consumer does. Then a clean shutdown (flush,
 *       close, checkpoints, marker).
 *   clean   --dir D [--config k=v ...]
 *       Opens D's partition (clean shutdown), then Kafka's Cleaner with a broker's default settings
 *       (SkimpyOffsetMap with MD5 over the 128 MiB dedupe buffer, 512 KiB of I/O buffers, load
 *       factor 0.9, no throttling)
 *       cleans from the log start until nothing is cleanable (cleanable ratio below
 *       min.cleanable.dirty.ratio), as LogCleaner's thread would with one thread; timed.
 *
 * Each subcommand first runs the same code on a small scratch log (class loading and a first JIT
 * pass are not what is measured) and prints one JSON object on stdout. Times are wall-clock
 * (System.nanoTime); CPU is the process's user and system time from /proc/self/stat, all threads
 * (JIT compiler and GC threads included), like getrusage(RUSAGE_SELF) on the Python side.
 */

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Records;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.config.ServerLogConfigs;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.log.Cleaner;
import org.apache.kafka.storage.internals.log.CleanerConfig;
import org.apache.kafka.storage.internals.log.CleanerStats;
import org.apache.kafka.storage.internals.log.FetchDataInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogOffsetsListener;
import org.apache.kafka.storage.internals.log.LogToClean;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.SkimpyOffsetMap;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.utils.Throttler;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

public final class KafkaLogBench {
    static final String TOPIC = "bench";
    static final int RECORD_VALUE_BYTES = 1024;
    static final int RECORDS_PER_BATCH = 16;
    static final int POOL_SIZE = 64;
    static final int FETCH_BYTES = 1 << 20;
    static final String CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown";
    static final String RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint";
    static final String LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint";
    // Kafka's defaults, as a broker without overrides passes them to UnifiedLog.create
    static final int MAX_TRANSACTION_TIMEOUT_MS = 900_000;
    static final int PRODUCER_ID_EXPIRATION_MS = 86_400_000;
    static final int PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000;

    static final Time TIME = Time.SYSTEM;
    static final KafkaScheduler SCHEDULER = new KafkaScheduler(1, true, "bench-scheduler-");
    static final BrokerTopicStats STATS = new BrokerTopicStats(false);
    static final LogDirFailureChannel FAILURES = new LogDirFailureChannel(1);
    /** Warm-up directories, deleted only after the scheduler has stopped (a roll schedules a flush). */
    static final List<File> SCRATCH = new ArrayList<>();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            System.err.println("usage: KafkaLogBench append|open|clean --dir D ...");
            System.exit(2);
        }
        Map<String, List<String>> args = parseArgs(argv);
        SCHEDULER.startup();
        Map<String, Object> out;
        switch (argv[0]) {
            case "append": out = append(args); break;
            case "open": out = open(args); break;
            case "clean": out = clean(args); break;
            default:
                System.err.println("unknown subcommand " + argv[0]);
                System.exit(2);
                return;
        }
        System.out.println(toJson(out));
        System.out.flush();
        if (argv[0].equals("append")) {
            Thread.sleep(Long.MAX_VALUE); // until the parent's SIGKILL
        }
        SCHEDULER.shutdown(); // waits for scheduled tasks (asynchronous flushes after rolls)
        for (File scratch : SCRATCH) {
            deleteTree(scratch.toPath());
        }
        System.exit(0);
    }

    // -- append -----------------------------------------------------------------------------------

    static List<MemoryRecords> buildPool(long seed) {
        Random random = new Random(seed);
        long now = System.currentTimeMillis();
        List<MemoryRecords> pool = new ArrayList<>(POOL_SIZE);
        for (int b = 0; b < POOL_SIZE; b++) {
            SimpleRecord[] records = new SimpleRecord[RECORDS_PER_BATCH];
            for (int i = 0; i < RECORDS_PER_BATCH; i++) {
                byte[] value = new byte[RECORD_VALUE_BYTES];
                random.nextBytes(value);
                records[i] = new SimpleRecord(now + i, null, value);
            }
            pool.add(MemoryRecords.withRecords(Compression.NONE, records));
        }
        return pool;
    }

    static Map<String, Object> append(Map<String, List<String>> args) throws Exception {
        File dataDir = new File(one(args, "dir"));
        long sizeBytes = Long.parseLong(one(args, "size-bytes"));
        long seed = Long.parseLong(opt(args, "seed", "0"));
        long warmupBytes = Long.parseLong(opt(args, "warmup-bytes", String.valueOf(32L << 20)));
        List<MemoryRecords> pool = buildPool(seed);
        int batchBytes = pool.get(0).sizeInBytes();

        // Warm-up on a scratch log beside the data directory; it stays until the process dies, so no
        // page it used is freed just before the measured appends (see bench/machine.py on page reporting).
        if (warmupBytes > 0) {
            File scratch = new File(dataDir.getParentFile(), dataDir.getName() + "-warmup");
            UnifiedLog warm = createLog(new File(scratch, TOPIC + "-0"), defaultConfig(Map.of()), 0, 0, true);
            for (long i = 0, n = Math.max(1, warmupBytes / batchBytes); i < n; i++) {
                appendFresh(warm, pool.get((int) (i % POOL_SIZE)));
            }
        }

        Files.createDirectories(dataDir.toPath());
        TopicPartition tp = new TopicPartition(TOPIC, 0);
        new OffsetCheckpointFile(new File(dataDir, RECOVERY_POINT_CHECKPOINT), FAILURES).write(Map.of(tp, 0L));
        new OffsetCheckpointFile(new File(dataDir, LOG_START_OFFSET_CHECKPOINT), FAILURES).write(Map.of(tp, 0L));
        UnifiedLog log = createLog(new File(dataDir, tp.topic() + "-" + tp.partition()), defaultConfig(Map.of()),
                                   0, 0, true);
        long count = Math.max(1, sizeBytes / batchBytes);
        long bytes = 0;
        long[] cpu0 = cpu();
        long t0 = System.nanoTime();
        for (long i = 0; i < count; i++) {
            appendFresh(log, pool.get((int) (i % POOL_SIZE)));
            bytes += batchBytes;
        }
        long t1 = System.nanoTime();
        long[] cpu1 = cpu();
        Map<String, Object> out = timing(t0, t1, cpu0, cpu1);
        out.put("batches", count);
        out.put("records", count * RECORDS_PER_BATCH);
        out.put("bytes", bytes);
        out.put("batch_bytes", batchBytes);
        out.put("log_end_offset", log.logEndOffset());
        out.put("segments", log.numberOfSegments());
        out.put("recovery_point_in_memory", log.recoveryPoint());
        out.put("warmup_bytes", warmupBytes);
        return out;
    }

    /**
     * appendAsLeader rewrites the batch header in place (base offset, leader epoch) and a leader
     * append must arrive with base offset 0, as a producer sends it: reset that one field first (it
     * is outside the CRC), so a pooled batch looks like a freshly received one.
     */
    static void appendFresh(UnifiedLog log, MemoryRecords batch) throws IOException {
        batch.buffer().putLong(0, 0L);
        log.appendAsLeader(batch, 0);
    }

    // -- open (and read) --------------------------------------------------------------------------

    /** One opened data directory: LogManager's per-directory state for what this harness needs. */
    static final class OpenedDir {
        final File dataDir;
        final Map<TopicPartition, UnifiedLog> logs = new LinkedHashMap<>();
        boolean hadCleanShutdown;

        OpenedDir(File dataDir) {
            this.dataDir = dataDir;
        }
    }

    static OpenedDir openDir(File dataDir, Map<String, Object> overrides) throws IOException {
        OpenedDir opened = new OpenedDir(dataDir);
        File marker = new File(dataDir, CLEAN_SHUTDOWN_FILE);
        opened.hadCleanShutdown = marker.exists();
        Files.deleteIfExists(marker.toPath()); // LogManager deletes it before loading
        Map<TopicPartition, Long> recoveryPoints = readCheckpoint(new File(dataDir, RECOVERY_POINT_CHECKPOINT));
        Map<TopicPartition, Long> startOffsets = readCheckpoint(new File(dataDir, LOG_START_OFFSET_CHECKPOINT));
        File[] children = dataDir.listFiles(File::isDirectory);
        if (children == null) {
            throw new IOException("cannot list " + dataDir);
        }
        java.util.Arrays.sort(children);
        LogConfig config = defaultConfig(overrides);
        for (File child : children) {
            if (!child.getName().matches(".+-\\d+")) {
                continue;
            }
            TopicPartition tp = UnifiedLog.parseTopicPartitionName(child);
            UnifiedLog log = createLog(child, config, startOffsets.getOrDefault(tp, 0L),
                                       recoveryPoints.getOrDefault(tp, 0L), opened.hadCleanShutdown);
            opened.logs.put(tp, log);
        }
        return opened;
    }

    /** LogManager.shutdown for one directory: flush and close every log, checkpoints, then the marker. */
    static void closeDir(OpenedDir opened) throws IOException {
        Map<TopicPartition, Long> recoveryPoints = new HashMap<>();
        Map<TopicPartition, Long> startOffsets = new HashMap<>();
        for (Map.Entry<TopicPartition, UnifiedLog> entry : opened.logs.entrySet()) {
            UnifiedLog log = entry.getValue();
            log.flush(true);
            log.close();
            recoveryPoints.put(entry.getKey(), log.recoveryPoint());
            startOffsets.put(entry.getKey(), log.logStartOffset());
        }
        new OffsetCheckpointFile(new File(opened.dataDir, RECOVERY_POINT_CHECKPOINT), FAILURES).write(recoveryPoints);
        new OffsetCheckpointFile(new File(opened.dataDir, LOG_START_OFFSET_CHECKPOINT), FAILURES).write(startOffsets);
        Files.writeString(new File(opened.dataDir, CLEAN_SHUTDOWN_FILE).toPath(),
                          "{\"version\":0,\"brokerEpoch\":-1}", StandardCharsets.UTF_8);
    }

    static Map<String, Object> open(Map<String, List<String>> args) throws Exception {
        File dataDir = new File(one(args, "dir"));
        int reads = Integer.parseInt(opt(args, "reads", "0"));
        int fetchBytes = Integer.parseInt(opt(args, "fetch-bytes", String.valueOf(FETCH_BYTES)));
        warmUpOpen(new File(dataDir.getParentFile(), dataDir.getName() + "-warmup"), reads > 0);

        long[] cpu0 = cpu();
        long t0 = System.nanoTime();
        OpenedDir opened = openDir(dataDir, Map.of());
        long t1 = System.nanoTime();
        long[] cpu1 = cpu();
        if (opened.logs.size() != 1) {
            throw new IllegalStateException("expected one partition in " + dataDir + ", found " + opened.logs.keySet());
        }
        UnifiedLog log = opened.logs.values().iterator().next();
        Map<String, Object> out = timing(t0, t1, cpu0, cpu1);
        out.put("had_clean_shutdown", opened.hadCleanShutdown);
        out.put("log_end_offset", log.logEndOffset());
        out.put("log_bytes", log.size());
        out.put("segments", log.numberOfSegments());
        out.put("recovery_point", log.recoveryPoint());
        if (reads > 0) {
            log.updateHighWatermark(log.logEndOffset());
            List<Map<String, Object>> runs = new ArrayList<>();
            for (int r = 0; r < reads; r++) {
                runs.add(readAll(log, fetchBytes));
            }
            out.put("reads", runs);
        }
        long t2 = System.nanoTime();
        closeDir(opened);
        out.put("close_seconds", (System.nanoTime() - t2) / 1e9);
        return out;
    }

    static Map<String, Object> readAll(UnifiedLog log, int fetchBytes) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate(fetchBytes);
        long offset = log.logStartOffset();
        long end = log.highWatermark();
        long fetches = 0, batches = 0, records = 0, total = 0;
        long[] cpu0 = cpu();
        long t0 = System.nanoTime();
        while (offset < end) {
            FetchDataInfo info = log.read(offset, fetchBytes, FetchIsolation.HIGH_WATERMARK, true);
            Records slice = info.records;
            int n = slice.sizeInBytes();
            if (n > buffer.capacity()) {
                buffer = ByteBuffer.allocate(n);
            }
            buffer.clear();
            buffer.limit(n);
            ((FileRecords) slice).readInto(buffer, 0); // the bytes a fetch response carries
            fetches++;
            int pos = 0;
            long last = -1;
            while (pos + 61 <= n) {
                long base = buffer.getLong(pos);
                int size = buffer.getInt(pos + 8) + 12;
                if (pos + size > n) {
                    break;
                }
                last = base + buffer.getInt(pos + 23);
                records += buffer.getInt(pos + 57);
                batches++;
                pos += size;
            }
            if (last < offset) {
                throw new IllegalStateException("fetch at offset " + offset + " returned no complete batch (" + n + " bytes)");
            }
            total += pos;
            offset = last + 1;
        }
        long t1 = System.nanoTime();
        long[] cpu1 = cpu();
        Map<String, Object> out = timing(t0, t1, cpu0, cpu1);
        out.put("fetches", fetches);
        out.put("batches", batches);
        out.put("records", records);
        out.put("bytes", total);
        return out;
    }

    /** Load, recover and read a small log once, so the measured open does not pay for class loading. */
    static void warmUpOpen(File scratch, boolean read) throws Exception {
        File dataDir = new File(scratch, "data");
        File partition = new File(dataDir, TOPIC + "-0");
        List<MemoryRecords> pool = buildPool(7);
        Map<String, Object> small = Map.of("segment.bytes", 1 << 20);
        // a scheduler of its own: each roll schedules a flush, which must not run after the close
        KafkaScheduler scheduler = new KafkaScheduler(1, true, "warmup-scheduler-");
        scheduler.startup();
        UnifiedLog log = createLog(partition, defaultConfig(small), 0, 0, true, scheduler);
        for (int i = 0; i < 200; i++) {
            appendFresh(log, pool.get(i % POOL_SIZE));
        }
        scheduler.shutdown();
        log.close(); // no checkpoints, no marker: the next open recovers
        OpenedDir opened = openDir(dataDir, small);
        UnifiedLog reopened = opened.logs.values().iterator().next();
        if (read) {
            reopened.updateHighWatermark(reopened.logEndOffset());
            readAll(reopened, FETCH_BYTES);
        }
        closeDir(opened);
        closeDir(openDir(dataDir, small)); // and a clean open
        SCRATCH.add(scratch);
    }

    // -- clean ------------------------------------------------------------------------------------

    static Map<String, Object> clean(Map<String, List<String>> args) throws Exception {
        File dataDir = new File(one(args, "dir"));
        Map<String, Object> overrides = new HashMap<>();
        for (String kv : args.getOrDefault("config", List.of())) {
            int eq = kv.indexOf('=');
            overrides.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        CleanerConfig cleanerConfig = brokerDefaultCleanerConfig();
        Cleaner cleaner = newCleaner(cleanerConfig); // one cleaner, as one LogCleaner thread has
        warmUpClean(new File(dataDir.getParentFile(), dataDir.getName() + "-warmup"), cleaner);

        OpenedDir opened = openDir(dataDir, overrides);
        UnifiedLog log = opened.logs.values().iterator().next();
        log.updateHighWatermark(log.logEndOffset());
        long sizeBefore = log.size();
        int segmentsBefore = log.numberOfSegments();
        long[] cpu0 = cpu();
        long t0 = System.nanoTime();
        Totals totals = cleanUntilDone(cleaner, log);
        long t1 = System.nanoTime();
        long[] cpu1 = cpu();
        Map<String, Object> out = timing(t0, t1, cpu0, cpu1);
        out.put("passes", totals.passes);
        out.put("log_bytes_before", sizeBefore);
        out.put("log_bytes_after", log.size());
        out.put("segments_before", segmentsBefore);
        out.put("segments_after", log.numberOfSegments());
        out.put("records_read", totals.messagesRead);
        out.put("records_written", totals.messagesWritten);
        out.put("map_records_read", totals.mapMessagesRead);
        out.put("io_bytes_read", totals.bytesRead);
        out.put("io_bytes_written", totals.bytesWritten);
        out.put("buffer_utilization", totals.bufferUtilization);
        out.put("log_end_offset", log.logEndOffset());
        out.put("dedupe_buffer_bytes", cleanerConfig.dedupeBufferSize);
        out.put("io_buffer_bytes", cleanerConfig.ioBufferSize);
        out.put("map_slots", cleaner.offsetMap().slots());
        closeDir(opened);
        return out;
    }

    static final class Totals {
        int passes;
        long messagesRead, messagesWritten, mapMessagesRead, bytesRead, bytesWritten;
        double bufferUtilization;
    }

    /**
     * A broker's cleaner settings when nothing is overridden: the defaults of Kafka's own config
     * definitions (log.cleaner.* and message.max.bytes). Not CleanerConfig(true), a test constructor
     * with a 4 MiB dedupe buffer.
     */
    static CleanerConfig brokerDefaultCleanerConfig() {
        Map<String, Object> d = CleanerConfig.CONFIG_DEF.defaultValues();
        return new CleanerConfig(
            ((Number) d.get("log.cleaner.threads")).intValue(),
            ((Number) d.get("log.cleaner.dedupe.buffer.size")).longValue(),
            ((Number) d.get("log.cleaner.io.buffer.load.factor")).doubleValue(),
            ((Number) d.get("log.cleaner.io.buffer.size")).intValue(),
            ServerLogConfigs.MAX_MESSAGE_BYTES_DEFAULT,
            ((Number) d.get("log.cleaner.io.max.bytes.per.second")).doubleValue(),
            ((Number) d.get("log.cleaner.backoff.ms")).longValue(),
            true);
    }

    static Cleaner newCleaner(CleanerConfig config) throws Exception {
        // as LogCleaner's CleanerThread builds it, with one thread and no I/O limit
        SkimpyOffsetMap map = new SkimpyOffsetMap((int) Math.min(config.dedupeBufferSize / config.numThreads,
                                                                 Integer.MAX_VALUE), config.hashAlgorithm());
        Throttler throttler = new Throttler(config.maxIoBytesPerSecond, 300, "cleaner-io", "bytes", TIME);
        return new Cleaner(0, map, config.ioBufferSize / config.numThreads / 2, config.maxMessageSize,
                           config.dedupeBufferLoadFactor, throttler, TIME, tp -> { });
    }

    /** Clean from the log start to the active segment, pass after pass, while the log is cleanable. */
    static Totals cleanUntilDone(Cleaner cleaner, UnifiedLog log) throws Exception {
        Totals totals = new Totals();
        long firstDirty = log.logStartOffset();
        double minRatio = log.config().minCleanableRatio;
        while (true) {
            long firstUncleanable = Math.min(log.activeSegment().baseOffset(), log.lastStableOffset());
            if (firstDirty >= firstUncleanable) {
                break;
            }
            LogToClean cleanable = new LogToClean(log, firstDirty, firstUncleanable, false);
            if (cleanable.cleanableRatio() < minRatio) {
                break;
            }
            Map.Entry<Long, CleanerStats> result = cleaner.clean(cleanable);
            CleanerStats stats = result.getValue();
            totals.passes++;
            totals.messagesRead += stats.messagesRead();
            totals.messagesWritten += stats.messagesWritten();
            totals.mapMessagesRead += stats.mapMessagesRead();
            totals.bytesRead += stats.bytesRead();
            totals.bytesWritten += stats.bytesWritten();
            totals.bufferUtilization = stats.bufferUtilization();
            firstDirty = result.getKey();
        }
        return totals;
    }

    static void warmUpClean(File scratch, Cleaner cleaner) throws Exception {
        File partition = new File(new File(scratch, "data"), TOPIC + "-0");
        LogConfig logConfig = defaultConfig(Map.of("cleanup.policy", "compact", "segment.bytes", 1 << 20,
                                                   "min.cleanable.dirty.ratio", "0.01", "file.delete.delay.ms", "0"));
        KafkaScheduler scheduler = new KafkaScheduler(1, true, "warmup-scheduler-");
        scheduler.startup();
        UnifiedLog log = createLog(partition, logConfig, 0, 0, true, scheduler);
        long now = System.currentTimeMillis();
        Random random = new Random(3);
        for (int b = 0; b < 400; b++) {
            SimpleRecord[] records = new SimpleRecord[16];
            for (int i = 0; i < records.length; i++) {
                records[i] = new SimpleRecord(now, String.format("key-%08d", random.nextInt(500)).getBytes(StandardCharsets.UTF_8),
                                              new byte[1000]);
            }
            log.appendAsLeader(MemoryRecords.withRecords(Compression.NONE, records), 0);
        }
        log.roll();
        log.updateHighWatermark(log.logEndOffset());
        cleanUntilDone(cleaner, log);
        scheduler.shutdown();
        log.close();
        SCRATCH.add(scratch);
    }

    // -- helpers ----------------------------------------------------------------------------------

    static LogConfig defaultConfig(Map<String, Object> overrides) {
        return new LogConfig(new HashMap<>(overrides), overrides.keySet());
    }

    static UnifiedLog createLog(File dir, LogConfig config, long logStartOffset, long recoveryPoint,
                                boolean hadCleanShutdown) throws IOException {
        return createLog(dir, config, logStartOffset, recoveryPoint, hadCleanShutdown, SCHEDULER);
    }

    static UnifiedLog createLog(File dir, LogConfig config, long logStartOffset, long recoveryPoint,
                                boolean hadCleanShutdown, KafkaScheduler scheduler) throws IOException {
        return UnifiedLog.create(dir, config, logStartOffset, recoveryPoint, scheduler, STATS, TIME,
                                 MAX_TRANSACTION_TIMEOUT_MS,
                                 new ProducerStateManagerConfig(PRODUCER_ID_EXPIRATION_MS, false),
                                 PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, FAILURES, hadCleanShutdown,
                                 Optional.<Uuid>empty(), new ConcurrentHashMap<>(), false,
                                 LogOffsetsListener.NO_OP_OFFSETS_LISTENER);
    }

    static Map<TopicPartition, Long> readCheckpoint(File file) throws IOException {
        if (!file.exists()) {
            return Map.of();
        }
        return new OffsetCheckpointFile(file, FAILURES).read();
    }

    /** user and system CPU time of the whole process, in clock ticks (fields 14 and 15 of /proc/self/stat). */
    static long[] cpu() {
        try {
            String stat = Files.readString(Path.of("/proc/self/stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return new long[] {Long.parseLong(fields[11]), Long.parseLong(fields[12])};
        } catch (IOException e) {
            return new long[] {0, 0};
        }
    }

    static final double TICKS_PER_SECOND = 100.0; // USER_HZ on Linux

    static Map<String, Object> timing(long t0, long t1, long[] cpu0, long[] cpu1) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("seconds", (t1 - t0) / 1e9);
        out.put("user_cpu_s", (cpu1[0] - cpu0[0]) / TICKS_PER_SECOND);
        out.put("system_cpu_s", (cpu1[1] - cpu0[1]) / TICKS_PER_SECOND);
        return out;
    }

    static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    static Map<String, List<String>> parseArgs(String[] argv) {
        Map<String, List<String>> args = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            args.computeIfAbsent(argv[i].substring(2), k -> new ArrayList<>()).add(argv[++i]);
        }
        return args;
    }

    static String one(Map<String, List<String>> args, String name) {
        List<String> values = args.get(name);
        if (values == null || values.isEmpty()) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return values.get(values.size() - 1);
    }

    static String opt(Map<String, List<String>> args, String name, String fallback) {
        List<String> values = args.get(name);
        return values == null || values.isEmpty() ? fallback : values.get(values.size() - 1);
    }

    static String toJson(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                sb.append(toJson(String.valueOf(e.getKey()))).append(": ").append(toJson(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (value instanceof List) {
            StringBuilder sb = new StringBuilder("[");
            boolean first = true;
            for (Object item : (List<?>) value) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                sb.append(toJson(item));
            }
            return sb.append(']').toString();
        }
        if (value instanceof String) {
            return "\"" + ((String) value).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
        if (value instanceof Double && (((Double) value).isNaN() || ((Double) value).isInfinite())) {
            return "null";
        }
        return String.valueOf(value);
    }
}
