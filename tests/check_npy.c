/*
 * check_npy.c - the CLI's .npy reader (src/cli/npy.c) on files the test
 * builds itself, one field class at a time: the magic and version, the
 * header length of each version, the header's strings (keys and dtype:
 * printable ASCII, no NUL that would cut a C string short), fortran_order,
 * the shape (dimension count, sizes near the limits, products that
 * overflow) and the payload length; then every truncation and every
 * one-byte change of a valid file, which must give an error or a valid
 * parse, never a crash or a read past the end; and the file path through
 * the library's file helper (a FIFO or a directory is refused without
 * blocking).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "../src/cli/npy.h"
#include "harness.h"

/* A .npy image: preamble of `version`, the header dict padded with
 * spaces to a multiple of 64 and a newline, then `n_data` floats. */
typedef struct img {
    unsigned char *b;
    size_t n;
} img;

static img make(unsigned version, const char *dict, size_t dict_len, size_t n_data)
{
    size_t pre = version == 1 ? 10 : 12;
    size_t h = dict_len + 1;
    while ((pre + h) % 64)
        h++;
    img m;
    m.n = pre + h + 4 * n_data;
    m.b = malloc(m.n);
    ck_assert_ptr_nonnull(m.b);
    memcpy(m.b, "\x93NUMPY", 6);
    m.b[6] = (unsigned char)version;
    m.b[7] = 0;
    m.b[8] = (unsigned char)h;
    m.b[9] = (unsigned char)(h >> 8);
    if (version != 1) {
        m.b[10] = (unsigned char)(h >> 16);
        m.b[11] = (unsigned char)(h >> 24);
    }
    memcpy(m.b + pre, dict, dict_len);
    memset(m.b + pre + dict_len, ' ', h - dict_len - 1);
    m.b[pre + h - 1] = '\n';
    for (size_t i = 0; i < n_data; i++) {
        float f = (float)i;
        uint32_t w;
        memcpy(&w, &f, 4);
        unsigned char *p = m.b + pre + h + 4 * i;
        p[0] = (unsigned char)w;
        p[1] = (unsigned char)(w >> 8);
        p[2] = (unsigned char)(w >> 16);
        p[3] = (unsigned char)(w >> 24);
    }
    return m;
}

static img make_s(unsigned version, const char *dict, size_t n_data)
{
    return make(version, dict, strlen(dict), n_data);
}

static void expect_ok(const img *m, int64_t steps, int32_t v)
{
    npy_rows r;
    char msg[256] = "";
    ck_assert_msg(npy_parse(m->b, m->n, &r, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(r.steps, steps);
    ck_assert_int_eq(r.n_vocab, v);
    ck_assert(r.data[steps * v - 1] == (float)(steps * v - 1));
    npy_free(&r);
}

static void expect_err(const img *m, const char *needle)
{
    npy_rows r;
    char msg[256] = "";
    ck_assert_int_eq(npy_parse(m->b, m->n, &r, msg, sizeof msg), 1);
    ck_assert_ptr_null(r.data);
    ck_assert_msg(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg, needle);
    ck_assert_msg(!strncmp(msg, "byte ", 5), "message '%s' names no byte offset", msg);
}

#define GOOD "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

START_TEST(test_npy_valid_files_of_every_version_parse)
{
    for (unsigned ver = 1; ver <= 3; ver++) {
        img m = make_s(ver, GOOD, 6);
        expect_ok(&m, 2, 3);
        free(m.b);
        m = make_s(ver, "{\"shape\": (5,), \"fortran_order\": False, \"descr\": \"<f4\"}", 5);
        expect_ok(&m, 1, 5);
        free(m.b);
    }
}
END_TEST

START_TEST(test_npy_magic_version_and_header_length_are_checked)
{
    img m = make_s(1, GOOD, 6);
    m.b[0] = 0x92;
    expect_err(&m, "not a .npy file");
    m.b[0] = 0x93;
    m.b[6] = 0;
    expect_err(&m, "unsupported .npy version 0.0");
    m.b[6] = 4;
    expect_err(&m, "unsupported .npy version 4.0");
    m.b[6] = 1;
    m.b[7] = 1;
    expect_err(&m, "unsupported .npy version 1.1");
    m.b[7] = 0;
    m.b[8] = 0xff;
    m.b[9] = 0xff;
    expect_err(&m, "header length 65535 runs past the end");
    free(m.b);
    /* Version 2 and 3: a 32-bit length, up to 4 GiB. */
    m = make_s(2, GOOD, 6);
    memset(m.b + 8, 0xff, 4);
    expect_err(&m, "header length 4294967295 runs past the end");
    free(m.b);
    m = make_s(3, GOOD, 0);
    expect_err(&m, "needs more bytes of data");
    m.n = 11; /* inside the 4-byte length */
    expect_err(&m, "file ends inside the header length");
    free(m.b);
}
END_TEST

START_TEST(test_npy_header_strings_are_printable_ascii_with_no_nul)
{
    /* A NUL inside a key or the dtype would make strcmp see "descr" or
     * "<f4" where the file says something else. */
    static const char k_nul[] = "{'descr\0x': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    img m = make(1, k_nul, sizeof k_nul - 1, 6);
    expect_err(&m, "expected a quoted key");
    free(m.b);
    static const char d_nul[] = "{'descr': '<f4\0', 'fortran_order': False, 'shape': (2, 3), }";
    m = make(1, d_nul, sizeof d_nul - 1, 6);
    expect_err(&m, "bad or repeated 'descr'");
    free(m.b);
    m = make_s(3, "{'descr': '<f4', 'fortran_\xc3\xa9': False, 'shape': (2, 3), }", 6);
    expect_err(&m, "expected a quoted key");
    free(m.b);
    m = make_s(1, "{'descr': '<f4\n', 'fortran_order': False, 'shape': (2, 3), }", 6);
    expect_err(&m, "bad or repeated 'descr'");
    free(m.b);
    m = make_s(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,3)}", 6);
    expect_err(&m, "bad or repeated 'descr'");
    free(m.b);
    m = make_s(1, "{'descr': 'a-very-long-dtype-string-of-forty-bytes', 'shape': (2, 3)}", 6);
    expect_err(&m, "bad or repeated 'descr'");
    free(m.b);
    m = make_s(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'xyz': 1}", 6);
    expect_err(&m, "unknown header key 'xyz'");
    free(m.b);
}
END_TEST

START_TEST(test_npy_dtype_order_and_shape_are_range_checked)
{
    struct {
        const char *dict;
        const char *needle;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", "dtype '>f4'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", "dtype '<f8'"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "Fortran order"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", "must be True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", "more than 2"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0-d array"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", "no rows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", "row length 0"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 16777217), }",
         "row length 16777217 outside [1, 16777216]"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", "bad dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }",
         "bad dimension"},
        /* steps * V * 4 overflows 64 bits if multiplied first. */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (9007199254740992, 16777216), }",
         "needs more bytes of data"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }", "needs fewer bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False}", "header lacks 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "trailing"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        img m = make_s(1, cases[c].dict, 6);
        expect_err(&m, cases[c].needle);
        free(m.b);
    }
}
END_TEST

