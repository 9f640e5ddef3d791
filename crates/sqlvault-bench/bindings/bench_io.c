/* The C case of `sqlvault-bench bindings` (compiled by the bench with cc against
 * crates/sqlvault-ffi/include/sqlvault.h and the packaged libsqlvault_ffi.so): writes then
 * reads a file of --mib MiB, 1 MiB per call (sqlvault_file_append, then
 * sqlvault_file_read_at into the caller's buffer), then opens a vault with the key file
 * DIR/bench.key and writes a 4 KiB file 20 times; prints the harness's CaseOutput as JSON.
 * The data is the Rust case's: one random MiB with a unique stamp every 4 KiB. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sqlvault.h"

#define BLOCK (1 << 20)
#define STAMP_EVERY 4096
#define SMALL 4096
#define OPENS 20

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static void check(int32_t rc, const char *what) {
    if (rc != SQLVAULT_OK) {
        size_t len = 0;
        const char *msg = sqlvault_last_error_message(&len);
        fprintf(stderr, "%s: %d %.*s\n", what, rc, (int)len, msg ? msg : "");
        exit(1);
    }
}

static void stamp(uint8_t *buf, uint64_t block_no) {
    uint64_t base = block_no * (BLOCK / STAMP_EVERY);
    for (int j = 0; j < BLOCK / STAMP_EVERY; j++) {
        uint64_t v = base + j;
        memcpy(buf + (size_t)j * STAMP_EVERY, &v, 8);
    }
}

int main(int argc, char **argv) {
    long mib = 0;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
    }
    if (mib <= 0 || !dir) {
        fprintf(stderr, "usage: bench_io --mib N --dir DIR\n");
        return 2;
    }
    char path[4096], key[4096], small_path[4096];
    snprintf(path, sizeof path, "%s/c-bench.vault", dir);
    snprintf(key, sizeof key, "%s/bench.key", dir);
    snprintf(small_path, sizeof small_path, "%s/c-open.vault", dir);
    uint8_t *buf = malloc(BLOCK), *into = malloc(BLOCK);
    srand(7);
    for (int i = 0; i < BLOCK; i++) buf[i] = (uint8_t)rand();

    sqlvault_vault *v;
    check(sqlvault_vault_create_with_kdf(path, strlen(path), (const uint8_t *)"bench", 5, 8192, 1, &v), "create");
    sqlvault_file *f;
    check(sqlvault_file_open(v, "/big.bin", 8, SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE_NEW, &f), "open for write");
    double excluded = 0, c0 = cpu(), t0 = now();
    for (long i = 0; i < mib; i++) {
        double s = now();
        stamp(buf, i);
        excluded += now() - s;
        check(sqlvault_file_append(f, buf, BLOCK, NULL), "append");
    }
    check(sqlvault_file_close(f), "close");
    sqlvault_file_free(f);
    double w_s = now() - t0 - excluded, w_cpu = cpu() - c0;

    check(sqlvault_file_open(v, "/big.bin", 8, SQLVAULT_OPEN_READ, &f), "open for read");
    int64_t total = 0, block = 0;
    c0 = cpu();
    t0 = now();
    for (;;) {
        size_t n = 0;
        check(sqlvault_file_read_at(f, total, into, BLOCK, &n), "read");
        if (n == 0) break;
        uint64_t got;
        memcpy(&got, into, 8);
        if (got != (uint64_t)block * (BLOCK / STAMP_EVERY)) {
            fprintf(stderr, "block %ld read back wrong\n", (long)block);
            return 1;
        }
        total += n;
        block++;
    }
    double r_s = now() - t0, r_cpu = cpu() - c0;
    check(sqlvault_file_close(f), "close");
    sqlvault_file_free(f);
    check(sqlvault_vault_close(v), "close vault");
    sqlvault_vault_free(v);
    unlink(path);
    if (total != (int64_t)mib * BLOCK) {
        fprintf(stderr, "read %ld bytes\n", (long)total);
        return 1;
    }

    check(sqlvault_vault_create_with_key_file(small_path, strlen(small_path), key, strlen(key), &v), "create small");
    check(sqlvault_vault_close(v), "close small");
    sqlvault_vault_free(v);
    memset(buf, 7, SMALL);
    c0 = cpu();
    t0 = now();
    for (int i = 0; i < OPENS; i++) {
        char name[64];
        int len = snprintf(name, sizeof name, "/small-%d.bin", i);
        check(sqlvault_vault_open_with_key_file(small_path, strlen(small_path), key, strlen(key), &v), "open small");
        check(sqlvault_file_open(v, name, len, SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE_NEW, &f), "create small file");
        check(sqlvault_file_append(f, buf, SMALL, NULL), "write small");
        check(sqlvault_file_close(f), "close small file");
        sqlvault_file_free(f);
        check(sqlvault_vault_close(v), "close small vault");
        sqlvault_vault_free(v);
    }
    double o_s = now() - t0, o_cpu = cpu() - c0;
    unlink(small_path);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"phases\":{\"write\":{\"seconds\":%.6f,\"units\":%.1f,\"cpu_s\":%.6f},"
           "\"read\":{\"seconds\":%.6f,\"units\":%.1f,\"cpu_s\":%.6f},"
           "\"open\":{\"seconds\":%.6f,\"units\":%d,\"cpu_s\":%.6f}},\"peak_rss_kib\":%ld,\"notes\":{}}\n",
           w_s, (double)mib * BLOCK, w_cpu, r_s, (double)total, r_cpu, o_s, OPENS, o_cpu, ru.ru_maxrss);
    free(buf);
    free(into);
    return 0;
}
