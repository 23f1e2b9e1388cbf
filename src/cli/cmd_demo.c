/*
 * cmd_demo.c - `sift demo`: a generation loop over a built-in toy model.
 *
 * What it owns: a deterministic toy "language model" (no downloads, no
 * files) and a loop that drives a sift chain with it exactly as an
 * inference runtime would: build the chain once, then per step hand sift a
 * whole row of logits, take the token it samples and accept it.
 *
 * The toy model. The vocabulary has V ids (--vocab, default 32000):
 * id 0 is <unk> (always -inf, i.e. banned, as runtimes often do), ids 1
 * and 2 are <s> and </s>, ids 3.. are a few hundred words (the words of a
 * short embedded text, then made-up words built from syllables with a
 * fixed seed), and every other id is an anonymous "<tN>" tail token. The
 * row for the next token depends on the last two tokens:
 *   - every id gets a fixed base logit: tail tokens N(-1, 2^2) drawn once
 *     from a fixed seed, words 4 + 0.2 * min(unigram count, 6);
 *   - every id gets per-step noise N(0, 0.6^2) hashed from (context, id);
 *   - the successors of the last word in the text's bigram table get
 *     +9 + 0.6 * min(count, 3), made-up associations (fixed seed) +7.5, the
 *     successors of the last two words in the trigram table +2.5.
 * That gives rows shaped like a real model's: a handful of tokens near
 * logit 15, a few hundred words near 5, a long normal tail near -1.
 * The normals are sums of uniforms from splitmix64 and every operation is
 * a plain float +, -, * (no libm; the build forbids contracting them
 * into FMAs), so the rows, and therefore the tokens, are the same on
 * every platform.
 *
 * The run: the chain samples every step from the whole row; a clone made
 * before the loop samples every step from a slice of the k the analyzer
 * plans (Prefix(k) plus the extras, built by sift's slice builder, as a
 * device top-k would), with the row hook set to the same row, and each of
 * its tokens must equal the whole-row token ("exact: N/N").
 *
 * The chain is llama.cpp's default sampler order with its default
 * parameters: penalties(64, 1, 0, 0) -> dry(off) -> top_n_sigma(-1) ->
 * top_k(40) -> typical(1) -> top_p(0.95) -> min_p(0.05) -> xtc(0, 0.1) ->
 * temp(0.8) -> dist. llama.cpp's DRY window of -1 ("context size") is
 * written as 4096 here; DRY is off (multiplier 0) either way.
 *
 * Then the same loop runs an OpenAI-style request, temperature 0.7 ->
 * top_p 0.9 -> dist: its slices also carry the bound on the mass of the
 * tokens they leave out (SIFT_SLICE_TAIL_MASS), the sum of exp(l - max)
 * over those tokens that a device computes in the same pass as its top-k
 * (here in double and rounded up by one part in 10^6), which is what lets
 * top_p and the draw decide on a slice (docs/analyzer.md, "Tail mass").
 *
 * Reference behaviour: llama.cpp's common_sampler with default settings.
 * Deliberate differences: none in the loop; the sampler math is sift's.
 * Capability class: not a stage (a CLI command).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "sift.h"

enum {
    DEMO_DEFAULT_STEPS = 32,
    DEMO_MAX_STEPS = 1000000,
    DEMO_DEFAULT_VOCAB = 32000,
    DEMO_MIN_VOCAB = 1000,
    DEMO_MAX_VOCAB = 262144,
    DEMO_DEFAULT_SEED = 42,
    N_SPECIAL = 3, /* <unk>, <s>, </s> */
    N_WORDS = 320, /* text words first, then made-up words */
    MAX_EDGES = 1024,
    MAX_TRIGRAMS = 1024,
    WORD_MAX = 16,
};

/* The model's corpus. Punctuation is separated by spaces so a plain split
 * tokenises it. */
