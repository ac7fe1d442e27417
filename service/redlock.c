/* redlock.c -- pure Redlock decisions (see redlock.h and docs/DESIGN.md). */
#include "redlock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

void redlock_tally_of(const redlock_reply *r, size_t n, redlock_tally *t)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    for (size_t i = 0; i < n; i++) {
        if (r[i].state == RL_SLOT_OK)
            t->ok++;
        else if (r[i].state == RL_SLOT_REFUSED)
            t->refused++;
        else if (r[i].state == RL_SLOT_FAILED)
            t->failed++;
        t->answered += r[i].answered != 0;
    }
}

int64_t redlock_drift_ms(int64_t ttl_ms, double drift_factor)
{
    return (int64_t)ceil((double)ttl_ms * drift_factor) + 2;
}

int64_t redlock_validity_ms(int64_t ttl_ms, int64_t elapsed_us, double drift_factor)
{
    /* Round the elapsed time up: the caller must never be told more than it has. */
    int64_t elapsed_ms = (elapsed_us + 999) / 1000;
    return ttl_ms - elapsed_ms - redlock_drift_ms(ttl_ms, drift_factor);
}

int64_t redlock_inspect_validity_ms(int64_t remaining_ms, double drift_factor)
{
    if (remaining_ms < 0)
        return -1;
    int64_t v = remaining_ms - redlock_drift_ms(remaining_ms, drift_factor);
    return v > 0 ? v : 0;
}

int redlock_decide(const redlock_tally *t, size_t quorum, int wait_all)
{
    size_t answered = t->ok + t->refused;
    size_t pending = t->n - answered - t->failed;
    if (pending == 0 || !wait_all) {
        if (t->ok >= quorum)
            return RL_DECIDE_QUORUM;
        if (t->ok + pending < quorum) {
            /* The quorum is out of reach: is it a refusal or missing masters? */
            if (answered >= quorum)
                return RL_DECIDE_NO_QUORUM;
            if (answered + pending < quorum)
                return RL_DECIDE_UNAVAILABLE;
        }
    }
    return RL_DECIDE_WAIT;
}

uint64_t redlock_token(const redlock_reply *r, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].state == RL_SLOT_OK && r[i].fence > t)
            t = r[i].fence;
    return t;
}

/* F of master i for name j: fences[i * k + j], or r[i].fence for one name (NULL). */
static uint64_t fence_of(const redlock_reply *r, const uint64_t *fences, size_t k, size_t i,
                         size_t j)
{
    return fences ? fences[i * k + j] : r[i].fence;
}

static int below_a_token(const redlock_reply *r, const uint64_t *fences, size_t k, size_t i,
                         const uint64_t *tokens)
{
    for (size_t j = 0; j < k; j++)
        if (fence_of(r, fences, k, i, j) < tokens[j])
            return 1;
    return 0;
}

uint64_t redlock_plan_raise(const redlock_reply *r, size_t n, size_t quorum, const uint64_t *fences,
                            size_t k, uint64_t *tokens)
{
    for (size_t j = 0; j < k; j++) {
        tokens[j] = 0;
        for (size_t i = 0; i < n; i++)
            if (r[i].state == RL_SLOT_OK && fence_of(r, fences, k, i, j) > tokens[j])
                tokens[j] = fence_of(r, fences, k, i, j);
    }
    uint64_t mask = 0;
    size_t fenced = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].state != RL_SLOT_OK && r[i].state != RL_SLOT_REFUSED)
            continue;
        if (below_a_token(r, fences, k, i, tokens))
            mask |= i < 64 ? (uint64_t)1 << i : 0;
        else if (r[i].state == RL_SLOT_OK)
            fenced++;
    }
    return fenced >= quorum ? 0 : mask;
}

size_t redlock_fenced(const redlock_reply *r, size_t n, const uint64_t *fences, size_t k,
                      const uint64_t *tokens, uint64_t acked)
{
    size_t fenced = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].state == RL_SLOT_OK &&
            ((i < 64 && (acked >> i & 1)) || !below_a_token(r, fences, k, i, tokens)))
            fenced++;
    return fenced;
}

int redlock_any_held_by_quorum(const redlock_reply *r, size_t n, size_t quorum,
                               const uint64_t *holders, size_t k)
{
    size_t unknown = 0;
    for (size_t i = 0; i < n; i++)
        unknown += r[i].state == RL_SLOT_FAILED || r[i].state == RL_SLOT_PENDING;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < n; i++) {
            uint64_t h = holders[i * k + j];
            if (r[i].state != RL_SLOT_REFUSED || !h)
                continue;
            size_t same = 0;
            for (size_t m = 0; m < n; m++)
                same += r[m].state == RL_SLOT_REFUSED && holders[m * k + j] == h;
            if (same + unknown >= quorum)
                return 1;
        }
    return 0;
}

