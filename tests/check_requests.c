/*
 * check_requests.c - request bodies as servers receive them
 * (docs/config.md, "Request forms"): the OpenAI form gives the tokens of
 * the chain built by hand in vLLM's order (a property test over random
 * requests), llama-server's logit_bias text is tokenized with the
 * vocabulary and repeated ids add up, the lazy grammar keys map onto
 * sift's triggers, the logprob setting and the form are reported, and
 * the form is never guessed.
 */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"
#include "testutil.h"

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

static sift_config *parse_form(const char *text, int32_t form, sift_status *st)
{
    sift_config_params p;
    sift_config_params_init(&p);
    p.form = form;
    p.base_dir = SIFT_SRCDIR "/tests/data";
    sift_config *cfg = NULL;
    sift_error err;
    *st = sift_config_parse(&cfg, "req.yaml", text, strlen(text), &p, &err);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

static sift_config *parse_ok(const char *text, int32_t form)
{
    sift_status st;
    sift_config *cfg = parse_form(text, form, &st);
    if (st != SIFT_OK)
        for (size_t i = 0; i < sift_config_n_diagnostics(cfg); i++)
            fprintf(stderr, "%s\n", sift_config_diagnostic(cfg, i)->text);
    ck_assert_int_eq(st, SIFT_OK);
    return cfg;
}

/* Runs both chains over the same rows, accepting each one's token, and
 * asserts they pick the same tokens. */
static void same_tokens(sift_chain *a, sift_chain *b, int32_t V, int steps, tu_rng *r)
{
    float *row = malloc((size_t)V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    sift_error err;
    for (int s = 0; s < steps; s++) {
        tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
        int32_t ta = -1, tb = -1;
        sift_status sa = sift_chain_sample(a, row, V, &ta, &err);
        sift_status sb = sift_chain_sample(b, row, V, &tb, &err);
        ck_assert_int_eq(sa, sb);
        if (sa != SIFT_OK)
            continue;
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(a, ta, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, &err), SIFT_OK);
    }
    free(row);
}

/* A random OpenAI request, written as JSON, and the same request as the
 * chain vLLM applies, built through the C API in vLLM's order: logit_bias,
 * penalties over the whole generated text, then greedy below a
 * temperature of 1e-5, else temperature, min_p, top_k, top_p and the
 * draw. The hand-built chain adds every stage the request names, neutral
 * values included; the config leaves those out, which must not change a
 * token. */
START_TEST(test_openai_requests_sample_as_the_vllm_order_chain_built_by_hand)
{
    tu_rng r = {0x0A1u};
    char text[2048], num[64];
    for (int it = 0; it < 300; it++) {
        int32_t V = (int32_t)tu_range(&r, 2, 300);
        uint64_t seed = tu_next(&r);
        int len = snprintf(text, sizeof text, "{\"model\": \"m\", \"seed\": %llu",
                           (unsigned long long)seed);
        float temp = 1, top_p = 1, min_p = 0, freq = 0, pres = 0, rep = 1;
        int32_t top_k = -1, max_tokens = (int32_t)tu_range(&r, 1, 64);
        int has_temp = 0, has_top_p = 0, has_min_p = 0, has_top_k = 0;
        sift_bias bias[4];
        size_t n_bias = 0;
#define ADD(key, var, lo, hi)                                                     \
    if (tu_unif(&r) < 0.5) {                                                      \
        double x = tu_unif(&r) < 0.2 ? (lo) : (lo) + tu_unif(&r) * ((hi) - (lo)); \
        snprintf(num, sizeof num, "%.3f", x);                                     \
        var = strtof(num, NULL);                                                  \
        len += snprintf(text + len, sizeof text - (size_t)len, ", \"%s\": %s", key, num);
#define END }
        ADD("temperature", temp, 0, 2) has_temp = 1;
        END ADD("top_p", top_p, 0.05, 1) has_top_p = 1;
        END ADD("min_p", min_p, 0, 0.5) has_min_p = 1;
        END ADD("frequency_penalty", freq, -2, 2) END ADD("presence_penalty", pres, -2, 2)
            END ADD("repetition_penalty", rep, 0.5, 2) END
#undef ADD
#undef END
            if (tu_unif(&r) < 0.5)
        {
            top_k = (int32_t)tu_range(&r, -1, 50);
            has_top_k = 1;
            len += snprintf(text + len, sizeof text - (size_t)len, ", \"top_k\": %d", (int)top_k);
        }
        if (tu_unif(&r) < 0.3) {
            n_bias = (size_t)tu_range(&r, 1, 4);
            len += snprintf(text + len, sizeof text - (size_t)len, ", \"logit_bias\": {");
            for (size_t i = 0; i < n_bias; i++) {
                bias[i].token = (int32_t)(i * (size_t)V / n_bias); /* distinct ids */
                snprintf(num, sizeof num, "%.2f", -100 + tu_unif(&r) * 200);
                bias[i].bias = strtof(num, NULL);
                len += snprintf(text + len, sizeof text - (size_t)len, "%s\"%d\": %s",
                                i ? ", " : "", (int)bias[i].token, num);
            }
            len += snprintf(text + len, sizeof text - (size_t)len, "}");
        }
        int by_key = tu_unif(&r) < 0.5;
        snprintf(text + len, sizeof text - (size_t)len, ", \"max_tokens\": %d%s}", (int)max_tokens,
                 by_key ? ", \"form\": \"openai\"" : "");
        sift_config *cfg =
            parse_ok(text, by_key ? SIFT_CONFIG_FORM_DOCUMENT : SIFT_CONFIG_FORM_OPENAI);
        ck_assert_int_eq(sift_config_form_of(cfg), SIFT_CONFIG_FORM_OPENAI);
        sift_chain_params cp;
        sift_chain_params_init(&cp);
        cp.n_vocab = V;
        sift_chain *a = NULL, *b = NULL;
        sift_error err;
        ck_assert_int_eq(sift_config_build_chain(cfg, &cp, NULL, &a, &err), SIFT_OK);
        cp.seed = seed;
        ck_assert_int_eq(sift_chain_new(&b, &cp, &err), SIFT_OK);
        if (n_bias)
            ck_assert_int_eq(sift_chain_add_logit_bias(b, bias, n_bias, &err), SIFT_OK);
        if (rep != 1 || freq != 0 || pres != 0)
            ck_assert_int_eq(sift_chain_add_penalties(b, max_tokens, rep, freq, pres, &err),
                             SIFT_OK);
        if (temp < 1e-5f) {
            ck_assert_int_eq(sift_chain_add_greedy(b, &err), SIFT_OK);
        } else {
            if (has_temp)
                ck_assert_int_eq(sift_chain_add_temp(b, temp, &err), SIFT_OK);
            if (has_min_p)
                ck_assert_int_eq(sift_chain_add_min_p(b, min_p, 0, &err), SIFT_OK);
            if (has_top_k)
                ck_assert_int_eq(sift_chain_add_top_k(b, top_k, &err), SIFT_OK);
            if (has_top_p)
                ck_assert_int_eq(sift_chain_add_top_p(b, top_p, 0, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(b, &err), SIFT_OK);
        }
        same_tokens(a, b, V, 24, &r);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(cfg);
    }
}
END_TEST

/* The stage order is vLLM's whatever the order of the keys, but for
 * min_p after top_k (they commute; the property test checks the tokens
 * against vLLM's literal order). */
START_TEST(test_openai_stages_follow_vllms_order_whatever_the_keys_order)
{
    sift_config *cfg = parse_ok("{\"form\": \"openai\", \"top_p\": 0.9, \"top_k\": 5, \"min_p\": "
                                "0.1, \"temperature\": 0.5, \"presence_penalty\": 0.2, "
                                "\"max_tokens\": 9}",
                                SIFT_CONFIG_FORM_DOCUMENT);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    static const char *const want[] = {"penalties", "temp", "top_k", "min_p", "top_p", "dist"};
    ck_assert_uint_eq(sift_chain_n_stages(c), 6);
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(sift_chain_stage_name(c, i), want[i]);
    sift_chain_free(c);
    sift_config_free(cfg);
}
END_TEST

/* The form is the caller's or the document's, never guessed: an OpenAI
 * body without either is llama.cpp's flat form (temperature last, top_k
 * 40 added), and a form key that differs from the caller's is an error. */
START_TEST(test_the_form_is_the_callers_or_the_documents_never_guessed)
{
    const char *body = "{\"temperature\": 0.7, \"top_p\": 0.9}";
    sift_config *cfg = parse_ok(body, SIFT_CONFIG_FORM_DOCUMENT);
    ck_assert_int_eq(sift_config_form_of(cfg), SIFT_CONFIG_FORM_LLAMA_CPP);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "top_k");
    sift_chain_free(c);
    sift_config_free(cfg);
    cfg = parse_ok(body, SIFT_CONFIG_FORM_OPENAI);
    ck_assert_int_eq(sift_config_form_of(cfg), SIFT_CONFIG_FORM_OPENAI);
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "temp");
    sift_chain_free(c);
    sift_config_free(cfg);
    sift_status st;
    cfg = parse_form("{\"form\": \"llama.cpp\"}", SIFT_CONFIG_FORM_OPENAI, &st);
    ck_assert_int_eq(st, SIFT_E_CONFIG_VALUE);
    ck_assert_ptr_nonnull(strstr(sift_config_diagnostic(cfg, 0)->text, "req.yaml:1:10:"));
    sift_config_free(cfg);
    sift_config_params p;
    sift_config_params_init(&p);
    p.form = 3;
    cfg = NULL;
    ck_assert_int_eq(sift_config_parse(&cfg, "x", "{}", 2, &p, &err), SIFT_E_ARG);
    ck_assert_ptr_null(cfg);
    ck_assert_int_eq(sift_config_form_of(NULL), SIFT_CONFIG_FORM_DOCUMENT);
    cfg = parse_ok("chain: [dist]", SIFT_CONFIG_FORM_DOCUMENT);
    ck_assert_int_eq(sift_config_form_of(cfg), SIFT_CONFIG_FORM_DOCUMENT);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_the_logprob_setting_is_reported_for_both_forms)
{
    sift_config_logprobs lp = {.struct_size = sizeof lp};
    sift_config *cfg = parse_ok("{\"n_probs\": 4, \"post_sampling_probs\": true}", 0);
    ck_assert_int_eq(sift_config_get_logprobs(cfg, &lp), 1);
    ck_assert_int_eq(lp.enabled, 1);
    ck_assert_int_eq(lp.top_n, 4);
    ck_assert_int_eq(lp.post_sampling, 1);
    ck_assert_uint_eq(lp.struct_size, sizeof lp);
    /* a caller that knows only the first fields gets only those */
    sift_config_logprobs small = {.struct_size = 8, .top_n = -7, .post_sampling = -7};
    ck_assert_int_eq(sift_config_get_logprobs(cfg, &small), 1);
    ck_assert_int_eq(small.enabled, 1);
    ck_assert_int_eq(small.top_n, -7);
    ck_assert_int_eq(small.post_sampling, -7);
    sift_config_free(cfg);
    cfg = parse_ok("{\"logprobs\": true, \"top_logprobs\": 2}", SIFT_CONFIG_FORM_OPENAI);
    ck_assert_int_eq(sift_config_get_logprobs(cfg, &lp), 1);
    ck_assert_int_eq(lp.top_n, 2);
    ck_assert_int_eq(lp.post_sampling, 0);
    sift_config_free(cfg);
    cfg = parse_ok("{\"top_k\": 3}", 0);
    ck_assert_int_eq(sift_config_get_logprobs(cfg, &lp), 0);
    ck_assert_int_eq(lp.enabled, 0);
    ck_assert_int_eq(sift_config_get_logprobs(NULL, &lp), -1);
    ck_assert_int_eq(sift_config_get_logprobs(cfg, NULL), -1);
    lp.struct_size = 0;
    ck_assert_int_eq(sift_config_get_logprobs(cfg, &lp), -1);
    sift_config_free(cfg);
}
END_TEST

static sift_vocab *cl100k(void)
{
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(
        sift_vocab_load_tiktoken(&v, SIFT_SRCDIR "/tests/data/cl100k_base.tiktoken", NULL, &err),
        SIFT_OK);
    return v;
}

/* llama-server tokenizes logit_bias text and adds repeated ids up: the
 * config's chain draws what a chain with the summed biases of the text's
 * tokens draws. Without a vocabulary the build says where the text is. */
START_TEST(test_llama_logit_bias_text_is_tokenized_and_repeated_ids_add_up)
{
    const char *body = "{\"seed\": 5, \"top_k\": 8, \"temperature\": 1.5,\n"
                       " \"logit_bias\": [[\"Hello, World!\", 3.5], [15, 1.0], [15, 2.0], "
                       "[\"Hello\", 1.0]]}";
    sift_config *cfg = parse_ok(body, 0);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.message, "req.yaml:2:18:"));
    ck_assert_ptr_nonnull(strstr(err.message, "Hello, World!"));
    ck_assert_int_eq(err.line, 2);
    sift_vocab *v = cl100k();
    int32_t V = sift_vocab_size(v);
    sift_chain_params cp;
    sift_chain_params_init(&cp);
    cp.n_vocab = V;
    ck_assert_int_eq(sift_config_build_chain(cfg, &cp, v, &c, &err), SIFT_OK);
    int32_t ids[16];
    size_t n = 0, m = 0;
    ck_assert_int_eq(sift_vocab_encode(v, "Hello, World!", 13, 0, ids, 16, &n, NULL, &err),
                     SIFT_OK);
    ck_assert_uint_gt(n, 1);
    ck_assert_int_eq(sift_vocab_encode(v, "Hello", 5, 0, ids + n, 16 - n, &m, NULL, &err), SIFT_OK);
    ck_assert_uint_eq(m, 1);
    ck_assert_int_eq(ids[0], ids[n]); /* "Hello" is the text's first token: 3.5 + 1 */
    sift_bias b[20];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        b[k++] = (sift_bias){ids[i], i == 0 ? 4.5f : 3.5f};
    b[k++] = (sift_bias){15, 3.0f};
    cp.seed = 5;
    sift_chain *h = NULL;
    ck_assert_int_eq(sift_chain_new(&h, &cp, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(h, b, k, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(h, 8, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(h, 0.95f, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(h, 0.05f, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(h, 1.5f, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(h, &err), SIFT_OK);
    /* rows where the biased tokens matter: small logits, so +3.5 lifts
     * them into the top 8 */
    float *row = malloc((size_t)V * sizeof *row);
    tu_rng r = {77};
    for (int s = 0; s < 40; s++) {
        for (int32_t t = 0; t < V; t++)
            row[t] = (float)(tu_unif(&r) * 4.0);
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &ta, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(h, row, V, &tb, &err), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(c, ta, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(h, tb, &err), SIFT_OK);
    }
    /* the biased set shows in the distribution: a row of zeros leaves
     * only the biased ids at the top */
    memset(row, 0, (size_t)V * sizeof *row);
    sift_token_prob pa[8], pb[8];
    size_t na = 0, nb = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, V, pa, 8, &na, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_distribution(h, row, V, pb, 8, &nb, &err), SIFT_OK);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        ck_assert_int_eq(pa[i].id, pb[i].id);
        ck_assert(pa[i].p == pb[i].p);
    }
    ck_assert_int_eq(pa[0].id, ids[0]);
    free(row);
    sift_chain_free(c);
    sift_chain_free(h);
    sift_vocab_free(v);
    sift_config_free(cfg);
}
END_TEST

/* grammar_lazy and grammar_triggers become the grammar's lazy triggers;
 * the chain builds with the vocabulary. */
START_TEST(test_llama_grammar_triggers_become_lazy_triggers)
{
    sift_config *cfg = parse_ok(
        "{\"grammar\": \"root ::= \\\"{\\\" [a-z]* \\\"}\\\"\", \"grammar_lazy\": true,\n"
        " \"grammar_triggers\": [{\"type\": 1, \"value\": \"<call>\"},\n"
        "   {\"type\": 2, \"value\": \"x(\\\\{)\"}, {\"type\": 3, \"value\": \"(?s).*y\"},\n"
        "   {\"type\": 0, \"value\": \"<|endoftext|>\", \"token\": 100}]}",
        0);
    const sift_config_grammar *g = sift_config_grammar_info(cfg);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(g->lazy, 1);
    ck_assert_uint_eq(g->n_words, 1);
    ck_assert_str_eq(g->words[0], "<call>");
    ck_assert_uint_eq(g->n_patterns, 1);
    ck_assert_str_eq(g->patterns[0], "x(\\{)");
    ck_assert_uint_eq(g->n_full_patterns, 1);
    ck_assert_uint_eq(g->n_tokens, 1);
    ck_assert_int_eq(g->tokens[0], 100);
    sift_vocab *v = cl100k();
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, v, &c, &err), SIFT_OK);
    sift_chain_free(c);
    sift_vocab_free(v);
    sift_config_free(cfg);
}
END_TEST

/* sift_config_describe keeps snprintf's contract. */
START_TEST(test_describe_keeps_snprintfs_contract)
{
    sift_config *cfg =
        parse_ok("{\"form\": \"openai\", \"temperature\": 0.5, \"logprobs\": true}", 0);
    size_t n = sift_config_describe(cfg, NULL, 0);
    ck_assert_uint_gt(n, 20);
    char *full = malloc(n + 1), small[10];
    ck_assert_uint_eq(sift_config_describe(cfg, full, n + 1), n);
    ck_assert_uint_eq(strlen(full), n);
    ck_assert_ptr_nonnull(strstr(full, "  - temperature: {temp: 0.5, delta: 0, exponent: 1}\n"));
    ck_assert_ptr_nonnull(strstr(full, "# logprobs: {top_n: 0, post_sampling: false}"));
    ck_assert_uint_eq(sift_config_describe(cfg, small, sizeof small), n);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert(!memcmp(small, full, sizeof small - 1));
    ck_assert_uint_eq(sift_config_describe(NULL, small, sizeof small), 0);
    free(full);
    sift_config_free(cfg);
}
END_TEST

/* An allocator that fails the n-th allocation and every one after. */
typedef struct failing {
    long left;
    long live;
} failing;

static void *f_alloc(void *user, size_t size)
{
    failing *f = user;
    if (f->left-- <= 0)
        return NULL;
    void *p = malloc(size);
    if (p)
        f->live++;
    return p;
}

static void f_free(void *user, void *p)
{
    failing *f = user;
    if (p)
        f->live--;
    free(p);
}

/* Every allocation of a request's load and build fails in turn: each
 * failure is SIFT_E_NOMEM (or a config that reports it), never a crash
 * or a leak, and once enough succeed the request loads and builds. */
START_TEST(test_failing_each_allocation_of_a_request_is_clean)
{
    static const char *const bodies[] = {
        "{\"form\": \"openai\", \"temperature\": 0.5, \"frequency_penalty\": 0.2, "
        "\"logit_bias\": {\"3\": 1}, \"allowed_token_ids\": [1, 2, 3], "
        "\"tool_choice\": \"auto\", \"tools\": [{\"type\": \"function\", \"function\": "
        "{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}], \"logprobs\": true}",
        "{\"form\": \"openai\", \"response_format\": {\"type\": \"json_schema\", "
        "\"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"integer\"}}}}",
        "{\"logit_bias\": [[\"Hello\", 1], [15, 2], [15, 1]], \"grammar\": \"root ::= [a-z]+\", "
        "\"grammar_lazy\": true, \"grammar_triggers\": [{\"type\": 1, \"value\": \"go\"}, "
        "{\"type\": 2, \"value\": \"x(y)\"}], \"n_probs\": 2}",
    };
    sift_vocab *v = cl100k();
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        int done = 0;
        for (long n = 0; !done && n < 100000; n++) {
            failing f = {n, 0};
            sift_allocator al = {sizeof al, f_alloc, f_free, &f, NULL};
            sift_config_params p;
            sift_config_params_init(&p);
            p.allocator = &al;
            sift_config *cfg = NULL;
            sift_error err;
            sift_status st =
                sift_config_parse(&cfg, "req.yaml", bodies[b], strlen(bodies[b]), &p, &err);
            if (st == SIFT_OK) {
                sift_chain *c = NULL;
                sift_chain_params cp;
                sift_chain_params_init(&cp);
                cp.allocator = &al;
                st = sift_config_build_chain(cfg, &cp, v, &c, &err);
                ck_assert_msg(st == SIFT_OK || st == SIFT_E_NOMEM, "body %zu, n %ld: %s", b, n,
                              err.message);
                done = st == SIFT_OK;
                sift_chain_free(c);
            } else {
                ck_assert_msg(st == SIFT_E_NOMEM, "body %zu, n %ld: status %d", b, n, (int)st);
            }
            sift_config_free(cfg);
            ck_assert_msg(f.live == 0, "body %zu, n %ld: %ld blocks leak", b, n, f.live);
        }
        ck_assert(done);
    }
    sift_vocab_free(v);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("requests");
    TCase *tc = tcase_create("openai");
    tcase_add_test(tc, test_openai_requests_sample_as_the_vllm_order_chain_built_by_hand);
    tcase_add_test(tc, test_openai_stages_follow_vllms_order_whatever_the_keys_order);
    tcase_add_test(tc, test_the_form_is_the_callers_or_the_documents_never_guessed);
    tcase_add_test(tc, test_the_logprob_setting_is_reported_for_both_forms);
    tcase_add_test(tc, test_describe_keeps_snprintfs_contract);
    suite_add_tcase(s, tc);
    tc = tcase_create("llama-server");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_llama_logit_bias_text_is_tokenized_and_repeated_ids_add_up);
    tcase_add_test(tc, test_llama_grammar_triggers_become_lazy_triggers);
    tcase_add_test(tc, test_failing_each_allocation_of_a_request_is_clean);
    suite_add_tcase(s, tc);
    return s;
}
