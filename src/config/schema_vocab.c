/*
 * schema_vocab.c - the `vocab:` key.
 *
 * What it owns: `vocab: FILE` and `vocab: {file, special, eog}`: the
 * file must open as a regular file through the helper the loaders use
 * (so `sift check` and the build judge it alike; only opened, never
 * parsed here), special-token texts and ids, and the end-of-generation
 * list; ids are checked against vocab_size when the config gives one
 * (max_vocab otherwise).
 */
#include <stdio.h>
#include <unistd.h>

#include "schema.h"

enum { MAX_SPECIAL_TOKENS = 4096 };

/* The vocabulary file: a .tiktoken or .gguf path that must open as a
 * regular file (the same helper the loaders use, so `sift check` and
 * the build path judge it alike). Only opened: a .gguf holds the model
 * too and can be far larger than any config cap; the loaders read it. */
static void vocab_file(cfg_validator *v, const cfg_node *n)
{
    sift_config *cfg = v->cfg;
    if (!sift__cfg_get_str(v, n, "vocab"))
        return;
    size_t l = n->len;
    int tik = l > 9 && !memcmp(n->val + l - 9, ".tiktoken", 9);
    int gguf = l > 5 && !memcmp(n->val + l - 5, ".gguf", 5);
    if (!tik && !gguf) {
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                         "vocab must be a .tiktoken or .gguf file, got '%s'", sift__cfg_echo(v, n));
        return;
    }
    size_t nb = strlen(cfg->base_dir);
    char *resolved;
    if (n->val[0] == '/' || nb == 0) {
        resolved = sift__memdup(&cfg->al, n->val, n->len);
    } else {
        resolved = sift__malloc(&cfg->al, nb + n->len + 2, 1);
        if (resolved) {
            memcpy(resolved, cfg->base_dir, nb);
            resolved[nb] = '/';
            memcpy(resolved + nb + 1, n->val, n->len + 1);
        }
    }
    if (!resolved) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    int fd;
    uint64_t size;
    sift_error e;
    if (sift__file_open(resolved, UINT64_MAX, &fd, &size, &e) != SIFT_OK) {
        sift__cfg_err_at(v, n, SIFT_E_IO, "vocab: %s", e.message);
        sift__free(&cfg->al, resolved);
        return;
    }
    close(fd);
    cfg->vocab_path = resolved;
    v->has_vocab_file = 1;
}

/* vocab.special: a mapping token text -> id (the tokens a tiktoken file
 * leaves out). Ids are checked against vocab_size when it is set. */
static void vocab_special(cfg_validator *v, const cfg_node *map)
{
    sift_config *cfg = v->cfg;
    if (map->bad)
        return;
    if (map->type != CFG_MAP) {
        sift__cfg_type_err(v, map, "vocab.special", "mapping of token text to id");
        return;
    }
    sift__cfg_check_keys(v, map, NULL, 0, "vocab.special: ");
    size_t n = map->n_children / 2;
    if (n > MAX_SPECIAL_TOKENS) {
        sift__cfg_err_at(v, map, SIFT_E_CONFIG_LIMIT, "vocab.special has %zu entries; max %d", n,
                         MAX_SPECIAL_TOKENS);
        return;
    }
    if (n == 0)
        return;
    char **texts = sift__calloc(&cfg->al, n, sizeof *texts);
    int32_t *ids = sift__calloc(&cfg->al, n, sizeof *ids);
    if (!texts || !ids) {
        sift__free(&cfg->al, texts);
        sift__free(&cfg->al, ids);
        v->st = SIFT_E_NOMEM;
        return;
    }
    cfg->v_special_texts = texts;
    cfg->v_special_ids = ids;
    size_t k = 0;
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (key->next == CFG_NONE)
            break;
        const cfg_node *val = NODE(v, key->next);
        ki = val->next;
        if (key->bad || key->type != CFG_SCALAR)
            continue;
        if (key->len == 0) {
            sift__cfg_err_at(v, key, SIFT_E_CONFIG_VALUE, "vocab.special: a token text is empty");
            continue;
        }
        if (memchr(key->val, '\0', key->len)) {
            sift__cfg_err_at(v, key, SIFT_E_CONFIG_VALUE,
                             "vocab.special: token text contains a NUL byte");
            continue;
        }
        int64_t x;
        if (!sift__cfg_get_int(v, val, "vocab.special", &x))
            continue;
        int64_t lim = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
        if (x < 0 || x >= lim) {
            sift__cfg_err_at(v, val, SIFT_E_CONFIG_VALUE,
                             "vocab.special: '%s': token %lld is out of range [0, %lld)%s",
                             sift__cfg_echo(v, key), (long long)x, (long long)lim,
                             v->vocab_size ? " (vocab_size)" : " (max_vocab)");
            continue;
        }
        for (size_t j = 0; j < k; j++)
            if (ids[j] == (int32_t)x) {
                sift__cfg_err_at(v, val, SIFT_E_CONFIG_VALUE,
                                 "vocab.special: '%s' has id %lld, as '%s' has",
                                 sift__cfg_echo(v, key), (long long)x, texts[j]);
                x = -1;
                break;
            }
        if (x < 0)
            continue;
        texts[k] = sift__memdup(&cfg->al, key->val, key->len);
        if (!texts[k]) {
            v->st = SIFT_E_NOMEM;
            return;
        }
        ids[k] = (int32_t)x;
        cfg->n_v_special = ++k;
    }
}