void redlock_handoff_tally(const redlock_reply *r, size_t n, redlock_tally *t)
{
    t->n = n;
    t->ok = t->refused = t->failed = t->answered = 0;
    for (size_t i = 0; i < n; i++) {
        t->answered += r[i].answered != 0;
        if ((r[i].state == RL_SLOT_OK || r[i].state == RL_SLOT_REFUSED) && r[i].released)
            t->ok++; /* the old lease went (or counts a reentrant hold less), whether the
                      * waiter's acquire was granted there or refused (other readers) */
        else if (r[i].state == RL_SLOT_OK || r[i].state == RL_SLOT_REFUSED)
            t->refused++; /* answered: the old lease was not there */
        else
            t->failed++;
    }
}

/* Ascending, in place: at most 64 values (one per master), on every round's decision;
 * an insertion sort, without qsort's indirect calls (and its allocation beyond 1 KiB). */
static void sort_i64(int64_t *v, size_t k)
{
    for (size_t i = 1; i < k; i++) {
        int64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

int64_t redlock_retry_after_ms(const redlock_reply *r, size_t n, size_t quorum,
                               int64_t fallback_ms)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        if (r[i].state == RL_SLOT_OK)
            v[k++] = 0; /* ours: released right after the failed round */
        else if (r[i].state == RL_SLOT_REFUSED && r[i].pttl >= 0)
            v[k++] = r[i].pttl;
        else if (r[i].state == RL_SLOT_REFUSED && r[i].pttl == -2)
            v[k++] = 0; /* gone by the time it was asked */
    }
    if (quorum == 0 || k < quorum)
        return fallback_ms;
    sort_i64(v, k);
    return v[quorum - 1];
}

int redlock_inspect_holder(const redlock_reply *r, size_t n, size_t quorum, int64_t *valid_ms)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].state != RL_SLOT_OK || !r[i].has_value)
            continue;
        int64_t ttls[64];
        size_t k = 0;
        for (size_t j = 0; j < n && k < 64; j++)
            if (r[j].state == RL_SLOT_OK && r[j].has_value && r[j].value_len == r[i].value_len &&
                memcmp(r[j].value, r[i].value, r[i].value_len) == 0)
                ttls[k++] = r[j].pttl < 0 ? INT64_MAX : r[j].pttl;
        if (k >= quorum) {
            sort_i64(ttls, k);
            /* k - quorum is the index of the quorum-th largest */
            *valid_ms = ttls[k - quorum];
            return (int)i;
        }
    }
    *valid_ms = 0;
    return -1;
}

uint64_t redlock_max_fence(const redlock_reply *r, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if ((r[i].state == RL_SLOT_OK || r[i].state == RL_SLOT_REFUSED) && r[i].fence > m)
            m = r[i].fence;
    return m;
}

int64_t redlock_retry_delay_ms(int lock_held, int64_t retry_after_ms, int64_t remaining_ms,
                               uint32_t rnd)
{
    int64_t d;
    if (lock_held) {
        /* Try when it should free; the jitter spreads waiters of other instances. */
        d = (retry_after_ms < 0 ? 0 : retry_after_ms) + 1 + (int64_t)(rnd % 10);
    } else {
        /* Masters missing: back off 25..125 ms before asking them again. */
        d = 25 + (int64_t)(rnd % 101);
    }
    if (d > remaining_ms)
        d = remaining_ms;
    return d < 0 ? 0 : d;
}

int redlock_judge_unmarked(const redlock_peer_view *peers, size_t n)
{
    int all = 1;
    for (size_t i = 0; i < n; i++) {
        if (!peers[i].fresh || peers[i].state < 0) {
            all = 0;
            continue;
        }
        /* A master with a record: the cluster may have granted (a grant needs masters
         * that carry one), even if no counter shows it yet -- a grant in flight when
         * this master was wiped.  It lost its data. */
        if (peers[i].state != PROTO_MARKER_UNMARKED)
            return RL_VERDICT_QUARANTINE;
    }
    return all ? RL_VERDICT_MARK : RL_VERDICT_WAIT;
}

int64_t redlock_quorum_at_least(int64_t *v, size_t k, size_t quorum)
{
    if (quorum == 0 || k < quorum)
        return 0;
    sort_i64(v, k); /* ascending: the quorum-th largest is at k - quorum */
    return v[k - quorum];
}