static const char demo_text[] =
    "the river runs past the old mill and under the stone bridge , and the town wakes "
    "when the bell rings . the baker opens the door and the smell of bread fills the "
    "street . children run to the river to watch the boats , and the old keeper of the "
    "bridge tells them stories of the winter when the river froze . he says the ice was "
    "so thick that the whole town walked across it , and the baker carried bread to the "
    "other side . the children laugh , but they believe him . in the evening the light "
    "falls on the water and the boats come home . the keeper lights a lamp on the bridge "
    "and the town grows quiet . a cat sleeps on the warm stones of the mill , and a dog "
    "waits by the door of the bakery . the bell rings once more , and the river carries "
    "the last light of the day down to the sea . in the morning the town wakes again , "
    "the baker opens the door again , and the children run to the river again . nothing "
    "changes , and everything changes , because the river is never the same river twice "
    ". the keeper knows this , and he smiles when the boats leave at dawn .";

static const char *const demo_prompt[] = {"the", "old", "keeper"};

static const char *const syllables[] = {"ka", "lo",  "mir", "ven", "ta",  "sor", "eli", "dun",
                                        "ra", "pel", "ost", "ni",  "qua", "bre", "tis", "ul"};

/* ------------------------------------------------------------------ */
/* Deterministic randomness for the model (not sift's RNG)             */
/* ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* An approximately standard normal from the sum of four 16-bit uniforms
 * (mean 2, variance 1/3, rescaled). Plain float arithmetic only, so it
 * is bit-identical everywhere. */
static float normal4(uint64_t x)
{
    float s = 0.0f;
    for (int i = 0; i < 4; i++, x >>= 16)
        s += (float)(x & 0xFFFFu) * (1.0f / 65536.0f);
    return (s - 2.0f) * 1.7320508f;
}

/* ------------------------------------------------------------------ */
/* The toy model                                                       */
/* ------------------------------------------------------------------ */

typedef struct edge {
    int32_t from, to;
    int32_t count;
    float boost;
} edge;

typedef struct trigram {
    int32_t a, b, c;
} trigram;

typedef struct toy_model {
    int32_t V;
    int32_t n_words; /* word ids are [N_SPECIAL, N_SPECIAL + n_words) */
    char words[N_WORDS][WORD_MAX];
    int32_t unigram[N_WORDS];
    edge edges[MAX_EDGES];
    size_t n_edges;
    trigram tri[MAX_TRIGRAMS];
    size_t n_tri;
    int32_t period; /* the id of "." */
    float *base;    /* V fixed base logits */
    float *row;     /* the row of the current step */
} toy_model;

static int32_t word_id(const toy_model *m, const char *w)
{
    for (int32_t i = 0; i < m->n_words; i++)
        if (!strcmp(m->words[i], w))
            return N_SPECIAL + i;
    return -1;
}

static int32_t add_word(toy_model *m, const char *w)
{
    int32_t id = word_id(m, w);
    if (id >= 0 || m->n_words >= N_WORDS)
        return id;
    snprintf(m->words[m->n_words], WORD_MAX, "%s", w);
    return N_SPECIAL + m->n_words++;
}

static void add_edge(toy_model *m, int32_t from, int32_t to, float boost)
{
    for (size_t i = 0; i < m->n_edges; i++) {
        if (m->edges[i].from == from && m->edges[i].to == to) {
            m->edges[i].count++;
            return;
        }
    }
    if (m->n_edges < MAX_EDGES)
        m->edges[m->n_edges++] = (edge){from, to, 1, boost};
}

/* Splits the text into word ids and fills the unigram, bigram and
 * trigram tables. */
static void learn_text(toy_model *m)
{
    int32_t prev2 = -1, prev1 = -1;
    const char *p = demo_text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (len == 0)
            break;
        char w[WORD_MAX];
        snprintf(w, sizeof w, "%.*s", (int)(len < WORD_MAX - 1 ? len : WORD_MAX - 1), p);
        p += len;
        int32_t id = add_word(m, w);
        if (id < 0)
            continue;
        m->unigram[id - N_SPECIAL]++;
        if (prev1 >= 0)
            add_edge(m, prev1, id, 9.0f);
        if (prev2 >= 0 && m->n_tri < MAX_TRIGRAMS)
            m->tri[m->n_tri++] = (trigram){prev2, prev1, id};
        prev2 = prev1;
        prev1 = id;
    }
    m->period = word_id(m, ".");
}

