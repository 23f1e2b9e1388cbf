/*
 * bench_trigger.c - cost per accepted token of a waiting lazy trigger set,
 * after 1,000, 4,000 and 100,000 generated tokens (make bench-trigger).
 *
 * Set A is what tool-calling templates use: two trigger words and a
 * searched pattern with a capture group; set B has 500 tool names as words
 * and the same pattern. Generated text is random English
 * words (about 5 bytes a token) that never contain a trigger, so the set
 * waits the whole time, which is the common and the expensive case.
 *
 * For comparison, "rescan" runs the same patterns with PCRE2 over the
 * whole text generated so far on every token, which is what llama.cpp's
 * lazy grammar does (with std::regex, slower than PCRE2): its cost grows
 * with the length of the generation, sift's does not.
 *
 * Each figure is the mean over the 200 tokens that end at the checkpoint,
 * best of 5 runs (3 for the rescan).
 */
#define _POSIX_C_SOURCE 200809L
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/trigger.h"

#define N_TOK 100000
#define BLOCK 200

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const char *const words[] = {
    " the",   " of",       " and",   " to",     " in",     " a",       " is",   " that",
    " for",   " it",       " as",    " was",    " with",   " be",      " by",   " on",
    " not",   " he",       " this",  " are",    " or",     " his",     " from", " at",
    " which", " but",      " have",  " an",     " had",    " they",    " you",  " were",
    " their", " one",      " all",   " we",     " can",    " her",     " has",  " there",
    " been",  " if",       " more",  " when",   " will",   " would",   " who",  " so",
    " no",    " function", " value", " result", ".",       ",",        "\n",    " (",
    ")",      " data",     " model", " token",  " sample", " grammar", " call", " list"};

static const char *const trig_words[] = {"<tool_call>", "[TOOL_CALLS]"};
static const char *const trig_pattern = "<function=(\\w+)>";

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

int main(void)
{
    static const char *tok[N_TOK + BLOCK];
    size_t nw = sizeof words / sizeof words[0];
    size_t total = 0;
    for (size_t i = 0; i < N_TOK + BLOCK; i++) {
        tok[i] = words[next_u32() % nw];
        total += strlen(tok[i]);
    }
    sift__alloc al;
    if (sift__alloc_init(&al, NULL, NULL))
        return 1;
    /* Set A: what a tool-calling template uses. Set B: 500 tool names as
     * words (BAD_INPUTS T-09) plus the same pattern. */
    static sift__trigger_spec specs_b[501];
    static char names[500][24];
    for (int i = 0; i < 500; i++) {
        snprintf(names[i], sizeof names[i], "<tool_%03d>", i);
        specs_b[i] = (sift__trigger_spec){SIFT__TRIGGER_WORD, names[i], strlen(names[i]), 0};
    }
    specs_b[500] =
        (sift__trigger_spec){SIFT__TRIGGER_PATTERN, trig_pattern, strlen(trig_pattern), 0};
    sift__trigger_spec specs[3] = {
        {SIFT__TRIGGER_WORD, trig_words[0], strlen(trig_words[0]), 0},
        {SIFT__TRIGGER_WORD, trig_words[1], strlen(trig_words[1]), 0},
        {SIFT__TRIGGER_PATTERN, trig_pattern, strlen(trig_pattern), 0},
    };
    static const size_t checkpoints[] = {1000, 4000, 100000};
    double sift_ns[2][3] = {{1e300, 1e300, 1e300}, {1e300, 1e300, 1e300}};
    for (int run = 0; run < 10; run++) {
        int set = run % 2;
        sift__trigger *t;
        sift_error err;
        if (sift__trigger_new(&t, set ? specs_b : specs, set ? 501 : 3, NULL, NULL, &al, &err)) {
            fprintf(stderr, "bench_trigger: %s\n", err.message);
            return 1;
        }
        size_t c = 0;
        double t0 = 0;
        for (size_t i = 0; i < N_TOK; i++) {
            if (i == checkpoints[c] - BLOCK)
                t0 = now_ns();
            int fired;
            int64_t start;
            if (sift__trigger_feed(t, 1, tok[i], strlen(tok[i]), &fired, &start, &err) || fired) {
                fprintf(stderr, "bench_trigger: unexpected %s\n", fired ? "fire" : err.message);
                return 1;
            }
            if (i + 1 == checkpoints[c]) {
                double per = (now_ns() - t0) / BLOCK;
                if (per < sift_ns[set][c])
                    sift_ns[set][c] = per;
                c++;
                if (c == 3)
                    break;
            }
        }
        sift__trigger_free(t);
    }

    /* The rescanning baseline: every pattern searched over the whole text
     * on every token (the words as escaped patterns, as llama.cpp turns
     * them into). */
    const char *rescan_pats[3] = {"<tool_call>", "\\[TOOL_CALLS\\]", trig_pattern};
    pcre2_code *code[3];
    for (int k = 0; k < 3; k++) {
        int ec;
        PCRE2_SIZE eo;
        code[k] = pcre2_compile((PCRE2_SPTR)rescan_pats[k], PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
        if (!code[k])
            return 1;
    }
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    char *text = malloc(total + 1);
    if (!text || !md)
        return 1;
    double rescan_ns[3] = {1e300, 1e300, 1e300};
    for (int run = 0; run < 3; run++) {
        for (int c = 0; c < 3; c++) {
            size_t len = 0;
            for (size_t i = 0; i < checkpoints[c] - BLOCK; i++) {
                size_t l = strlen(tok[i]);
                memcpy(text + len, tok[i], l);
                len += l;
            }
            double t0 = now_ns();
            for (size_t i = checkpoints[c] - BLOCK; i < checkpoints[c]; i++) {
                size_t l = strlen(tok[i]);
                memcpy(text + len, tok[i], l);
                len += l;
                for (int k = 0; k < 3; k++)
                    if (pcre2_match(code[k], (PCRE2_SPTR)text, len, 0, 0, md, NULL) >= 0)
                        return 1;
            }
            double per = (now_ns() - t0) / BLOCK;
            if (per < rescan_ns[c])
                rescan_ns[c] = per;
        }
    }
    printf("lazy trigger set waiting, cost per accepted token (us)\n");
    printf("%10s %12s %14s %16s %16s\n", "tokens", "text bytes", "A: 2w+1p", "B: 500w+1p",
           "A rescanned");
    size_t bytes = 0, i = 0;
    for (int c = 0; c < 3; c++) {
        for (; i < checkpoints[c]; i++)
            bytes += strlen(tok[i]);
        printf("%10zu %12zu %14.2f %16.2f %16.2f\n", checkpoints[c], bytes, sift_ns[0][c] / 1e3,
               sift_ns[1][c] / 1e3, rescan_ns[c] / 1e3);
    }
    printf("A = 2 words + 1 searched pattern, B = 500 words + 1 pattern (window %d bytes);\n"
           "rescanned = A's patterns run by PCRE2 over the whole text on every token, as\n"
           "llama.cpp does (with std::regex, slower still).\n",
           SIFT__TRIGGER_DEFAULT_WINDOW);
    for (int k = 0; k < 3; k++)
        pcre2_code_free(code[k]);
    pcre2_match_data_free(md);
    free(text);
    return 0;
}
