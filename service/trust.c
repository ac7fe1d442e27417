/* trust.c -- the verdict on masters found without their record (see trust.h). */
#include "trust.h"

#include "jw.h"
#include "log.h"
#include "loop.h"
#include "master.h"
#include "proto.h"
#include "redlock.h"

int trust_any_unmarked(const master_conn *masters, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (masters[i].state == MASTER_UNMARKED)
            return 1;
    return 0;
}

void trust_judge_unmarked(master_conn *masters, size_t n, int judge, const char *origin,
                          log_ctx *log)
{
    int64_t now = clock_now_us();
    if (!judge) {
        for (size_t i = 0; i < n; i++) {
            master_conn *m = &masters[i];
            if (m->state == MASTER_UNMARKED && now - m->check_sent_us > 20 * 1000)
                master_recheck(m);
        }
        return;
    }
    /* A new cluster: every master bare, in answers to checks sent after the last of
     * them was found bare.  Then all of them are marked in one pass, before any of them
     * can answer "marked" to a verdict on another. */
    int64_t last_bare = 0;
    int all_bare = 1;
    for (size_t i = 0; i < n; i++) {
        master_conn *m = &masters[i];
        if (m->state != MASTER_UNMARKED)
            all_bare = 0;
        else if (m->unmarked_at_us > last_bare)
            last_bare = m->unmarked_at_us;
    }
    if (all_bare) {
        int fresh = 1;
        for (size_t i = 0; i < n; i++) {
            master_conn *m = &masters[i];
            if (m->check_inflight || m->seen_state != PROTO_MARKER_UNMARKED || m->check_sent_us < last_bare ||
                m->check_recv_us < m->check_sent_us) {
                fresh = 0;
                master_recheck(m);
            }
        }
        if (fresh)
            for (size_t i = 0; i < n; i++)
                master_resolve_marker(&masters[i], 0, origin);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        master_conn *m = &masters[i];
        if (m->state != MASTER_UNMARKED || m->check_inflight)
            continue;
        redlock_peer_view views[CONFIG_MAX_MASTERS];
        size_t k = 0;
        for (size_t j = 0; j < n; j++) {
            master_conn *p = &masters[j];
            if (j == i)
                continue;
            views[k].state = p->state >= MASTER_UNMARKED ? p->seen_state : -1;
            views[k].fresh = p->check_sent_us >= m->unmarked_at_us &&
                             p->check_recv_us >= p->check_sent_us && !p->check_inflight;
            if (!views[k].fresh)
                master_recheck(p); /* no-op while one is in flight or it is down */
            k++;
        }
        /* With some master not bare, MARK cannot come out (that needs all of them bare,
         * handled above): a record anywhere means this one lost its data. */
        if (redlock_judge_unmarked(views, k) == RL_VERDICT_QUARANTINE) {
            master_resolve_marker(m, 1, origin);
        } else if (now - m->waiting_logged_us > 10 * 1000 * 1000 && now - m->unmarked_at_us > 1000 * 1000) {
            m->waiting_logged_us = now;
            char fields[512];
            jw j;
            jw_init(&j, fields, sizeof fields);
            jw_key_str(&j, "master", m->cfg->address);
            jw_key_str(&j, "reason", "no record, and not every master has answered: a new "
                                     "cluster needs all of its masters up once");
            log_event(log, LOG_LEVEL_WARN, "master unjudged", fields);
        }
    }
}