/* Made-up words and associations from a fixed seed, so the vocabulary has
 * a few hundred words and the text is not the only path. */
static void invent_words(toy_model *m)
{
    uint64_t s = 0x5EEDC0DEull;
    int32_t n_text = m->n_words;
    while (m->n_words < N_WORDS) {
        char w[WORD_MAX] = "";
        int n_syl = 2 + (int)(splitmix64(&s) % 2);
        for (int i = 0; i < n_syl; i++)
            strcat(w, syllables[splitmix64(&s) % (sizeof syllables / sizeof *syllables)]);
        if (word_id(m, w) < 0)
            add_word(m, w);
    }
    /* Every text word gets one weak made-up successor; every made-up word
     * leads back into the text. */
    for (int32_t i = 0; i < m->n_words; i++) {
        int32_t to = (i < n_text) ? N_SPECIAL + (int32_t)(splitmix64(&s) % (uint64_t)m->n_words)
                                  : N_SPECIAL + (int32_t)(splitmix64(&s) % (uint64_t)n_text);
        add_edge(m, N_SPECIAL + i, to, 7.5f);
    }
}

static void model_free(toy_model *m)
{
    if (!m)
        return;
    free(m->base);
    free(m->row);
    free(m);
}

static toy_model *model_new(int32_t V)
{
    toy_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->V = V;
    m->base = malloc((size_t)V * sizeof *m->base);
    m->row = malloc((size_t)V * sizeof *m->row);
    if (!m->base || !m->row) {
        model_free(m);
        return NULL;
    }
    learn_text(m);
    invent_words(m);
    uint64_t s = 0x7A11ull;
    for (int32_t i = 0; i < V; i++) {
        /* Twelve uniforms make a smoother normal than four for the fixed
         * part of the tail. */
        float z = normal4(splitmix64(&s)) + normal4(splitmix64(&s)) + normal4(splitmix64(&s));
        m->base[i] = -1.0f + 2.0f * z * 0.57735027f;
    }
    for (int32_t w = 0; w < m->n_words; w++) {
        int32_t u = m->unigram[w] < 6 ? m->unigram[w] : 6;
        m->base[N_SPECIAL + w] = 4.0f + 0.2f * (float)u;
    }
    m->base[0] = -INFINITY;
    return m;
}

static int is_word(const toy_model *m, int32_t id)
{
    return id >= N_SPECIAL && id < N_SPECIAL + m->n_words;
}

/* Writes the logits of the token after (prev2, prev1) at position `pos`
 * into m->row and returns it. */
static const float *model_row(toy_model *m, int32_t prev2, int32_t prev1, int32_t pos)
{
    /* Anything that is not a word behaves like the end of a sentence. */
    if (!is_word(m, prev1))
        prev1 = m->period;
    uint64_t ctx = ((uint64_t)(uint32_t)prev2 << 40) ^ ((uint64_t)(uint32_t)prev1 << 20) ^
                   (uint64_t)(uint32_t)pos;
    for (int32_t i = 0; i < m->V; i++) {
        uint64_t h = ctx ^ ((uint64_t)(uint32_t)i * 0xD1B54A32D192ED03ull);
        m->row[i] = m->base[i] + 0.6f * normal4(splitmix64(&h));
    }
    m->row[0] = -INFINITY;
    for (size_t e = 0; e < m->n_edges; e++) {
        const edge *ed = &m->edges[e];
        if (ed->from == prev1)
            m->row[ed->to] += ed->boost + 0.6f * (float)(ed->count < 3 ? ed->count : 3);
    }
    for (size_t t = 0; t < m->n_tri; t++)
        if (m->tri[t].a == prev2 && m->tri[t].b == prev1)
            m->row[m->tri[t].c] += 2.5f;
    return m->row;
}

