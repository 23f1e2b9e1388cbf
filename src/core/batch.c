/*
 * batch.c - sampling n chains in one call (sift_chains_sample; docs/api.md,
 * "Batches").
 *
 * A batch is the loop of single calls, slot by slot, in slot order: each
 * slot runs the chain's own public sample (slice or row) and, with
 * SIFT_BATCH_ACCEPT, its own accept. That is the whole proof that a batch
 * is bitwise the sequential loop: there is no second implementation of a
 * step to keep in agreement. What the call adds is what a caller across
 * a foreign-function boundary would otherwise pay once per slot, and:
 * - per-slot statuses: a slot's failure is recorded and the loop goes
 *   on; the failing call changed nothing of its chain (the single-call
 *   contract) and nothing of the others (they are different chains);
 * - the duplicate check: the same chain in two slots would make slot j's
 *   result depend on slot i's, so the call is refused as a whole. The
 *   scan marks each chain with its slot (sift_chain.batch_mark) and
 *   finds a mark already set: O(n), no allocation, no sort. Every mark
 *   is cleared before the scan returns, before any sampling, so no
 *   caller code (hooks, custom stages, allocators) ever sees one;
 * - the busy rule (core/chain.c): a slot whose chain is busy at the call
 *   (the batch was started from one of its callbacks) gets SIFT_E_STATE
 *   and is not touched; every chain of the batch is held (a busy one
 *   once more) from before the first slot runs until after the last, so
 *   a callback of any slot finds every chain of the batch busy. The
 *   slots run the bodies of the single calls (which do not check the
 *   hold);
 * - the positional hook: args->hook, told the slot, is installed as the
 *   chain's row hook for its slot only (a trampoline, as verify.c does)
 *   and the chain's own hook restored on every path.
 *
 * Invariants: nothing here allocates or creates a thread; a chain's
 * batch_mark is 0 outside the scan; a slot touches only its own chain,
 * its own tokens[i], statuses[i] and errors[i].
 */
#include "../sift_internal.h"
#include "step.h"

#define BATCH_FLAGS ((uint32_t)SIFT_BATCH_ACCEPT)

void sift_batch_args_init(sift_batch_args *a)
{
    if (!a)
        return;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
}

/* The row hook of a slot when args->hook is set: the caller's positional
 * hook with the slot as the position. */
typedef struct slot_tramp {
    sift_row_hook_at at;
    void *at_user;
    int32_t slot;
} slot_tramp;

static int tramp_call(void *user, float *row, int32_t n_vocab)
{
    const slot_tramp *t = (const slot_tramp *)user;
    return t->at(t->at_user, t->slot, row, n_vocab);
}

/* Marks chains[0..n) with their slots; on the first chain already
 * marked, *dup = its later slot and *first = the earlier one. Clears
 * every mark it set before returning. */
static int find_duplicate(sift_chain *const *chains, size_t n, size_t *first, size_t *dup)
{
    size_t i = 0;
    int found = 0;
    for (; i < n; i++) {
        sift_chain *c = chains[i];
        if (!c)
            continue;
        if (c->batch_mark) {
            *first = c->batch_mark - 1;
            *dup = i;
            found = 1;
            break;
        }
        c->batch_mark = i + 1;
    }
    /* Clear what was set: slots [0, i); the duplicate's mark belongs to
     * its first slot, which is among them. */
    for (size_t j = 0; j < i; j++)
        if (chains[j])
            chains[j]->batch_mark = 0;
    return found;
}