int64_t redlock_quorum_count(const redlock_reply *r, size_t n, size_t quorum)
{
    int64_t c[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
        if (r[i].state == RL_SLOT_OK)
            c[k++] = r[i].count;
    return redlock_quorum_at_least(c, k, quorum);
}

static int held_by(const redlock_reply *r, size_t n, size_t quorum, int count_unknown)
{
    size_t failed = 0, best = 0;
    for (size_t i = 0; i < n && count_unknown; i++)
        failed += r[i].state == RL_SLOT_FAILED || r[i].state == RL_SLOT_PENDING;
    for (size_t i = 0; i < n; i++) {
        if (r[i].state != RL_SLOT_REFUSED)
            continue;
        if (!r[i].has_value)
            return 1; /* a refusal that does not say who holds: assume one lease does */
        size_t same = 0;
        for (size_t j = 0; j < n; j++)
            same += r[j].state == RL_SLOT_REFUSED && r[j].has_value &&
                    r[j].value_len == r[i].value_len &&
                    memcmp(r[j].value, r[i].value, r[i].value_len) == 0;
        if (same > best)
            best = same;
    }
    return best + failed >= quorum && best > 0;
}

int redlock_held_by_quorum(const redlock_reply *r, size_t n, size_t quorum)
{
    return held_by(r, n, quorum, 1);
}

int redlock_held_for_sure(const redlock_reply *r, size_t n, size_t quorum)
{
    return held_by(r, n, quorum, 0);
}

int64_t redlock_granted_ms(const redlock_reply *r, size_t n, size_t quorum, int64_t ttl_ms)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
        if (r[i].state == RL_SLOT_OK)
            v[k++] = r[i].pttl > 0 ? r[i].pttl : ttl_ms;
    return k >= quorum && quorum ? redlock_quorum_at_least(v, k, quorum) : ttl_ms;
}

int64_t redlock_extended_ms(const redlock_reply *r, size_t n, size_t quorum, int64_t ttl_ms)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
        if (r[i].state == RL_SLOT_OK)
            v[k++] = r[i].bound_ms >= 0 && r[i].bound_ms < ttl_ms ? r[i].bound_ms : ttl_ms;
    return k >= quorum && quorum ? redlock_quorum_at_least(v, k, quorum) : ttl_ms;
}

int64_t redlock_bound_left_ms(const redlock_reply *r, size_t n, size_t quorum, int ok)
{
    int64_t v[64], least = -1;
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        if (r[i].bound_ms < 0 || r[i].state != (ok ? RL_SLOT_OK : RL_SLOT_REFUSED))
            continue;
        v[k++] = r[i].bound_ms;
        if (least < 0 || r[i].bound_ms < least)
            least = r[i].bound_ms;
    }
    if (!ok || !k)
        return least;
    /* masters that extended without a bound (none, in practice) do not lower it */
    return redlock_quorum_at_least(v, k, quorum < k ? quorum : k);
}

int64_t redlock_resting_ms(const redlock_reply *r, size_t n, size_t quorum)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
        v[k++] = r[i].state != RL_SLOT_OK ? INT64_MAX : r[i].rest_ms > 0 ? r[i].rest_ms : 0;
    if (!quorum || k < quorum)
        return 0;
    sort_i64(v, k);
    return v[quorum - 1] == INT64_MAX ? 0 : v[quorum - 1];
}

int redlock_token_current(const redlock_reply *r, size_t n, int holder, uint64_t token)
{
    if (holder < 0 || (size_t)holder >= n)
        return 0;
    const redlock_reply *h = &r[holder];
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].state == RL_SLOT_OK && r[i].has_value && r[i].value_len == h->value_len &&
            memcmp(r[i].value, h->value, h->value_len) == 0 && r[i].stored > top)
            top = r[i].stored;
    return top != 0 && top == token;
}

int redlock_release_known(const int64_t *left, size_t n, size_t quorum, int64_t *holds)
{
    /* The holds a quorum may count lie between two bounds: the masters yet to answer
     * counting none (lo) or any number (hi).  Known once the bounds meet; they only
     * close in as answers come. */
    int64_t lo[64], hi[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++, k++) {
        lo[k] = left[i] < 0 ? 0 : left[i];
        hi[k] = left[i] < 0 ? INT64_MAX : left[i];
    }
    int64_t a = redlock_quorum_at_least(lo, k, quorum);
    *holds = redlock_quorum_at_least(hi, k, quorum);
    return a == *holds;
}

int64_t redlock_release_target(const int64_t *left, uint64_t found, size_t n)
{
    int64_t t = -1;
    for (size_t i = 0; i < n && i < 64; i++)
        if ((found >> i & 1) && left[i] > t)
            t = left[i] < 0 ? t : left[i];
    return t;
}