/* vocab.eog: a list of end-of-generation ids, or texts of special
 * tokens given in vocab.special. */
static void vocab_eog(cfg_validator *v, const cfg_node *seq)
{
    sift_config *cfg = v->cfg;
    if (seq->bad)
        return;
    if (seq->type != CFG_SEQ) {
        sift__cfg_type_err(v, seq, "vocab.eog", "sequence of token ids");
        return;
    }
    size_t n = seq->n_children;
    if (n > MAX_SPECIAL_TOKENS) {
        sift__cfg_err_at(v, seq, SIFT_E_CONFIG_LIMIT, "vocab.eog has %zu entries; max %d", n,
                         MAX_SPECIAL_TOKENS);
        return;
    }
    if (n == 0)
        return;
    int32_t *ids = sift__calloc(&cfg->al, n, sizeof *ids);
    if (!ids) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    cfg->v_eog = ids;
    size_t i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *e = NODE(v, c);
        char what[32];
        snprintf(what, sizeof what, "vocab.eog[%zu]", i);
        if (e->bad)
            continue;
        if (e->type == CFG_SCALAR &&
            (!sift__cfg_is_plain(e) || !sift__cfg_int_syntax(e->val, e->len))) {
            /* A text names a special token of this section. */
            size_t j = 0;
            while (j < cfg->n_v_special && !(strlen(cfg->v_special_texts[j]) == e->len &&
                                             !memcmp(cfg->v_special_texts[j], e->val, e->len)))
                j++;
            if (j == cfg->n_v_special) {
                sift__cfg_err_at(v, e, SIFT_E_CONFIG_VALUE,
                                 "%s: '%s' is not a token of vocab.special (give its id)", what,
                                 sift__cfg_echo(v, e));
                continue;
            }
            ids[cfg->n_v_eog++] = cfg->v_special_ids[j];
            continue;
        }
        int32_t id;
        if (sift__cfg_token_id(v, e, what, &id))
            ids[cfg->n_v_eog++] = id;
    }
}

/* `vocab: FILE`, or `vocab: {file: FILE, special: {TEXT: ID...}, eog:
 * [ID or TEXT...]}` (docs/config.md). */
void sift__cfg_vocab_key(cfg_validator *v, const cfg_node *n)
{
    static const char *const KEYS[] = {"file", "special", "eog"};
    if (n->bad)
        return;
    if (n->type != CFG_MAP) {
        vocab_file(v, n);
        return;
    }
    sift__cfg_check_keys(v, n, KEYS, 3, "vocab: ");
    const cfg_node *f = sift__cfg_find(v, n, "file"), *sp = sift__cfg_find(v, n, "special"),
                   *e = sift__cfg_find(v, n, "eog");
    if (!f)
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_KEY, "vocab: the 'file' key is required");
    else
        vocab_file(v, f);
    if (sp && v->st == SIFT_OK)
        vocab_special(v, sp);
    if (e && v->st == SIFT_OK)
        vocab_eog(v, e);
}