static sift_status check_args(const sift_batch_args *a, sift_batch_args *full,
                              const int32_t *tokens, const sift_status *statuses, sift_error *err)
{
    if (!a)
        return sift__fail(err, SIFT_E_ARG, "args is NULL");
    sift_status s = sift__check_struct_size(err, "sift_batch_args", a->struct_size, sizeof *a);
    if (s)
        return s;
    sift_batch_args_init(full);
    memcpy(full, a, a->struct_size);
    if (full->n > (size_t)INT32_MAX)
        return sift__fail(err, SIFT_E_ARG, "args.n = %zu is above INT32_MAX", full->n);
    if (full->flags & ~BATCH_FLAGS)
        return sift__fail(err, SIFT_E_ARG, "args.flags has unknown bits 0x%x",
                          (unsigned)(full->flags & ~BATCH_FLAGS));
    if (full->n == 0)
        return SIFT_OK;
    if (!full->chains || !tokens || !statuses)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL",
                          !full->chains ? "args.chains" : (!tokens ? "tokens" : "statuses"));
    if (!full->slices == !full->rows)
        return sift__fail(err, SIFT_E_ARG, "give exactly one of args.slices and args.rows (%s)",
                          full->slices ? "both are set" : "neither is set");
    size_t first = 0, dup = 0;
    if (find_duplicate(full->chains, full->n, &first, &dup))
        return sift__fail_at(err, SIFT_E_ARG, (int64_t)dup,
                             "args.chains[%zu] is args.chains[%zu]: a chain may be in one slot "
                             "only",
                             dup, first);
    return SIFT_OK;
}

/* One slot: the single calls it stands for. */
static sift_status run_slot(const sift_batch_args *a, size_t i, int32_t *token, sift_error *err)
{
    sift_chain *c = a->chains[i];
    *token = -1;
    if (!c)
        return sift__fail(err, SIFT_E_ARG, "chain is NULL");
    /* The chain's workspace, if it has one, for its sample only: chains
     * of later slots may share it. */
    sift__lent lent;
    sift_status s = sift__ws_lend(c, c->workspace, &lent, err);
    if (s)
        return s;
    if (a->rows) {
        s = sift__sample_row(c, a->rows[i], a->n_vocab, token, 1, err);
    } else if (a->hook) {
        slot_tramp t = {a->hook, a->hook_user, (int32_t)i};
        sift_row_hook saved = c->hook;
        void *saved_user = c->hook_user;
        c->hook = tramp_call;
        c->hook_user = &t;
        s = sift__sample_slice(c, &a->slices[i], token, err);
        c->hook = saved;
        c->hook_user = saved_user;
    } else {
        s = sift__sample_slice(c, &a->slices[i], token, err);
    }
    sift__ws_return(c, &lent);
    if (s) {
        *token = -1;
        return s;
    }
    if (a->flags & SIFT_BATCH_ACCEPT)
        s = sift__accept(c, *token, 0, err);
    return s;
}

sift_status sift_chains_sample(const sift_batch_args *args, int32_t *tokens, sift_status *statuses,
                               sift_error *err)
{
    sift_batch_args a;
    sift_batch_args_init(&a);
    sift_status s = check_args(args, &a, tokens, statuses, err);
    if (s) {
        /* Refused as a whole: say so in every slot the caller can see. */
        size_t n = args && args->struct_size >= offsetof(sift_batch_args, n) + sizeof args->n &&
                           args->n <= (size_t)INT32_MAX
                       ? args->n
                       : 0;
        for (size_t i = 0; i < n; i++) {
            if (tokens)
                tokens[i] = -1;
            if (statuses)
                statuses[i] = s;
        }
        return s;
    }
    /* The busy check of every slot before any is touched (a busy chain's
     * slot is refused), then the hold of every chain of the batch; a
     * chain is in one slot only, so each is held and released once. */
    for (size_t i = 0; i < a.n; i++) {
        sift_error local;
        statuses[i] = sift__chain_enter(a.chains[i], a.errors ? &a.errors[i] : &local);
    }
    for (size_t i = 0; i < a.n; i++)
        if (a.chains[i])
            sift__chain_hold(a.chains[i]);
    sift_status first = SIFT_OK;
    for (size_t i = 0; i < a.n; i++) {
        sift_error local;
        sift_error *e = a.errors ? &a.errors[i] : &local;
        sift_status si = statuses[i];
        if (si) {
            tokens[i] = -1;
            if (!a.errors) /* the message of the refusal, for err */
                (void)sift__chain_enter(a.chains[i], e);
        } else {
            si = run_slot(&a, i, &tokens[i], e);
        }
        statuses[i] = si;
        if (si && !first) {
            first = si;
            sift__fail_at(err, si, (int64_t)i, "slot %zu: %s", i, e->message);
        }
    }
    for (size_t i = 0; i < a.n; i++)
        if (a.chains[i])
            sift__chain_release(a.chains[i]);
    return first;
}
