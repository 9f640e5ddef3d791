/*
 * The C API as a C program uses it: every function of sqlvault.h, its error paths
 * (wrong secret, missing file, not a directory, damage, NULL and non-UTF-8 arguments,
 * use after close, buffers too small) and one thread per file handle on one vault.
 *
 * Run by tests/c_api.rs (compiled with the system cc, linked to the built library):
 *     capi_test DIR      (DIR: an empty scratch directory)
 * Prints "capi: N checks, M failed" and exits non-zero if any failed.
 */
#include "sqlvault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: kind %d, errno %d: %s)\n", \
                    __FILE__, __LINE__, #cond, sqlvault_last_error_kind(),                   \
                    sqlvault_last_error_errno(), sqlvault_last_error_message(NULL));         \
        }                                                                                    \
    } while (0)

/* A call that must succeed (return 0). */
#define OK(call) CHECK((call) == 0)
/* A call that must fail with -err and error kind `kind`. */
#define FAILS(call, err, kind)                           \
    do {                                                 \
        int rc_ = (call);                                \
        CHECK(rc_ == -(err));                            \
        CHECK(sqlvault_last_error_kind() == (kind));     \
        CHECK(sqlvault_last_error_errno() == (err));     \
        if (rc_ != -(err))                               \
            fprintf(stderr, "    (returned %d)\n", rc_); \
    } while (0)
/* A string literal as pointer + length. */
#define S(lit) lit, sizeof(lit) - 1

static const char *scratch;

/* DIR/name, in one of a few rotating static buffers. */
static const char *in_dir(const char *name) {
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", scratch, name);
    return b;
}

static sqlvault_vault *new_vault(const char *name) {
    sqlvault_vault *v = NULL;
    const char *p = in_dir(name);
    OK(sqlvault_vault_create_with_kdf(p, strlen(p), (const uint8_t *)"pw", 2, 1024, 1, &v));
    CHECK(v != NULL);
    return v;
}

static int text_is(const sqlvault_result *r, int64_t row, int32_t col, const char *want) {
    size_t n = 0;
    const char *s = sqlvault_result_text(r, row, col, &n);
    return s != NULL && n == strlen(want) && memcmp(s, want, n) == 0 && s[n] == '\0';
}

static void test_version(void) {
    const char *v = sqlvault_version();
    CHECK(v != NULL && v[0] >= '0' && v[0] <= '9' && strchr(v, '.') != NULL);
    CHECK(sqlvault_abi_version() == SQLVAULT_ABI_VERSION);
    CHECK(strcmp(sqlvault_error_kind_name(SQLVAULT_ERR_WRONG_SECRET), "wrong secret") == 0);
    CHECK(strcmp(sqlvault_error_kind_name(SQLVAULT_ERR_DAMAGED), "damaged") == 0);
    CHECK(strcmp(sqlvault_error_kind_name(999), "unknown") == 0);
}

static void test_secrets(void) {
    const char *p = in_dir("secrets.vault");
    sqlvault_vault *v = new_vault("secrets.vault");
    OK(sqlvault_write_file(v, S("/a"), (const uint8_t *)"x", 1));
    OK(sqlvault_vault_close(v));
    OK(sqlvault_vault_close(v)); /* a second close does nothing */
    FAILS(sqlvault_exists(v, S("/a")), EBADF, SQLVAULT_ERR_CLOSED);
    sqlvault_vault_free(v);

    /* Wrong passphrase: the wrong-secret kind, a message, nothing handed out. */
    sqlvault_vault *w = (sqlvault_vault *)&w;
    FAILS(sqlvault_vault_open(p, strlen(p), (const uint8_t *)"nope", 4, &w), EACCES,
          SQLVAULT_ERR_WRONG_SECRET);
    CHECK(w == (sqlvault_vault *)&w);
    size_t n = 0;
    const char *msg = sqlvault_last_error_message(&n);
    CHECK(msg != NULL && n > 0 && strlen(msg) == n);

    OK(sqlvault_vault_open(p, strlen(p), (const uint8_t *)"pw", 2, &v));
    uint8_t buf[8];
    size_t len = 0;
    OK(sqlvault_read_file(v, S("/a"), buf, sizeof buf, &len));
    CHECK(len == 1 && buf[0] == 'x');
    OK(sqlvault_vault_sync(v));
    sqlvault_vault_free(v); /* free closes */

    /* A raw key, the same bytes as a key file, a wrong key, a short key. */
    uint8_t key[32], other[32];
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    const char *kp = in_dir("key.vault");
    OK(sqlvault_vault_create_with_key(kp, strlen(kp), key, sizeof key, &v));
    OK(sqlvault_mkdir(v, S("/k")));
    sqlvault_vault_free(v);
    FAILS(sqlvault_vault_open_with_key(kp, strlen(kp), other, sizeof other, &v), EACCES,
          SQLVAULT_ERR_WRONG_SECRET);
    FAILS(sqlvault_vault_open_with_key(kp, strlen(kp), key, 31, &v), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    OK(sqlvault_vault_open_with_key(kp, strlen(kp), key, sizeof key, &v));
    CHECK(sqlvault_exists(v, S("/k")) == 1);
    sqlvault_vault_free(v);
    const char *kf = in_dir("key.bin");
    FILE *f = fopen(kf, "wb");
    CHECK(f != NULL && fwrite(key, 1, sizeof key, f) == sizeof key);
    fclose(f);
    OK(sqlvault_vault_open_with_key_file(kp, strlen(kp), kf, strlen(kf), &v));
    CHECK(sqlvault_exists(v, S("/k")) == 1);
    sqlvault_vault_free(v);
    const char *kp2 = in_dir("keyfile.vault");
    OK(sqlvault_vault_create_with_key_file(kp2, strlen(kp2), kf, strlen(kf), &v));
    sqlvault_vault_free(v);
    OK(sqlvault_vault_open_with_key(kp2, strlen(kp2), key, sizeof key, &v));
    sqlvault_vault_free(v);
    FAILS(sqlvault_vault_open_with_key_file(kp2, strlen(kp2), S("/no/such/key"), &v), ENOENT,
          SQLVAULT_ERR_NOT_FOUND);

    /* The default (slow) key derivation, once. */
    const char *dp = in_dir("default.vault");
    OK(sqlvault_vault_create(dp, strlen(dp), (const uint8_t *)"pw", 2, &v));
    sqlvault_vault_free(v);
    FAILS(sqlvault_vault_create(dp, strlen(dp), (const uint8_t *)"pw", 2, &v), EEXIST,
          SQLVAULT_ERR_ALREADY_EXISTS);

    /* Not a vault; no vault at all. */
    const char *junk = in_dir("junk.bin");
    f = fopen(junk, "wb");
    for (int i = 0; i < 8192; i++) fputc(i * 7, f);
    fclose(f);
    int rc = sqlvault_vault_open(junk, strlen(junk), (const uint8_t *)"pw", 2, &v);
    CHECK(rc < 0 && sqlvault_last_error_kind() == SQLVAULT_ERR_NOT_A_VAULT);
    const char *missing = in_dir("missing.vault");
    FAILS(sqlvault_vault_open(missing, strlen(missing), (const uint8_t *)"pw", 2, &v), ENOENT,
          SQLVAULT_ERR_NOT_FOUND);
}

/* An exclusive open for a bulk import: it writes and reads back; while it is open
 * another open (shared or exclusive) fails with EBUSY after its busy timeout; after it
 * closes, any open sees its writes. Also: a shared open keeps an exclusive one out;
 * unknown secret kinds and flags are refused. */
static void test_exclusive(void) {
    const char *p = in_dir("exclusive.vault");
    sqlvault_vault *v = new_vault("exclusive.vault");
    sqlvault_vault *x = NULL, *w = NULL;
    const uint8_t *pw = (const uint8_t *)"pw";
    /* Another handle has it open: an exclusive open is refused. */
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2,
                                   SQLVAULT_VAULT_EXCLUSIVE, 200, &x),
          EBUSY, SQLVAULT_ERR_OTHER);
    sqlvault_vault_free(v);

    OK(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2,
                                SQLVAULT_VAULT_EXCLUSIVE, -1, &x));
    OK(sqlvault_write_file(x, S("/bulk"), (const uint8_t *)"imported", 8));
    uint8_t buf[16];
    size_t len = 0;
    OK(sqlvault_read_file(x, S("/bulk"), buf, sizeof buf, &len));
    CHECK(len == 8 && memcmp(buf, "imported", 8) == 0);
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2, 0, 200, &w),
          EBUSY, SQLVAULT_ERR_OTHER);
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2,
                                   SQLVAULT_VAULT_EXCLUSIVE, 200, &w),
          EBUSY, SQLVAULT_ERR_OTHER);
    CHECK(w == NULL);
    OK(sqlvault_vault_close(x));
    sqlvault_vault_free(x);

    OK(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2, 0, -1, &w));
    len = 0;
    OK(sqlvault_read_file(w, S("/bulk"), buf, sizeof buf, &len));
    CHECK(len == 8 && memcmp(buf, "imported", 8) == 0);
    sqlvault_vault_free(w);

    FAILS(sqlvault_vault_open_with(p, strlen(p), 99, pw, 2, 0, -1, &w), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_PASSPHRASE, pw, 2, 0x80, -1, &w),
          EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    /* The other secret kinds reach the same open. */
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_KEY_FILE, (const uint8_t *)"/no/such/key",
                                   12, 0, -1, &w),
          ENOENT, SQLVAULT_ERR_NOT_FOUND);
    uint8_t key[32];
    memset(key, 9, sizeof key);
    FAILS(sqlvault_vault_open_with(p, strlen(p), SQLVAULT_SECRET_KEY, key, sizeof key, 0, -1, &w),
          EACCES, SQLVAULT_ERR_WRONG_SECRET);
}

