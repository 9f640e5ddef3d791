package org.sqlvault.bench;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Locale;
import java.util.Random;

import org.sqlvault.Vault;

/**
 * The JVM side of {@code sqlvault-bench jvm}: writes then reads a file of {@code --mib}
 * MiB through {@link Vault#openOutputStream(String)} and {@link Vault#openInputStream(String)},
 * 1 MiB per call as an application copying a stream would, and prints one JSON line in the
 * harness's case format: per phase wall seconds (stamping excluded), bytes and process CPU
 * seconds; peak RSS of the process in KiB ({@code VmHWM}).
 *
 * <p>The data has the same shape as the Rust case it is compared with: one random MiB
 * with a unique stamp every 4 KiB, so no chunk deduplicates; the stamps are checked on the
 * way back. Then it opens a vault with the key file {@code DIR/bench.key} and writes a
 * 4 KiB file, 20 times (phase {@code open}).
 *
 * <p>Usage: {@code java -cp 'sqlvault-jvm.jar:lib/*' org.sqlvault.bench.StreamBench --mib N --dir DIR}
 */
public final class StreamBench {
    private static final int BLOCK = 1 << 20;
    private static final int STAMP_EVERY = 4096;
    private static final int SMALL = 4096;
    private static final int OPENS = 20;

    private StreamBench() {
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    private static void stamp(ByteBuffer buf, long blockNo) {
        long base = blockNo * (BLOCK / STAMP_EVERY);
        for (int j = 0; j < BLOCK / STAMP_EVERY; j++) {
            buf.putLong(j * STAMP_EVERY, base + j);
        }
    }

    private static long peakRssKib() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return 0;
    }

    private static String phase(double seconds, double units, double cpu) {
        return String.format(Locale.ROOT, "{\"seconds\":%.6f,\"units\":%.1f,\"cpu_s\":%.6f}", seconds, units, cpu);
    }

    /** Runs the benchmark; see the class comment. */
    public static void main(String[] args) throws Exception {
        long mib = 0;
        Path dir = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--mib":
                    mib = Long.parseLong(args[++i]);
                    break;
                case "--dir":
                    dir = Paths.get(args[++i]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (mib <= 0 || dir == null) {
            throw new IllegalArgumentException("usage: StreamBench --mib N --dir DIR");
        }
        Path path = dir.resolve("jvm-bench.vault");
        byte[] block = new byte[BLOCK];
        new Random(7).nextBytes(block);
        ByteBuffer buf = ByteBuffer.wrap(block).order(ByteOrder.LITTLE_ENDIAN);
        String write;
        String read;
        try (Vault v = Vault.create(path.toString(), "bench".toCharArray())) {
            long excluded = 0;
            long c0 = cpuNanos();
            long t0 = System.nanoTime();
            try (OutputStream out = v.openOutputStream("/big.bin")) {
                for (long i = 0; i < mib; i++) {
                    long s = System.nanoTime();
                    stamp(buf, i);
                    excluded += System.nanoTime() - s;
                    out.write(block);
                }
            }
            write = phase((System.nanoTime() - t0 - excluded) / 1e9, (double) mib * BLOCK, (cpuNanos() - c0) / 1e9);

            byte[] into = new byte[BLOCK];
            ByteBuffer check = ByteBuffer.wrap(into).order(ByteOrder.LITTLE_ENDIAN);
            long total = 0;
            long blockNo = 0;
            c0 = cpuNanos();
            t0 = System.nanoTime();
            try (InputStream in = v.openInputStream("/big.bin")) {
                while (true) {
                    int n = in.readNBytes(into, 0, BLOCK);
                    if (n == 0) {
                        break;
                    }
                    if (check.getLong(0) != blockNo * (BLOCK / STAMP_EVERY)) {
                        throw new IllegalStateException("block " + blockNo + " read back wrong");
                    }
                    total += n;
                    blockNo++;
                }
            }
            read = phase((System.nanoTime() - t0) / 1e9, total, (cpuNanos() - c0) / 1e9);
            if (total != mib * BLOCK) {
                throw new IllegalStateException("read " + total + " bytes, wrote " + mib * BLOCK);
            }
        }
        Files.delete(path);

        // Open with the key file DIR/bench.key, write a 4 KiB file, close: OPENS times.
        String key = dir.resolve("bench.key").toString();
        Path small = dir.resolve("jvm-open.vault");
        Vault.createWithKeyFile(small.toString(), key).close();
        byte[] data = new byte[SMALL];
        long c0 = cpuNanos();
        long t0 = System.nanoTime();
        for (int i = 0; i < OPENS; i++) {
            try (Vault v = Vault.openWithKeyFile(small.toString(), key)) {
                v.write("/small-" + i + ".bin", data);
            }
        }
        String open = phase((System.nanoTime() - t0) / 1e9, OPENS, (cpuNanos() - c0) / 1e9);
        for (String ext : new String[] {"", "-wal", "-shm"}) {
            Files.deleteIfExists(Paths.get(small + ext));
        }
        System.out.println("{\"phases\":{\"write\":" + write + ",\"read\":" + read + ",\"open\":" + open
                + "},\"peak_rss_kib\":" + peakRssKib() + ",\"notes\":{}}");
    }
}