START_TEST(test_npy_every_truncation_and_byte_change_is_an_error_or_a_valid_parse)
{
    img m = make_s(1, GOOD, 6);
    for (size_t len = 0; len < m.n; len++) {
        /* An exact copy of the prefix, so a read past it is caught by
         * ASan / valgrind. */
        unsigned char *cut = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, m.b, len);
        npy_rows r;
        char msg[256];
        ck_assert_int_eq(npy_parse(cut, len, &r, msg, sizeof msg), 1);
        ck_assert_ptr_null(r.data);
        free(cut);
    }
    size_t header_end = 64;
    for (size_t i = 0; i < header_end; i++) {
        for (int d = 1; d < 256; d += 37) {
            unsigned char save = m.b[i];
            m.b[i] = (unsigned char)(save + d);
            npy_rows r;
            char msg[256];
            int rc = npy_parse(m.b, m.n, &r, msg, sizeof msg);
            ck_assert(rc == 0 || rc == 1);
            if (rc == 0) {
                ck_assert_int_eq(r.steps * r.n_vocab, 6);
                npy_free(&r);
            } else {
                ck_assert_ptr_null(r.data);
            }
            m.b[i] = save;
        }
    }
    free(m.b);
}
END_TEST

START_TEST(test_npy_load_refuses_fifos_and_directories_without_blocking)
{
    char dir[] = "/tmp/sift_npy_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/f.npy", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    npy_rows r;
    char msg[256];
    ck_assert_int_eq(npy_load(fifo, &r, msg, sizeof msg), 2);
    ck_assert_msg(strstr(msg, ": error: not a regular file (a FIFO)") != NULL, "%s", msg);
    ck_assert_int_eq(npy_load(dir, &r, msg, sizeof msg), 2);
    ck_assert_msg(strstr(msg, "not a regular file (a directory)") != NULL, "%s", msg);
    ck_assert_int_eq(npy_load("/dev/zero", &r, msg, sizeof msg), 2);
    ck_assert_msg(strstr(msg, "not a regular file (a character device)") != NULL, "%s", msg);
    /* A regular file reads whole; the message of a bad one names it once. */
    char path[64];
    snprintf(path, sizeof path, "%s/ok.npy", dir);
    img m = make_s(2, GOOD, 6);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(m.b, 1, m.n, f), m.n);
    fclose(f);
    ck_assert_int_eq(npy_load(path, &r, msg, sizeof msg), 0);
    ck_assert_int_eq(r.steps, 2);
    npy_free(&r);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(m.b, 1, m.n - 1, f), m.n - 1);
    fclose(f);
    ck_assert_int_eq(npy_load(path, &r, msg, sizeof msg), 1);
    ck_assert_ptr_eq(strstr(msg, path), msg);
    ck_assert_ptr_null(strstr(msg + strlen(path), path));
    free(m.b);
    unlink(path);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("fields");
    tcase_add_test(tc, test_npy_valid_files_of_every_version_parse);
    tcase_add_test(tc, test_npy_magic_version_and_header_length_are_checked);
    tcase_add_test(tc, test_npy_header_strings_are_printable_ascii_with_no_nul);
    tcase_add_test(tc, test_npy_dtype_order_and_shape_are_range_checked);
    suite_add_tcase(s, tc);
    tc = tcase_create("corrupt");
    tcase_add_test(tc, test_npy_every_truncation_and_byte_change_is_an_error_or_a_valid_parse);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_test(tc, test_npy_load_refuses_fifos_and_directories_without_blocking);
    suite_add_tcase(s, tc);
    return s;
}