/* The printable form of a token. */
static const char *token_text(const toy_model *m, int32_t id, char *buf, size_t cap)
{
    static const char *const special[N_SPECIAL] = {"<unk>", "<s>", "</s>"};
    if (id >= 0 && id < N_SPECIAL)
        return special[id];
    if (is_word(m, id))
        return m->words[id - N_SPECIAL];
    snprintf(buf, cap, "<t%ld>", (long)id);
    return buf;
}

/* ------------------------------------------------------------------ */
/* The chain                                                           */
/* ------------------------------------------------------------------ */

/* llama.cpp's default chain, in its default order; or (openai) the
 * OpenAI-style request temperature 0.7 -> top_p 0.9 -> dist. */
static sift_status build_chain(sift_chain **out, uint64_t seed, int32_t V, int openai,
                               sift_error *err)
{
    sift_chain_params params;
    sift_chain_params_init(&params);
    params.seed = seed;
    params.n_vocab = V;
    sift_chain *c = NULL;
    sift_status s = sift_chain_new(&c, &params, err);
    if (s)
        return s;
    sift_dry_params dry = {
        .struct_size = sizeof(sift_dry_params),
        .multiplier = 0.0f, /* off */
        .base = 1.75f,
        .allowed_length = 2,
        .last_n = 4096, /* llama.cpp's -1 = "context size" */
        .breakers = NULL,
        .breaker_lengths = NULL,
        .n_breakers = 0,
    };
    if (openai) {
        if ((s = sift_chain_add_temp(c, 0.7f, err)) ||
            (s = sift_chain_add_top_p(c, 0.9f, 0, err)) || (s = sift_chain_add_dist(c, err))) {
            sift_chain_free(c);
            return s;
        }
        *out = c;
        return SIFT_OK;
    }
    if ((s = sift_chain_add_penalties(c, 64, 1.0f, 0.0f, 0.0f, err)) ||
        (s = sift_chain_add_dry(c, &dry, NULL, err)) ||
        (s = sift_chain_add_top_n_sigma(c, -1.0f, err)) || (s = sift_chain_add_top_k(c, 40, err)) ||
        (s = sift_chain_add_typical(c, 1.0f, 0, err)) ||
        (s = sift_chain_add_top_p(c, 0.95f, 0, err)) ||
        (s = sift_chain_add_min_p(c, 0.05f, 0, err)) ||
        (s = sift_chain_add_xtc(c, 0.0f, 0.1f, 0, err)) ||
        (s = sift_chain_add_temp(c, 0.8f, err)) || (s = sift_chain_add_dist(c, err))) {
        sift_chain_free(c);
        return s;
    }
    *out = c;
    return SIFT_OK;
}

static void print_chain(FILE *out, const sift_chain *c)
{
    size_t n = sift_chain_n_stages(c);
    fprintf(out, "chain (%zu stages):\n", n);
    for (size_t i = 0; i < n; i++) {
        int64_t bound = 0;
        sift_class cls = sift_chain_stage_class(c, i, &bound);
        char cbuf[48];
        if (cls == SIFT_CLASS_LOWERS && bound < 0)
            snprintf(cbuf, sizeof cbuf, "%s(unbounded)", sift_class_str(cls));
        else if (cls == SIFT_CLASS_LOWERS || cls == SIFT_CLASS_TOP ||
                 (cls == SIFT_CLASS_RAISES && bound > 0))
            snprintf(cbuf, sizeof cbuf, "%s(%lld)", sift_class_str(cls), (long long)bound);
        else
            snprintf(cbuf, sizeof cbuf, "%s", sift_class_str(cls));
        fprintf(out, "  %2zu  %-12s %s\n", i, sift_chain_stage_name(c, i), cbuf);
    }
}

/* ------------------------------------------------------------------ */
/* The generation loop                                                 */
/* ------------------------------------------------------------------ */