/* Copies the file `from` to `to`. */
static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK(in != NULL && out != NULL);
    if (in == NULL || out == NULL) return;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
    fclose(in);
    fclose(out);
}

/* A format-1 (SQLCipher) vault, the committed fixture copied here, converted to format 2:
 * a wrong passphrase is refused, the upgrade says 1 (converted) then 0 (already done),
 * and the vault opens with its content. The same through the key file. */
static void test_upgrade(void) {
    const char *fixtures = getenv("SQLVAULT_FORMAT1_FIXTURES");
    CHECK(fixtures != NULL);
    if (fixtures == NULL) return;
    char src[4096];
    const char *pass = "format 1 fixture passphrase";
    snprintf(src, sizeof src, "%s/format1.vault", fixtures);
    const char *p = in_dir("format1.vault");
    copy_file(src, p);
    FAILS(sqlvault_upgrade(p, strlen(p), (const uint8_t *)"nope", 4), EACCES, SQLVAULT_ERR_WRONG_SECRET);
    CHECK(sqlvault_upgrade(p, strlen(p), (const uint8_t *)pass, strlen(pass)) == 1);
    CHECK(sqlvault_upgrade(p, strlen(p), (const uint8_t *)pass, strlen(pass)) == 0);
    sqlvault_vault *v = NULL;
    OK(sqlvault_vault_open(p, strlen(p), (const uint8_t *)pass, strlen(pass), &v));
    uint8_t buf[64];
    size_t len = 0;
    OK(sqlvault_read_file(v, S("/hello.txt"), buf, sizeof buf, &len));
    CHECK(len == strlen("hello again, after the snapshot\n") &&
          memcmp(buf, "hello again, after the snapshot\n", len) == 0);
    sqlvault_vault_free(v);

    snprintf(src, sizeof src, "%s/format1-sha512.vault", fixtures);
    const char *q = in_dir("format1-sha512.vault");
    copy_file(src, q);
    char key[4096];
    snprintf(key, sizeof key, "%s/format1.key", fixtures);
    CHECK(sqlvault_upgrade_with_key_file(q, strlen(q), key, strlen(key)) == 1);
    OK(sqlvault_vault_open_with_key_file(q, strlen(q), key, strlen(key), &v));
    CHECK(sqlvault_exists(v, S("/data/multi.bin")) == 1);
    sqlvault_vault_free(v);
}

static void test_damage(void) {
    const char *p = in_dir("damaged.vault");
    sqlvault_vault *v = new_vault("damaged.vault");
    /* Content that does not repeat, so that most pages of the file hold it. */
    static uint8_t data[200000];
    uint32_t x = 1;
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 24);
    OK(sqlvault_write_file(v, S("/f"), data, sizeof data));
    OK(sqlvault_vault_close(v));
    sqlvault_vault_free(v);
    /* Flip one byte in each page of the second half of the file. */
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    for (long at = size / 2; at < size; at += 4096) {
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ 0x40, f);
    }
    fclose(f);
    int rc = sqlvault_vault_open(p, strlen(p), (const uint8_t *)"pw", 2, &v);
    if (rc == 0) {
        sqlvault_bytes b = {0};
        rc = sqlvault_read_file_bytes(v, S("/f"), &b);
        sqlvault_bytes_free(&b);
        sqlvault_vault_free(v);
    }
    CHECK(rc == -EIO);
    CHECK(sqlvault_last_error_kind() == SQLVAULT_ERR_DAMAGED);
}

