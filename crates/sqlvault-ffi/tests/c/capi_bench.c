/*
 * Streams MIB MiB through the C API in 256 KiB caller buffers: written into a new file
 * with sqlvault_file_write_at, then read back with sqlvault_file_read_at. Prints one
 * line per direction: "c write|read MiB seconds cpu_seconds". Run by the ignored test
 * c_api::c_streams_as_fast_as_rust:
 *     capi_bench DIR MIB
 */
#include "sqlvault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define PIECE (256 * 1024)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, sqlvault_last_error_message(NULL));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/bench.vault", argv[1]);
    long mib = atol(argv[2]);
    long pieces = mib * 1024 * 1024 / PIECE;
    static uint8_t buf[PIECE];
    for (int i = 0; i < PIECE; i++) buf[i] = (uint8_t)(i * 31 + 7);
    sqlvault_vault *v;
    if (sqlvault_vault_create_with_kdf(path, strlen(path), (const uint8_t *)"pw", 2, 1024, 1, &v)) die("create");
    sqlvault_file *f;
    double t0 = now(), c0 = cpu();
    if (sqlvault_file_open(v, "/big", 4, SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE, &f)) die("open");
    for (long i = 0; i < pieces; i++) {
        /* Distinct content in every 4 KiB, so no chunk is stored once for many. */
        for (int k = 0; k < PIECE; k += 4096) memcpy(buf + k, &i, sizeof i);
        if (sqlvault_file_write_at(f, i * PIECE, buf, PIECE)) die("write");
    }
    if (sqlvault_file_close(f)) die("close");
    sqlvault_file_free(f);
    printf("c write %ld %.3f %.3f\n", mib, now() - t0, cpu() - c0);
    t0 = now(), c0 = cpu();
    if (sqlvault_file_open(v, "/big", 4, SQLVAULT_OPEN_READ, &f)) die("open");
    size_t n;
    for (long i = 0; i < pieces; i++)
        if (sqlvault_file_read_at(f, i * PIECE, buf, PIECE, &n) || n != PIECE) die("read");
    sqlvault_file_free(f);
    printf("c read %ld %.3f %.3f\n", mib, now() - t0, cpu() - c0);
    sqlvault_vault_free(v);
    return 0;
}