static double now_us(void)
{
    struct timespec ts;
#ifdef CLOCK_MONOTONIC
    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
#endif
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The row hook of the slice run: hands sift the row of the current step
 * (a runtime would copy it off the device here). */
typedef struct row_src {
    const float *row;
    int32_t V;
    int64_t calls;
} row_src;

static int fetch_row(void *user, float *row, int32_t V)
{
    row_src *src = user;
    if (V != src->V)
        return -1;
    memcpy(row, src->row, (size_t)V * sizeof *row);
    src->calls++;
    return 0;
}

/* How a generation run reads the rows. */
typedef struct slice_run {
    sift_slicer *slicer; /* NULL: whole rows */
    int32_t k;
    int32_t *extras; /* capacity max_extras */
    size_t max_extras;
    row_src src;
    int64_t copied;  /* bytes a runtime would copy off the device */
    uint8_t *in_set; /* V flags (tail mass only): ids in the slice */
} slice_run;

/* The bound a device sends with a slice: the sum of exp(l - max) over the
 * tokens the slice leaves out, in double, rounded up. The slicer's prefix
 * is canonical, so its first logit is the row's largest. */
static double tail_mass(slice_run *sr, const sift_slice *sl, const float *row, int32_t V)
{
    for (int32_t i = 0; i < sl->n_prefix; i++)
        sr->in_set[sl->prefix[i].id] = 1;
    for (int32_t i = 0; i < sl->n_extras; i++)
        sr->in_set[sl->extras[i].id] = 1;
    double m = sl->prefix[0].logit, sum = 0.0;
    for (int32_t t = 0; t < V; t++)
        if (!sr->in_set[t] && row[t] > -INFINITY)
            sum += exp((double)row[t] - m);
    for (int32_t i = 0; i < sl->n_prefix; i++)
        sr->in_set[sl->prefix[i].id] = 0;
    for (int32_t i = 0; i < sl->n_extras; i++)
        sr->in_set[sl->extras[i].id] = 0;
    return sum * (1.0 + 1e-6);
}

/* One step: a whole row, or a slice of k (plus the extras) with the row
 * hook set to the same row. */
static sift_status sample_one(sift_chain *c, slice_run *sr, const float *row, int32_t V,
                              int32_t *tok, sift_error *err)
{
    if (!sr || !sr->slicer)
        return sift_chain_sample(c, row, V, tok, err);
    size_t n_extras = 0;
    sift_slice slice;
    sift_status s = sift_chain_extras(c, sr->extras, sr->max_extras, &n_extras, err);
    if (s || (s = sift_slicer_build(sr->slicer, row, V, sr->k, sr->extras, n_extras, &slice, err)))
        return s;
    if (sr->in_set) {
        slice.flags |= SIFT_SLICE_TAIL_MASS;
        slice.tail_mass = tail_mass(sr, &slice, row, V);
        sr->copied += (int64_t)sizeof slice.tail_mass;
    }
    sr->src.row = row;
    int64_t calls = sr->src.calls;
    s = sift_chain_sample_slice(c, &slice, tok, err);
    sr->copied += (int64_t)(slice.n_prefix + slice.n_extras) * (int64_t)sizeof(sift_candidate);
    if (sr->src.calls != calls)
        sr->copied += (int64_t)V * (int64_t)sizeof(float);
    return s;
}

/* Feeds the prompt to the chain (so penalty windows see it, as llama.cpp's
 * server does), then samples and accepts `steps` tokens. The time of each
 * sample call goes to us[] when it is not NULL. */
static sift_status generate(sift_chain *c, toy_model *m, int32_t steps, int32_t *tokens, double *us,
                            slice_run *sr, sift_error *err)
{
    int32_t prev2 = -1, prev1 = -1;
    sift_status s;
    for (size_t i = 0; i < sizeof demo_prompt / sizeof *demo_prompt; i++) {
        int32_t t = word_id(m, demo_prompt[i]);
        if ((s = sift_chain_accept(c, t, err)))
            return s;
        prev2 = prev1;
        prev1 = t;
    }
    for (int32_t step = 0; step < steps; step++) {
        const float *row = model_row(m, prev2, prev1, step);
        int32_t tok;
        double t0 = now_us();
        s = sample_one(c, sr, row, m->V, &tok, err);
        double t1 = now_us();
        if (s || (s = sift_chain_accept(c, tok, err)))
            return s;
        if (us)
            us[step] = t1 - t0;
        tokens[step] = tok;
        prev2 = prev1;
        prev1 = tok;
    }
    return SIFT_OK;
}

/* The analyzer's plan for the chain, stage by stage. */
static void print_plan(FILE *out, const sift_chain *c, const sift_plan *plan,
                       const sift_plan_stage *st)
{
    fprintf(out, "plan: k = %d, %s (%s)\n", (int)plan->k, sift_guarantee_str(plan->guarantee),
            plan->why);
    for (size_t i = 0; i < sift_chain_n_stages(c); i++)
        fprintf(out, "  %2zu  %-12s %s\n", i, sift_chain_stage_name(c, i), st[i].why);
}

static void print_steps(FILE *out, const toy_model *m, int32_t steps, const int32_t *tokens,
                        const double *us)
{
    char buf[32];
    fprintf(out, "%6s %8s %9s  %s\n", "step", "token", "us", "word");
    for (int32_t i = 0; i < steps; i++)
        fprintf(out, "%6ld %8ld %9.1f  %s\n", (long)i + 1, (long)tokens[i], us[i],
                token_text(m, tokens[i], buf, sizeof buf));
    fputs("text:", out);
    for (size_t i = 0; i < sizeof demo_prompt / sizeof *demo_prompt; i++)
        fprintf(out, " %s", demo_prompt[i]);
    fputs(" |", out);
    for (int32_t i = 0; i < steps; i++)
        fprintf(out, " %s", token_text(m, tokens[i], buf, sizeof buf));
    fputc('\n', out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts us[] in place. The first sample sizes the chain's scratch buffers
 * (the only allocation of the loop), so it is reported on its own too. */
static void print_summary(FILE *out, int32_t steps, double *us, int32_t same, const slice_run *sr,
                          int32_t V)
{
    double total = 0.0;
    for (int32_t i = 0; i < steps; i++)
        total += us[i];
    double first = us[0];
    qsort(us, (size_t)steps, sizeof *us, cmp_double);
    double median = (steps % 2) ? us[steps / 2] : 0.5 * (us[steps / 2 - 1] + us[steps / 2]);
    fprintf(out, "steps: %ld\n", (long)steps);
    fprintf(out, "sampling: %.1f us total, %.1f us median per step, %.0f tokens/s\n", total, median,
            total > 0.0 ? (double)steps * 1e6 / total : 0.0);
    fprintf(out, "first step: %.1f us (includes sizing the scratch buffers)\n", first);
    double whole = (double)steps * (double)V * (double)sizeof(float);
    fprintf(out,
            "slice: k = %ld, %.0f bytes copied vs %.0f for whole rows (%.2f%%), hook calls "
            "%lld\n",
            (long)sr->k, (double)sr->copied, whole,
            whole > 0 ? 100.0 * (double)sr->copied / whole : 0.0, (long long)sr->src.calls);
    fprintf(out, "exact: %ld/%ld\n", (long)same, (long)steps);
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef struct demo_opts {
    int32_t steps;
    int32_t vocab;
    uint64_t seed;
    int32_t k; /* 0 = the plan's */
    int quiet;
    int help;
} demo_opts;

static void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: sift demo [--steps N] [--vocab N] [--seed N] [--k N] [--quiet]\n"
            "\n"
            "Generates text with a built-in toy model and llama.cpp's default sampler\n"
            "chain on whole rows, timing each sample; then runs a clone of the chain\n"
            "made before the loop on slices of the analyzer's k (the row hook set)\n"
            "and checks that every token is the same. Then does the same for an\n"
            "OpenAI-style request (temperature 0.7, top_p 0.9), whose slices carry\n"
            "the mass of the tokens they leave out.\n"
            "\n"
            "  --steps N   tokens to generate, 1..%d (default %d)\n"
            "  --vocab N   vocabulary size, %d..%d (default %d)\n"
            "  --seed N    RNG seed, 0..2^64-1 (default %d)\n"
            "  --k N       slice length instead of the plan's (a smaller k makes the\n"
            "              row hook fetch the row when the slice cannot decide)\n"
            "  --quiet     print only the summary\n"
            "  --help      print this help\n",
            DEMO_MAX_STEPS, DEMO_DEFAULT_STEPS, DEMO_MIN_VOCAB, DEMO_MAX_VOCAB, DEMO_DEFAULT_VOCAB,
            DEMO_DEFAULT_SEED);
}

/* Parses an unsigned decimal number with no sign, no junk and no
 * overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Accepts "--name value" and "--name=value"; returns the value or NULL
 * when `arg` is not this option. Advances *i past a separate value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, n) != 0)
        return NULL;
    if (arg[n] == '=')
        return arg + n + 1;
    if (arg[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_range(FILE *errout, const char *name, const char *v, uint64_t lo, uint64_t hi,
                       uint64_t *out)
{
    if (parse_u64(v, out) || *out < lo || *out > hi) {
        fprintf(errout, "sift demo: %s must be an integer in [%llu, %llu], got '%s'\n", name,
                (unsigned long long)lo, (unsigned long long)hi, v);
        return -1;
    }
    return 0;
}

static int parse_opts(int argc, char **argv, demo_opts *o, FILE *errout)
{
    o->steps = DEMO_DEFAULT_STEPS;
    o->vocab = DEMO_DEFAULT_VOCAB;
    o->seed = DEMO_DEFAULT_SEED;
    o->quiet = 0;
    o->help = 0;
    o->k = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        int missing = 0;
        uint64_t x;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            o->help = 1;
        } else if (!strcmp(arg, "--quiet") || !strcmp(arg, "-q")) {
            o->quiet = 1;
        } else if ((v = opt_value(argc, argv, &i, "--steps", &missing))) {
            if (parse_range(errout, "--steps", v, 1, DEMO_MAX_STEPS, &x))
                return -1;
            o->steps = (int32_t)x;
        } else if ((v = opt_value(argc, argv, &i, "--vocab", &missing))) {
            if (parse_range(errout, "--vocab", v, DEMO_MIN_VOCAB, DEMO_MAX_VOCAB, &x))
                return -1;
            o->vocab = (int32_t)x;
        } else if ((v = opt_value(argc, argv, &i, "--k", &missing))) {
            if (parse_range(errout, "--k", v, 1, DEMO_MAX_VOCAB, &x))
                return -1;
            o->k = (int32_t)x;
        } else if ((v = opt_value(argc, argv, &i, "--seed", &missing))) {
            if (parse_range(errout, "--seed", v, 0, UINT64_MAX, &o->seed))
                return -1;
        } else if (missing) {
            fprintf(errout, "sift demo: %s needs a value\n", arg);
            return -1;
        } else {
            fprintf(errout, "sift demo: unknown option '%s'\n", arg);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The command                                                         */
/* ------------------------------------------------------------------ */

static int lib_failure(FILE *errout, const char *what, sift_status s, const sift_error *err)
{
    fprintf(errout, "sift demo: %s: %s (%s)\n", what, err->message, sift_status_str(s));
    return 1;
}

/* One run: the chain on whole rows, timed, then its clone on slices of
 * the planned k (with the tail-mass bound for the OpenAI-style chain);
 * 0 when every token agrees. */
static int run_chain(const demo_opts *op, toy_model *m, int openai, FILE *out, FILE *errout)
{
    const demo_opts o = *op;
    int rc = 1;
    sift_error err;
    sift_chain *chain = NULL, *twin = NULL;
    slice_run sr;
    memset(&sr, 0, sizeof sr);
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    sift_plan_stage *pst = NULL;
    int32_t *tokens = malloc((size_t)o.steps * sizeof *tokens);
    int32_t *tokens2 = malloc((size_t)o.steps * sizeof *tokens2);
    double *us = malloc((size_t)o.steps * sizeof *us);
    if (!tokens || !tokens2 || !us) {
        fprintf(errout, "sift demo: out of memory\n");
        goto done;
    }

    sift_status s = build_chain(&chain, o.seed, o.vocab, openai, &err);
    if (s) {
        rc = lib_failure(errout, "building the chain", s, &err);
        goto done;
    }
    /* The twin is cloned before the first step, so it starts from the same
     * state (seed, empty windows) and must reproduce every token. */
    if ((s = sift_chain_clone(chain, &twin, &err))) {
        rc = lib_failure(errout, "cloning the chain", s, &err);
        goto done;
    }
    /* The twin samples from slices of the planned k, with the row hook
     * set; every token must equal the whole-row chain's. */
    pst = calloc(sift_chain_n_stages(chain), sizeof *pst);
    for (size_t i = 0; pst && i < sift_chain_n_stages(chain); i++)
        pst[i].struct_size = sizeof *pst;
    if (!pst) {
        fprintf(errout, "sift demo: out of memory\n");
        goto done;
    }
    if ((s = sift_chain_plan(chain, &plan, pst, &err))) {
        rc = lib_failure(errout, "planning", s, &err);
        goto done;
    }
    sr.k = o.k > 0 ? o.k : (plan.k > 0 ? plan.k : o.vocab);
    sr.max_extras = plan.max_extras > 0 ? (size_t)plan.max_extras : 1;
    sr.extras = malloc(sr.max_extras * sizeof *sr.extras);
    sr.src.V = o.vocab;
    sr.in_set = openai ? calloc((size_t)o.vocab, 1) : NULL;
    if (!sr.extras || (openai && !sr.in_set)) {
        fprintf(errout, "sift demo: out of memory\n");
        goto done;
    }
    if ((s = sift_slicer_new(&sr.slicer, o.vocab, NULL, &err)) ||
        (s = sift_chain_set_row_hook(twin, fetch_row, &sr.src, &err))) {
        rc = lib_failure(errout, "setting up the slice run", s, &err);
        goto done;
    }
    if (!o.quiet) {
        if (openai)
            fprintf(out, "\nOpenAI-style request: temperature 0.7, top_p 0.9; slices carry the "
                         "tail mass\n");
        else
            fprintf(out, "sift %s demo: V = %ld, seed %llu, %ld steps, toy model of %d words\n",
                    sift_version(), (long)o.vocab, (unsigned long long)o.seed, (long)o.steps,
                    (int)m->n_words);
        print_chain(out, chain);
        print_plan(out, chain, &plan, pst);
    }
    if ((s = generate(chain, m, o.steps, tokens, us, NULL, &err))) {
        rc = lib_failure(errout, "sampling", s, &err);
        goto done;
    }
    if ((s = generate(twin, m, o.steps, tokens2, NULL, &sr, &err))) {
        rc = lib_failure(errout, "sampling from slices", s, &err);
        goto done;
    }
    int32_t same = 0;
    for (int32_t i = 0; i < o.steps; i++)
        same += tokens[i] == tokens2[i];
    if (!o.quiet)
        print_steps(out, m, o.steps, tokens, us);
    print_summary(out, o.steps, us, same, &sr, o.vocab);
    rc = same == o.steps ? 0 : 1;
    if (rc)
        fprintf(errout, "sift demo: the slice run diverged from the whole-row run\n");

done:
    sift_slicer_free(sr.slicer);
    free(sr.extras);
    free(sr.in_set);
    free(pst);
    sift_chain_free(twin);
    sift_chain_free(chain);
    free(us);
    free(tokens2);
    free(tokens);
    return rc;
}

int cmd_demo(int argc, char **argv, FILE *out, FILE *errout)
{
    demo_opts o;
    if (parse_opts(argc, argv, &o, errout)) {
        fprintf(errout, "Run 'sift demo --help' for the options.\n");
        return 2;
    }
    if (o.help) {
        demo_usage(out);
        return 0;
    }
    toy_model *m = model_new(o.vocab);
    if (!m) {
        fprintf(errout, "sift demo: out of memory\n");
        return 1;
    }
    int rc = run_chain(&o, m, 0, out, errout);
    if (rc == 0)
        rc = run_chain(&o, m, 1, out, errout);
    model_free(m);
    return rc;
}