static void test_paths(sqlvault_vault *v) {
    OK(sqlvault_mkdir(v, S("/a")));
    FAILS(sqlvault_mkdir(v, S("/a")), EEXIST, SQLVAULT_ERR_ALREADY_EXISTS);
    FAILS(sqlvault_mkdir(v, S("/x/y")), ENOENT, SQLVAULT_ERR_NOT_FOUND);
    OK(sqlvault_mkdirs(v, S("/x/y/z")));
    OK(sqlvault_mkdirs(v, S("/x/y/z")));
    OK(sqlvault_write_file(v, S("/a/f"), (const uint8_t *)"hello", 5));
    OK(sqlvault_write_file(v, S("/a/empty"), NULL, 0));
    FAILS(sqlvault_mkdirs(v, S("/a/f/g")), ENOTDIR, SQLVAULT_ERR_NOT_A_DIRECTORY);
    FAILS(sqlvault_mkdirs(v, S("/a/f")), EEXIST, SQLVAULT_ERR_ALREADY_EXISTS);
    FAILS(sqlvault_stat(v, S("/a/f/g"), &(sqlvault_attr){0}), ENOTDIR,
          SQLVAULT_ERR_NOT_A_DIRECTORY);

    sqlvault_attr st;
    OK(sqlvault_stat(v, S("/a/f"), &st));
    CHECK(st.kind == SQLVAULT_NODE_FILE && st.size == 5 && (st.mode & 0170000) == 0100000);
    CHECK(st.nlink == 1 && st.ino > 0 && st.mtime_ns > 0);
    OK(sqlvault_lstat(v, S("/a"), &st));
    CHECK(st.kind == SQLVAULT_NODE_DIRECTORY && (st.mode & 0170000) == 0040000);
    FAILS(sqlvault_stat(v, S("/nope"), &st), ENOENT, SQLVAULT_ERR_NOT_FOUND);
    CHECK(sqlvault_exists(v, S("/a/f")) == 1);
    CHECK(sqlvault_exists(v, S("/a/nope")) == 0);

    sqlvault_result *r = NULL;
    OK(sqlvault_list(v, S("/a"), &r));
    CHECK(sqlvault_result_rows(r) == 2 && sqlvault_result_columns(r) == 2);
    size_t n = 0;
    CHECK(strcmp(sqlvault_result_column_name(r, 0, &n), "name") == 0 && n == 4);
    CHECK(strcmp(sqlvault_result_column_name(r, 1, NULL), "kind") == 0);
    CHECK(strcmp(sqlvault_result_column_decltype(r, 1, NULL), "INTEGER") == 0);
    CHECK(text_is(r, 0, 0, "empty") && text_is(r, 1, 0, "f"));
    CHECK(sqlvault_result_type(r, 1, 1) == SQLVAULT_INTEGER);
    CHECK(sqlvault_result_int(r, 1, 1) == SQLVAULT_NODE_FILE);
    /* Out of range reads as nothing, never a crash. */
    CHECK(sqlvault_result_type(r, 2, 0) == 0 && sqlvault_result_type(r, 0, 2) == 0);
    CHECK(sqlvault_result_type(r, -1, 0) == 0 && sqlvault_result_int(r, 9, 9) == 0);
    CHECK(sqlvault_result_bytes(r, 0, 1, &n) == NULL && n == 0);
    CHECK(sqlvault_result_column_name(r, 5, NULL) == NULL);
    sqlvault_result_free(r);
    OK(sqlvault_list(v, S("/"), &r));
    CHECK(sqlvault_result_rows(r) == 2 && text_is(r, 0, 0, "a") && text_is(r, 1, 0, "x"));
    CHECK(sqlvault_result_int(r, 0, 1) == SQLVAULT_NODE_DIRECTORY);
    sqlvault_result_free(r);
    FAILS(sqlvault_list(v, S("/a/f"), &r), ENOTDIR, SQLVAULT_ERR_NOT_A_DIRECTORY);
    FAILS(sqlvault_list(v, S("/zz"), &r), ENOENT, SQLVAULT_ERR_NOT_FOUND);

    /* Whole files: into the caller's buffer (exact, too small), or a returned buffer. */
    uint8_t buf[16];
    size_t len = 0;
    OK(sqlvault_read_file(v, S("/a/f"), buf, sizeof buf, &len));
    CHECK(len == 5 && memcmp(buf, "hello", 5) == 0);
    OK(sqlvault_read_file(v, S("/a/f"), buf, 5, &len));
    CHECK(len == 5);
    FAILS(sqlvault_read_file(v, S("/a/f"), buf, 4, &len), ERANGE, SQLVAULT_ERR_BUFFER_TOO_SMALL);
    CHECK(len == 5);
    OK(sqlvault_read_file(v, S("/a/empty"), NULL, 0, &len));
    CHECK(len == 0);
    FAILS(sqlvault_read_file(v, S("/a/nope"), buf, sizeof buf, &len), ENOENT,
          SQLVAULT_ERR_NOT_FOUND);
    FAILS(sqlvault_read_file(v, S("/a"), buf, sizeof buf, &len), EISDIR,
          SQLVAULT_ERR_IS_A_DIRECTORY);
    sqlvault_bytes b = {0};
    OK(sqlvault_read_file_bytes(v, S("/a/f"), &b));
    CHECK(b.len == 5 && memcmp(b.data, "hello", 5) == 0);
    sqlvault_bytes_free(&b);
    CHECK(b.data == NULL && b.len == 0);
    sqlvault_bytes_free(&b); /* again: nothing */
    sqlvault_bytes_free(NULL);

    OK(sqlvault_truncate(v, S("/a/f"), 2));
    OK(sqlvault_read_file(v, S("/a/f"), buf, sizeof buf, &len));
    CHECK(len == 2 && memcmp(buf, "he", 2) == 0);
    FAILS(sqlvault_truncate(v, S("/a/f"), -1), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);

    OK(sqlvault_rename(v, S("/a/f"), S("/a/g")));
    CHECK(sqlvault_exists(v, S("/a/f")) == 0 && sqlvault_exists(v, S("/a/g")) == 1);
    FAILS(sqlvault_rename(v, S("/a/f"), S("/a/h")), ENOENT, SQLVAULT_ERR_NOT_FOUND);
    FAILS(sqlvault_remove_dir(v, S("/a")), ENOTEMPTY, SQLVAULT_ERR_DIRECTORY_NOT_EMPTY);
    FAILS(sqlvault_remove_file(v, S("/a")), EISDIR, SQLVAULT_ERR_IS_A_DIRECTORY);
    OK(sqlvault_remove_file(v, S("/a/g")));
    OK(sqlvault_remove_file(v, S("/a/empty")));
    OK(sqlvault_remove_dir(v, S("/a")));
    OK(sqlvault_remove_all(v, S("/x")));
    CHECK(sqlvault_exists(v, S("/x")) == 0);
    FAILS(sqlvault_remove_all(v, S("/x")), ENOENT, SQLVAULT_ERR_NOT_FOUND);
}

static void test_bad_arguments(sqlvault_vault *v) {
    sqlvault_attr st;
    sqlvault_result *r = NULL;
    FAILS(sqlvault_exists(NULL, S("/a")), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_exists(v, NULL, 3), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_exists(v, "/\xff\xfe", 3), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(sqlvault_last_error_message(NULL), "UTF-8") != NULL);
    FAILS(sqlvault_exists(v, S("relative")), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_exists(v, NULL, 0), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT); /* "" */
    FAILS(sqlvault_stat(v, S("/"), NULL), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_list(v, S("/"), NULL), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_stat(NULL, S("/"), &st), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_write_file(v, S("/w"), NULL, 5), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_vault_open(NULL, 4, (const uint8_t *)"pw", 2, &v), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_vault_open(S("/tmp/x"), (const uint8_t *)"pw", 2, NULL), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_vault_create_with_kdf(S("/tmp/x"), (const uint8_t *)"\xff", 1, 1024, 1, &v),
          EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_file_read_at(NULL, 0, (uint8_t *)&st, 1, &(size_t){0}), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_file_open(v, S("/f"), 1u << 20, &(sqlvault_file *){NULL}), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_tx_commit(NULL), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_find(v, S("/"), NULL, 2, NULL, 0, &r), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    /* NULL is fine for every free. */
    sqlvault_vault_free(NULL);
    sqlvault_file_free(NULL);
    sqlvault_tx_free(NULL);
    sqlvault_result_free(NULL);
    CHECK(sqlvault_result_rows(NULL) == 0 && sqlvault_result_columns(NULL) == 0);
    CHECK(sqlvault_result_text(NULL, 0, 0, NULL) == NULL);
    /* A success leaves the last error as it was. */
    OK(sqlvault_mkdirs(v, S("/")));
    CHECK(sqlvault_last_error_kind() == SQLVAULT_ERR_INVALID_ARGUMENT);
}

#define BLOCK (256 * 1024)

static void test_files(sqlvault_vault *v) {
    static uint8_t block[BLOCK], back[BLOCK];
    for (int i = 0; i < BLOCK; i++) block[i] = (uint8_t)(i % 251);
    sqlvault_file *f = NULL;
    OK(sqlvault_file_open(v, S("/big"),
                          SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE | SQLVAULT_OPEN_TRUNCATE, &f));
    for (int i = 0; i < 4; i++) OK(sqlvault_file_write_at(f, (int64_t)i * BLOCK, block, BLOCK));
    int64_t size = 0;
    OK(sqlvault_file_size(f, &size));
    CHECK(size == 4 * BLOCK);
    size_t n = 0;
    CHECK(sqlvault_file_read_at(f, 0, back, 10, &n) < 0); /* not open for reading */
    FAILS(sqlvault_file_write_at(f, -1, block, 1), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    OK(sqlvault_file_flush(f));
    OK(sqlvault_file_sync(f));
    OK(sqlvault_file_close(f));
    OK(sqlvault_file_close(f));
    FAILS(sqlvault_file_size(f, &size), EBADF, SQLVAULT_ERR_CLOSED);
    FAILS(sqlvault_file_write_at(f, 0, block, 1), EBADF, SQLVAULT_ERR_CLOSED);
    sqlvault_file_free(f);

    OK(sqlvault_file_open(v, S("/big"), SQLVAULT_OPEN_READ, &f));
    OK(sqlvault_file_read_at(f, 3 * BLOCK, back, BLOCK, &n));
    CHECK(n == BLOCK && memcmp(back, block, BLOCK) == 0);
    OK(sqlvault_file_read_at(f, 4 * BLOCK - 5, back, BLOCK, &n));
    CHECK(n == 5 && memcmp(back, block + BLOCK - 5, 5) == 0);
    OK(sqlvault_file_read_at(f, 4 * BLOCK, back, BLOCK, &n));
    CHECK(n == 0);
    OK(sqlvault_file_read_at(f, 0, NULL, 0, &n));
    CHECK(n == 0);
    FAILS(sqlvault_file_read_at(f, 0, NULL, 10, &n), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_file_read_at(f, 0, back, 10, NULL), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    CHECK(sqlvault_file_write_at(f, 0, block, 1) < 0); /* not open for writing */
    OK(sqlvault_file_flush(f));                        /* a no-op when read-only */
    sqlvault_attr st;
    OK(sqlvault_file_stat(f, &st));
    CHECK(st.kind == SQLVAULT_NODE_FILE && st.size == 4 * BLOCK);

    sqlvault_file *a = NULL;
    OK(sqlvault_file_open(v, S("/big"), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_APPEND, &a));
    OK(sqlvault_file_append(a, (const uint8_t *)"tail", 4, &size));
    CHECK(size == 4 * BLOCK + 4);
    OK(sqlvault_file_append(a, (const uint8_t *)"!", 1, NULL));
    OK(sqlvault_file_set_len(a, 10));
    FAILS(sqlvault_file_set_len(a, -1), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    OK(sqlvault_file_close(a));
    sqlvault_file_free(a);
    OK(sqlvault_file_size(f, &size));
    CHECK(size == 10);
    sqlvault_file_free(f); /* free without close closes */

    FAILS(sqlvault_file_open(v, S("/big"), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE_NEW, &f),
          EEXIST, SQLVAULT_ERR_ALREADY_EXISTS);
    FAILS(sqlvault_file_open(v, S("/none"), SQLVAULT_OPEN_READ, &f), ENOENT,
          SQLVAULT_ERR_NOT_FOUND);
    FAILS(sqlvault_file_open(v, S("/none/x"), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE, &f),
          ENOENT, SQLVAULT_ERR_NOT_FOUND);
    FAILS(sqlvault_file_open(v, S("/big/x"), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE, &f),
          ENOTDIR, SQLVAULT_ERR_NOT_A_DIRECTORY);
    /* A file written without truncation keeps its tail; gaps read as zeros. */
    OK(sqlvault_file_open(v, S("/gap"), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE, &f));
    OK(sqlvault_file_write_at(f, 100, (const uint8_t *)"z", 1));
    OK(sqlvault_file_close(f));
    sqlvault_file_free(f);
    uint8_t buf[101];
    size_t len = 0;
    OK(sqlvault_read_file(v, S("/gap"), buf, sizeof buf, &len));
    CHECK(len == 101 && buf[0] == 0 && buf[99] == 0 && buf[100] == 'z');
    OK(sqlvault_remove_file(v, S("/gap")));
    OK(sqlvault_remove_file(v, S("/big")));
}

static sqlvault_value int_value(const char *name, int64_t i) {
    sqlvault_value x = {0};
    x.name = name;
    x.name_len = name ? strlen(name) : 0;
    x.type = SQLVAULT_INTEGER;
    x.integer = i;
    return x;
}

static sqlvault_value real_value(const char *name, double d) {
    sqlvault_value x = int_value(name, 0);
    x.type = SQLVAULT_REAL;
    x.real = d;
    return x;
}

static sqlvault_value text_value(const char *name, const char *s) {
    sqlvault_value x = int_value(name, 0);
    x.type = SQLVAULT_TEXT;
    x.data = (const uint8_t *)s;
    x.len = strlen(s);
    return x;
}

static sqlvault_value blob_value(const char *name, const void *p, size_t n) {
    sqlvault_value x = int_value(name, 0);
    x.type = SQLVAULT_BLOB;
    x.data = p;
    x.len = n;
    return x;
}

static sqlvault_value null_value(const char *name) {
    sqlvault_value x = int_value(name, 0);
    x.type = SQLVAULT_NULL;
    return x;
}

static void test_tags_and_find(sqlvault_vault *v) {
    OK(sqlvault_mkdirs(v, S("/photos")));
    OK(sqlvault_write_file(v, S("/photos/a.jpg"), (const uint8_t *)"a", 1));
    OK(sqlvault_write_file(v, S("/photos/b.jpg"), (const uint8_t *)"b", 1));
    OK(sqlvault_write_file(v, S("/photos/c.png"), (const uint8_t *)"c", 1));
    sqlvault_value tags[] = {int_value("iso", 400), real_value("ratio", 1.5),
                             text_value("camera", "X100V"), blob_value("thumb", "\0\1", 2)};
    OK(sqlvault_tags_set(v, S("/photos/a.jpg"), tags, 4));
    sqlvault_value low[] = {int_value("iso", 100), text_value("camera", "X100V")};
    OK(sqlvault_tags_set(v, S("/photos/b.jpg"), low, 2));
    OK(sqlvault_tags_set(v, S("/photos/c.png"), tags, 1));

    sqlvault_result *r = NULL;
    OK(sqlvault_tags(v, S("/photos/a.jpg"), &r));
    CHECK(sqlvault_result_rows(r) == 4);
    /* name order: camera, iso, ratio, thumb */
    CHECK(text_is(r, 0, 0, "camera") && text_is(r, 0, 1, "X100V"));
    CHECK(text_is(r, 1, 0, "iso") && sqlvault_result_type(r, 1, 1) == SQLVAULT_INTEGER);
    CHECK(sqlvault_result_int(r, 1, 1) == 400);
    CHECK(sqlvault_result_type(r, 2, 1) == SQLVAULT_REAL && sqlvault_result_real(r, 2, 1) == 1.5);
    size_t n = 0;
    const uint8_t *thumb = sqlvault_result_bytes(r, 3, 1, &n);
    CHECK(sqlvault_result_type(r, 3, 1) == SQLVAULT_BLOB && n == 2 && thumb[0] == 0 && thumb[1] == 1);
    CHECK(sqlvault_result_text(r, 3, 1, NULL) == NULL); /* a blob is not text */
    CHECK(sqlvault_result_column_decltype(r, 1, &n) == NULL && n == 0);
    sqlvault_result_free(r);

    sqlvault_str cond[] = {{S("iso>=400")}};
    OK(sqlvault_find(v, S("/photos"), cond, 1, NULL, 0, &r));
    CHECK(sqlvault_result_rows(r) == 2 && text_is(r, 0, 0, "/photos/a.jpg"));
    CHECK(text_is(r, 1, 0, "/photos/c.png"));
    sqlvault_result_free(r);
    OK(sqlvault_find(v, S("/photos"), cond, 1, S("*.jpg"), &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "/photos/a.jpg"));
    sqlvault_result_free(r);
    sqlvault_str two[] = {{S("camera=X100V")}, {S("iso<400")}};
    OK(sqlvault_find(v, S("/"), two, 2, NULL, 0, &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "/photos/b.jpg"));
    sqlvault_result_free(r);
    sqlvault_str bad[] = {{S(">=5")}};
    FAILS(sqlvault_find(v, S("/"), bad, 1, NULL, 0, &r), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);

    sqlvault_str names[] = {{S("iso")}, {S("nope")}};
    int64_t removed = -1;
    OK(sqlvault_tags_remove(v, S("/photos/a.jpg"), names, 2, &removed));
    CHECK(removed == 1);
    OK(sqlvault_tags(v, S("/photos/a.jpg"), &r));
    CHECK(sqlvault_result_rows(r) == 3);
    sqlvault_result_free(r);
    sqlvault_value null_tag[] = {null_value("x")};
    FAILS(sqlvault_tags_set(v, S("/photos/a.jpg"), null_tag, 1), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    sqlvault_value unnamed[] = {int_value(NULL, 1)};
    FAILS(sqlvault_tags_set(v, S("/photos/a.jpg"), unnamed, 1), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_tags_set(v, S("/photos/zz"), tags, 1), ENOENT, SQLVAULT_ERR_NOT_FOUND);
}

static void test_records(sqlvault_vault *v) {
    OK(sqlvault_record_put(v, S("prefs"), S("a/1"), (const uint8_t *)"one", 3));
    OK(sqlvault_record_put(v, S("prefs"), S("a/2"), (const uint8_t *)"two", 3));
    OK(sqlvault_record_put(v, S("prefs"), S("b/1"), NULL, 0));
    sqlvault_bytes b = {0};
    CHECK(sqlvault_record_get(v, S("prefs"), S("a/2"), &b) == 1);
    CHECK(b.len == 3 && memcmp(b.data, "two", 3) == 0);
    sqlvault_bytes_free(&b);
    CHECK(sqlvault_record_get(v, S("prefs"), S("b/1"), &b) == 1 && b.len == 0);
    sqlvault_bytes_free(&b);
    CHECK(sqlvault_record_get(v, S("prefs"), S("zz"), &b) == 0 && b.data == NULL);
    int64_t count = 0;
    OK(sqlvault_record_count(v, S("prefs"), &count));
    CHECK(count == 3);
    sqlvault_result *r = NULL;
    OK(sqlvault_record_keys(v, S("prefs"), S("a/"), &r));
    CHECK(sqlvault_result_rows(r) == 2 && text_is(r, 0, 0, "a/1") && text_is(r, 1, 0, "a/2"));
    sqlvault_result_free(r);
    OK(sqlvault_record_keys(v, S("prefs"), NULL, 0, &r));
    CHECK(sqlvault_result_rows(r) == 3);
    sqlvault_result_free(r);
    /* Pages: one record, then the rest after the last key seen. */
    OK(sqlvault_record_items(v, S("prefs"), NULL, 0, NULL, 0, 1, &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "a/1"));
    size_t n = 0;
    const uint8_t *val = sqlvault_result_bytes(r, 0, 1, &n);
    CHECK(n == 3 && memcmp(val, "one", 3) == 0);
    sqlvault_result_free(r);
    OK(sqlvault_record_items(v, S("prefs"), NULL, 0, S("a/1"), 10, &r));
    CHECK(sqlvault_result_rows(r) == 2 && text_is(r, 0, 0, "a/2") && text_is(r, 1, 0, "b/1"));
    sqlvault_result_free(r);
    CHECK(sqlvault_record_delete(v, S("prefs"), S("a/1")) == 1);
    CHECK(sqlvault_record_delete(v, S("prefs"), S("a/1")) == 0);
    OK(sqlvault_record_count(v, S("prefs"), &count));
    CHECK(count == 2);
}

static void test_sql(sqlvault_vault *v) {
    OK(sqlvault_execute_batch(v, S("CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT NOT NULL "
                                   "UNIQUE, iso INTEGER, ratio REAL, thumb BLOB);"
                                   "CREATE INDEX photos_iso ON photos(iso);")));
    sqlvault_value row[] = {text_value(NULL, "/a.jpg"), int_value(NULL, 400),
                            real_value(NULL, 1.5), blob_value(NULL, "\0\xff", 2)};
    int64_t changes = -1, rowid = -1;
    OK(sqlvault_execute(v, S("INSERT INTO photos(path, iso, ratio, thumb) VALUES (?, ?, ?, ?)"),
                        row, 4, &changes, &rowid));
    CHECK(changes == 1 && rowid == 1);
    /* Named parameters with each prefix, given with or without it, in any order. */
    sqlvault_value named[] = {int_value("@iso", 100), text_value("path", "/b.jpg"),
                              null_value("$ratio")};
    OK(sqlvault_execute(v, S("INSERT INTO photos(path, iso, ratio) VALUES (:path, @iso, $ratio)"),
                        named, 3, &changes, &rowid));
    CHECK(changes == 1 && rowid == 2);
    sqlvault_value mixed[] = {text_value(NULL, "/c.jpg"), int_value(":iso", 800)};
    OK(sqlvault_execute(v, S("INSERT INTO photos(path, iso) VALUES (?, :iso)"), mixed, 2, NULL,
                        &rowid));
    CHECK(rowid == 3);
    OK(sqlvault_execute(v, S("UPDATE photos SET ratio = 2.0 WHERE iso >= 400"), NULL, 0, &changes,
                        NULL));
    CHECK(changes == 2);

    sqlvault_result *r = NULL;
    sqlvault_value min[] = {int_value(":min", 100)};
    OK(sqlvault_query(v, S("SELECT id, path, iso, ratio, thumb, iso * 2 AS twice FROM photos "
                           "WHERE iso >= :min ORDER BY id"),
                      min, 1, &r));
    CHECK(sqlvault_result_rows(r) == 3 && sqlvault_result_columns(r) == 6);
    CHECK(strcmp(sqlvault_result_column_name(r, 1, NULL), "path") == 0);
    CHECK(strcmp(sqlvault_result_column_name(r, 5, NULL), "twice") == 0);
    CHECK(strcmp(sqlvault_result_column_decltype(r, 0, NULL), "INTEGER") == 0);
    CHECK(strcmp(sqlvault_result_column_decltype(r, 3, NULL), "REAL") == 0);
    CHECK(sqlvault_result_column_decltype(r, 5, NULL) == NULL);
    CHECK(sqlvault_result_int(r, 0, 0) == 1 && text_is(r, 0, 1, "/a.jpg"));
    CHECK(sqlvault_result_type(r, 0, 3) == SQLVAULT_REAL && sqlvault_result_real(r, 0, 3) == 2.0);
    size_t n = 0;
    const uint8_t *thumb = sqlvault_result_bytes(r, 0, 4, &n);
    CHECK(sqlvault_result_type(r, 0, 4) == SQLVAULT_BLOB && n == 2 && thumb[1] == 0xff);
    CHECK(sqlvault_result_type(r, 1, 3) == SQLVAULT_NULL && sqlvault_result_type(r, 1, 4) == SQLVAULT_NULL);
    CHECK(sqlvault_result_int(r, 2, 5) == 1600);
    sqlvault_result_free(r);
    /* No rows: the columns are still there, with their types. */
    OK(sqlvault_query(v, S("SELECT path, iso FROM photos WHERE iso > 10000"), NULL, 0, &r));
    CHECK(sqlvault_result_rows(r) == 0 && sqlvault_result_columns(r) == 2);
    CHECK(strcmp(sqlvault_result_column_name(r, 1, NULL), "iso") == 0);
    CHECK(strcmp(sqlvault_result_column_decltype(r, 0, NULL), "TEXT") == 0);
    sqlvault_result_free(r);
    /* A statement that writes and returns rows. */
    sqlvault_value d[] = {text_value(NULL, "/d.jpg")};
    OK(sqlvault_query(v, S("INSERT INTO photos(path) VALUES (?) RETURNING id"), d, 1, &r));
    CHECK(sqlvault_result_rows(r) == 1 && sqlvault_result_int(r, 0, 0) == 4);
    sqlvault_result_free(r);

    /* SQL errors keep their own kinds. */
    FAILS(sqlvault_execute(v, S("INSERT INTO photos(path) VALUES ('/a.jpg')"), NULL, 0, NULL, NULL),
          EINVAL, SQLVAULT_ERR_SQL);
    CHECK(strstr(sqlvault_last_error_message(NULL), "UNIQUE") != NULL);
    FAILS(sqlvault_query(v, S("SELEC 1"), NULL, 0, &r), EINVAL, SQLVAULT_ERR_SQL);
    FAILS(sqlvault_query(v, S("SELECT * FROM inodes"), NULL, 0, &r), EINVAL,
          SQLVAULT_ERR_SQL_REFUSED);
    FAILS(sqlvault_execute(v, S("BEGIN"), NULL, 0, NULL, NULL), EINVAL, SQLVAULT_ERR_SQL_REFUSED);
    FAILS(sqlvault_query(v, S("SELECT * FROM photos WHERE iso = :iso"), NULL, 0, &r), EINVAL,
          SQLVAULT_ERR_SQL);
    sqlvault_value wrong[] = {int_value("@nope", 1)};
    FAILS(sqlvault_query(v, S("SELECT * FROM photos WHERE iso = :iso"), wrong, 1, &r), EINVAL,
          SQLVAULT_ERR_SQL);
    CHECK(strstr(sqlvault_last_error_message(NULL), ":iso") != NULL);
    FAILS(sqlvault_execute(v, S("SELECT ?"), row, 2, NULL, NULL), EINVAL, SQLVAULT_ERR_SQL);
    sqlvault_value bad_type[] = {int_value(NULL, 1)};
    bad_type[0].type = 42;
    FAILS(sqlvault_execute(v, S("SELECT ?"), bad_type, 1, NULL, NULL), EINVAL,
          SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_execute_batch(v, S("CREATE TABLE t(a); INSERT INTO nope VALUES (1);")), EINVAL,
          SQLVAULT_ERR_SQL);
    /* The batch left nothing. */
    FAILS(sqlvault_query(v, S("SELECT * FROM t"), NULL, 0, &r), EINVAL, SQLVAULT_ERR_SQL);
    CHECK(strstr(sqlvault_last_error_message(NULL), "no such table") != NULL);
}

static void test_transactions(sqlvault_vault *v) {
    sqlvault_tx *t = NULL;
    OK(sqlvault_tx_begin(v, &t));
    OK(sqlvault_tx_mkdirs(t, S("/tx/d")));
    OK(sqlvault_tx_write_file(t, S("/tx/d/f"), (const uint8_t *)"inside", 6));
    sqlvault_value row[] = {text_value(":p", "/tx/d/f")};
    int64_t rowid = 0;
    OK(sqlvault_tx_execute(t, S("INSERT INTO photos(path) VALUES (:p)"), row, 1, NULL, &rowid));
    CHECK(rowid == 5);
    /* The transaction sees its own changes; this thread's writes outside it fail. */
    sqlvault_result *r = NULL;
    OK(sqlvault_tx_query(t, S("SELECT id FROM photos WHERE path = :p"), row, 1, &r));
    CHECK(sqlvault_result_rows(r) == 1 && sqlvault_result_int(r, 0, 0) == 5);
    sqlvault_result_free(r);
    FAILS(sqlvault_write_file(v, S("/outside"), NULL, 0), EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    FAILS(sqlvault_query(v, S("INSERT INTO photos(path) VALUES ('/x') RETURNING id"), NULL, 0, &r),
          EINVAL, SQLVAULT_ERR_INVALID_ARGUMENT);
    CHECK(sqlvault_exists(v, S("/tx")) == 0); /* reads outside see the last commit */
    uint8_t buf[16];
    size_t len = 0;
    OK(sqlvault_tx_read_file(t, S("/tx/d/f"), buf, sizeof buf, &len));
    CHECK(len == 6 && memcmp(buf, "inside", 6) == 0);
    FAILS(sqlvault_tx_read_file(t, S("/tx/d/f"), buf, 3, &len), ERANGE,
          SQLVAULT_ERR_BUFFER_TOO_SMALL);
    CHECK(len == 6);
    sqlvault_bytes b = {0};
    OK(sqlvault_tx_read_file_bytes(t, S("/tx/d/f"), &b));
    CHECK(b.len == 6);
    sqlvault_bytes_free(&b);
    FAILS(sqlvault_tx_read_file_bytes(t, S("/tx/none"), &b), ENOENT, SQLVAULT_ERR_NOT_FOUND);
    sqlvault_value tags[] = {int_value("n", 1), text_value("s", "x")};
    OK(sqlvault_tx_tags_set(t, S("/tx/d/f"), tags, 2));
    OK(sqlvault_tx_tags(t, S("/tx/d/f"), &r));
    CHECK(sqlvault_result_rows(r) == 2 && sqlvault_result_int(r, 0, 1) == 1);
    sqlvault_result_free(r);
    sqlvault_str names[] = {{S("s")}};
    int64_t removed = 0;
    OK(sqlvault_tx_tags_remove(t, S("/tx/d/f"), names, 1, &removed));
    CHECK(removed == 1);
    OK(sqlvault_tx_record_put(t, S("txr"), S("k1"), (const uint8_t *)"v1", 2));
    OK(sqlvault_tx_record_put(t, S("txr"), S("k2"), (const uint8_t *)"v2", 2));
    CHECK(sqlvault_tx_record_get(t, S("txr"), S("k1"), &b) == 1 && b.len == 2);
    sqlvault_bytes_free(&b);
    CHECK(sqlvault_tx_record_delete(t, S("txr"), S("k2")) == 1);
    int64_t count = 0;
    OK(sqlvault_tx_record_count(t, S("txr"), &count));
    CHECK(count == 1);
    OK(sqlvault_tx_record_keys(t, S("txr"), NULL, 0, &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "k1"));
    sqlvault_result_free(r);
    OK(sqlvault_tx_record_items(t, S("txr"), S("k"), NULL, 0, 5, &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "k1"));
    sqlvault_result_free(r);
    OK(sqlvault_tx_execute_batch(t, S("CREATE TABLE txt(a); INSERT INTO txt VALUES (1);")));
    FAILS(sqlvault_tx_execute(t, S("INSERT INTO nope VALUES (1)"), NULL, 0, NULL, NULL), EINVAL,
          SQLVAULT_ERR_SQL);
    FAILS(sqlvault_tx_query(t, S("SELECT * FROM inodes"), NULL, 0, &r), EINVAL,
          SQLVAULT_ERR_SQL_REFUSED);
    OK(sqlvault_tx_rollback(t));
    FAILS(sqlvault_tx_commit(t), EBADF, SQLVAULT_ERR_CLOSED);
    FAILS(sqlvault_tx_write_file(t, S("/late"), NULL, 0), EBADF, SQLVAULT_ERR_CLOSED);
    sqlvault_tx_free(t);
    /* Rolled back: the file, the row, the record, the table are gone together. */
    CHECK(sqlvault_exists(v, S("/tx")) == 0);
    OK(sqlvault_query(v, S("SELECT count(*) FROM photos WHERE path = '/tx/d/f'"), NULL, 0, &r));
    CHECK(sqlvault_result_int(r, 0, 0) == 0);
    sqlvault_result_free(r);
    CHECK(sqlvault_record_get(v, S("txr"), S("k1"), &b) == 0);

    /* Committed: all of it stays. */
    OK(sqlvault_tx_begin(v, &t));
    OK(sqlvault_tx_write_file(t, S("/committed"), (const uint8_t *)"c", 1));
    OK(sqlvault_tx_execute(t, S("INSERT INTO photos(path) VALUES ('/committed')"), NULL, 0, NULL,
                           NULL));
    OK(sqlvault_tx_remove_file(t, S("/committed")));
    OK(sqlvault_tx_write_file(t, S("/committed2"), (const uint8_t *)"c", 1));
    OK(sqlvault_tx_commit(t));
    sqlvault_tx_free(t);
    CHECK(sqlvault_exists(v, S("/committed")) == 0 && sqlvault_exists(v, S("/committed2")) == 1);
    OK(sqlvault_query(v, S("SELECT count(*) FROM photos WHERE path = '/committed'"), NULL, 0, &r));
    CHECK(sqlvault_result_int(r, 0, 0) == 1);
    sqlvault_result_free(r);
    OK(sqlvault_write_file(v, S("/after"), NULL, 0)); /* this thread may write again */

    /* Freed while open: rolled back. */
    OK(sqlvault_tx_begin(v, &t));
    OK(sqlvault_tx_write_file(t, S("/dropped"), NULL, 0));
    sqlvault_tx_free(t);
    CHECK(sqlvault_exists(v, S("/dropped")) == 0);
}

static void test_snapshots(sqlvault_vault *v) {
    OK(sqlvault_write_file(v, S("/snap.txt"), (const uint8_t *)"before", 6));
    sqlvault_result *r = NULL;
    OK(sqlvault_snapshot_create(v, S("s1"), &r));
    CHECK(sqlvault_result_rows(r) == 1 && text_is(r, 0, 0, "s1"));
    CHECK(strcmp(sqlvault_result_column_name(r, 2, NULL), "files") == 0 && sqlvault_result_int(r, 0, 2) >= 1);
    sqlvault_result_free(r);
    FAILS(sqlvault_snapshot_create(v, S("s1"), NULL), EEXIST, SQLVAULT_ERR_ALREADY_EXISTS);
    OK(sqlvault_write_file(v, S("/snap.txt"), (const uint8_t *)"after", 5));
    OK(sqlvault_snapshot_create(v, NULL, 0, NULL)); /* named by the time */
    OK(sqlvault_snapshots(v, &r));
    CHECK(sqlvault_result_rows(r) == 2 && text_is(r, 0, 0, "s1"));
    size_t n = 0;
    const char *auto_name = sqlvault_result_text(r, 1, 0, &n);
    CHECK(auto_name != NULL && n == 20 && auto_name[19] == 'Z');
    char second[32] = {0};
    if (auto_name && n < sizeof second) memcpy(second, auto_name, n);
    CHECK(sqlvault_result_int(r, 0, 1) > 0);
    sqlvault_result_free(r);

    sqlvault_restore_summary s = {0};
    OK(sqlvault_snapshot_restore(v, S("s1"), S("/snap.txt"), NULL, 0, &s));
    CHECK(s.files == 1 && s.bytes == 6);
    uint8_t buf[16];
    size_t len = 0;
    OK(sqlvault_read_file(v, S("/snap.txt"), buf, sizeof buf, &len));
    CHECK(len == 6 && memcmp(buf, "before", 6) == 0);
    OK(sqlvault_snapshot_restore(v, S("s1"), S("/snap.txt"), S("/copy.txt"), NULL));
    CHECK(sqlvault_exists(v, S("/copy.txt")) == 1);
    OK(sqlvault_snapshot_restore(v, S("s1"), NULL, 0, NULL, 0, NULL)); /* the whole tree */
    CHECK(sqlvault_exists(v, S("/copy.txt")) == 0);
    FAILS(sqlvault_snapshot_restore(v, S("nope"), NULL, 0, NULL, 0, NULL), ENOENT,
          SQLVAULT_ERR_NOT_FOUND);
    int64_t freed = -1;
    OK(sqlvault_snapshot_remove(v, S("s1"), &freed));
    CHECK(freed >= 0);
    OK(sqlvault_snapshot_remove(v, second, strlen(second), NULL));
    OK(sqlvault_snapshots(v, &r));
    CHECK(sqlvault_result_rows(r) == 0 && sqlvault_result_columns(r) == 6);
    sqlvault_result_free(r);
    FAILS(sqlvault_snapshot_remove(v, S("s1"), NULL), ENOENT, SQLVAULT_ERR_NOT_FOUND);
}

/* One thread per file handle: each writes its own file in 64 KiB pieces through its own
 * handle, reads it back through another, and checks its last error stays its own. */
#define THREADS 4
#define PIECE (64 * 1024)
#define PIECES 32

struct worker {
    sqlvault_vault *v;
    int id;
    int bad;
};

static void *work(void *arg) {
    struct worker *w = arg;
    char path[32];
    snprintf(path, sizeof path, "/threads/%d", w->id);
    static __thread uint8_t piece[PIECE], back[PIECE];
    sqlvault_file *f = NULL;
    if (sqlvault_file_open(w->v, path, strlen(path), SQLVAULT_OPEN_WRITE | SQLVAULT_OPEN_CREATE, &f))
        w->bad++;
    for (int i = 0; i < PIECES; i++) {
        memset(piece, w->id * 37 + i, PIECE);
        if (sqlvault_file_write_at(f, (int64_t)i * PIECE, piece, PIECE)) w->bad++;
    }
    if (sqlvault_file_close(f)) w->bad++;
    sqlvault_file_free(f);
    /* A failure here is this thread's own. */
    if (sqlvault_exists(w->v, S("no-slash")) != -EINVAL) w->bad++;
    if (sqlvault_file_open(w->v, path, strlen(path), SQLVAULT_OPEN_READ, &f)) w->bad++;
    for (int i = 0; i < PIECES; i++) {
        size_t n = 0;
        memset(piece, w->id * 37 + i, PIECE);
        if (sqlvault_file_read_at(f, (int64_t)i * PIECE, back, PIECE, &n) || n != PIECE ||
            memcmp(piece, back, PIECE) != 0)
            w->bad++;
    }
    sqlvault_file_free(f);
    if (sqlvault_last_error_kind() != SQLVAULT_ERR_INVALID_ARGUMENT) w->bad++;
    return NULL;
}

static void test_threads(sqlvault_vault *v) {
    OK(sqlvault_mkdir(v, S("/threads")));
    FAILS(sqlvault_stat(v, S("/threads/none"), &(sqlvault_attr){0}), ENOENT, SQLVAULT_ERR_NOT_FOUND);
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){v, i, 0};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].bad == 0);
    }
    /* The other threads' failures did not touch this thread's last error. */
    CHECK(sqlvault_last_error_kind() == SQLVAULT_ERR_NOT_FOUND);
    sqlvault_result *r = NULL;
    OK(sqlvault_list(v, S("/threads"), &r));
    CHECK(sqlvault_result_rows(r) == THREADS);
    sqlvault_result_free(r);
    sqlvault_attr st;
    OK(sqlvault_stat(v, S("/threads/3"), &st));
    CHECK(st.size == (int64_t)PIECE * PIECES);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    scratch = argv[1];
    test_version();
    test_secrets();
    test_exclusive();
    test_upgrade();
    test_damage();
    sqlvault_vault *v = new_vault("main.vault");
    test_paths(v);
    test_bad_arguments(v);
    test_files(v);
    test_tags_and_find(v);
    test_records(v);
    test_sql(v);
    test_transactions(v);
    test_snapshots(v);
    test_threads(v);
    OK(sqlvault_vault_close(v));
    FAILS(sqlvault_write_file(v, S("/x"), NULL, 0), EBADF, SQLVAULT_ERR_CLOSED);
    sqlvault_vault_free(v);
    printf("capi: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
