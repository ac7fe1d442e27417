/* body.c -- the JSON bodies of the HTTP API's answers (see body.h). */
#include "body.h"

#include <stdio.h>

/* {"name" ... : the opening of every single-name body. */
static void open_name(jw *j, const body_lock *l)
{
    jw_obj_open(j);
    jw_key_strn(j, "name", l->name, l->name_len);
}

/* ..."fencing_token","validity_ms","ttl_ms": what a grant and an extension carry. */
static void term(jw *j, const body_lock *l)
{
    jw_key_uint(j, "fencing_token", l->fencing_token);
    jw_key_int(j, "validity_ms", l->validity_ms);
    jw_key_int(j, "ttl_ms", l->ttl_ms);
}

/* "owner": the string, or null for none. */
static void owner(jw *j, const char *o, size_t len)
{
    if (o && len)
        jw_key_strn(j, "owner", o, len);
    else
        jw_raw_fields(j, "\"owner\":null");
}

void body_granted(jw *j, const body_lock *l)
{
    open_name(j, l);
    jw_key_strn(j, "lease", l->lease, l->lease_len);
    term(j, l);
    if (l->mode == 1)
        jw_key_str(j, "mode", "shared");
    if (l->mode == 2) {
        jw_key_int(j, "permits", l->permits);
        jw_key_int(j, "slot", l->slot);
    }
    if (l->holds > 0)
        jw_key_int(j, "holds", l->holds);
    if (l->lock_delay_ms > 0)
        jw_key_int(j, "lock_delay_ms", l->lock_delay_ms);
    if (l->max_hold_ms > 0)
        jw_key_int(j, "max_hold_ms", l->max_hold_ms);
    jw_obj_close(j);
}

void body_released(jw *j, const body_lock *l)
{
    open_name(j, l);
    jw_key_bool(j, "released", l->holds <= 0);
    if (l->holds > 0)
        jw_key_int(j, "holds", l->holds);
    if (l->forced)
        jw_key_bool(j, "forced", 1);
    if (l->resting)
        jw_key_bool(j, "resting", 1);
    jw_obj_close(j);
}

void body_extended(jw *j, const body_lock *l)
{
    open_name(j, l);
    term(j, l);
    if (l->max_hold_left_ms >= 0)
        jw_key_int(j, "max_hold_left_ms", l->max_hold_left_ms);
    jw_obj_close(j);
}

void body_checked(jw *j, const body_lock *l, uint64_t token, int current)
{
    open_name(j, l);
    jw_key_uint(j, "token", token);
    jw_key_bool(j, "current", current);
    jw_key_bool(j, "held", l->held);
    jw_obj_close(j);
}

void body_inspected(jw *j, const body_lock *l)
{
    open_name(j, l);
    if (l->mode == 2) {
        /* a semaphore: its permits as a quorum of masters counts them */
        if (l->permits > 0) {
            jw_key_int(j, "permits", l->permits);
            jw_key_int(j, "held", l->readers);
            jw_key_int(j, "free", l->permits > l->readers ? l->permits - l->readers : 0);
        } else {
            jw_raw_fields(j, "\"permits\":null");
            jw_key_int(j, "held", l->readers);
            jw_raw_fields(j, "\"free\":null");
        }
        jw_obj_close(j);
        return;
    }
    jw_key_bool(j, "held", l->held);
    owner(j, l->held ? l->owner : NULL, l->owner_len);
    jw_key_int(j, "validity_ms", l->validity_ms);
    jw_key_uint(j, "fencing_token", l->fencing_token);
    char index[24]; /* a string: opaque, and larger than a JSON number can carry exactly */
    snprintf(index, sizeof index, "%llu", (unsigned long long)body_index(l));
    jw_key_str(j, "index", index);
    if (l->readers > 0) {
        jw_key_str(j, "mode", "shared");
        jw_key_int(j, "readers", l->readers);
    }
    if (l->holds > 0)
        jw_key_int(j, "holds", l->holds);
    if (!l->held && l->resting_ms > 0)
        jw_key_int(j, "resting_ms", l->resting_ms);
    jw_obj_close(j);
}

uint64_t body_index(const body_lock *l)
{
    return l->fencing_token * 2 + (l->held ? 1 : 0);
}

static void names(jw *j, const body_multi *m)
{
    jw_arr_open(j, "names");
    for (size_t k = 0; k < m->n; k++)
        jw_key_strn(j, NULL, m->names[k], m->lens[k]);
    jw_arr_close(j);
}

void body_multi_granted(jw *j, const body_multi *m)
{
    jw_obj_open(j);
    names(j, m);
    jw_key_strn(j, "lease", m->lease, m->lease_len);
    /* keys are names: valid names need no escaping, and jw escapes them anyway */
    jw_key_obj_open(j, "fencing_tokens");
    for (size_t k = 0; k < m->n; k++)
        jw_key_uint(j, m->names[k], m->tokens[k]);
    jw_obj_close(j);
    jw_key_int(j, "validity_ms", m->validity_ms);
    jw_key_int(j, "ttl_ms", m->ttl_ms);
    int any = 0;
    for (size_t k = 0; m->shared && k < m->n; k++)
        any |= m->shared[k];
    if (any) {
        jw_key_obj_open(j, "modes");
        for (size_t k = 0; k < m->n; k++)
            jw_key_str(j, m->names[k], m->shared[k] ? "shared" : "exclusive");
        jw_obj_close(j);
    }
    jw_obj_close(j);
}

void body_multi_released(jw *j, const body_multi *m)
{
    jw_obj_open(j);
    names(j, m);
    jw_key_bool(j, "released", 1);
    jw_obj_close(j);
}

void body_list(jw *j, const char *prefix, size_t prefix_len, const body_listed *locks, size_t n,
               int truncated)
{
    jw_obj_open(j);
    jw_key_strn(j, "prefix", prefix, prefix_len);
    jw_arr_open(j, "locks");
    for (size_t k = 0; k < n; k++) {
        jw_obj_open(j);
        jw_key_strn(j, "name", locks[k].name, locks[k].name_len);
        owner(j, locks[k].owner, locks[k].owner_len);
        jw_key_int(j, "validity_ms", locks[k].validity_ms);
        jw_key_uint(j, "fencing_token", locks[k].fencing_token);
        jw_obj_close(j);
    }
    jw_arr_close(j);
    jw_key_bool(j, "truncated", truncated);
    jw_obj_close(j);
}

void body_error(jw *j, const body_err *e)
{
    jw_obj_open(j);
    jw_key_str(j, "error", rl_err_code(e->err));
    jw_key_str(j, "message", e->message && *e->message ? e->message : rl_err_message(e->err));
    switch (e->err) {
    case RL_E_LOCK_HELD:
    case RL_E_LOCK_CONTENDED:
        jw_key_int(j, "retry_after_ms", e->retry_after_ms < 0 ? 0 : e->retry_after_ms);
        if (e->resting)
            jw_key_bool(j, "resting", 1);
        break;
    case RL_E_MAX_HOLD_EXCEEDED:
        jw_key_int(j, "max_hold_left_ms", e->max_hold_left_ms < 0 ? 0 : e->max_hold_left_ms);
        break;
    case RL_E_PERMITS_MISMATCH:
        if (e->permits > 0)
            jw_key_int(j, "permits", e->permits);
        break;
    case RL_E_QUORUM_UNAVAILABLE:
    case RL_E_VALIDITY_EXHAUSTED:
    case RL_E_RELEASE_UNCONFIRMED:
        jw_key_uint(j, "nodes_ok", e->nodes_ok);
        jw_key_uint(j, "quorum", e->quorum);
        break;
    case RL_E_MASTERS_QUARANTINED:
        jw_key_uint(j, "nodes_ok", e->nodes_ok);
        jw_key_uint(j, "quorum", e->quorum);
        jw_key_uint(j, "quarantined", e->quarantined);
        if (e->rejoin_ms >= 0)
            jw_key_int(j, "rejoin_ms", e->rejoin_ms);
        else
            jw_raw_fields(j, "\"rejoin_ms\":null");
        break;
    default:
        break;
    }
    jw_obj_close(j);
}

long long body_retry_after_s(int64_t retry_after_ms)
{
    long long ra = retry_after_ms < 0 ? 0 : retry_after_ms;
    return ra < 1000 ? 1 : (ra + 999) / 1000;
}

void body_health(jw *j, int ready, size_t quorum, const body_master *m, size_t n)
{
    jw_obj_open(j);
    jw_key_bool(j, "ready", ready);
    jw_key_uint(j, "quorum", quorum);
    jw_arr_open(j, "masters");
    for (size_t i = 0; i < n; i++) {
        jw_obj_open(j);
        jw_key_str(j, "address", m[i].address);
        jw_key_bool(j, "ok", m[i].ok);
        jw_key_str(j, "state", m[i].state);
        if (m[i].tls)
            jw_key_str(j, "tls", m[i].tls);
        if (m[i].reason)
            jw_key_str(j, "reason", m[i].reason);
        if (m[i].quarantined)
            jw_key_int(j, "quarantine_remaining_ms",
                       m[i].quarantine_remaining_ms > 0 ? m[i].quarantine_remaining_ms : 0);
        if (m[i].quarantined && m[i].waiting && m[i].waiting[0])
            jw_key_str(j, "waiting_for", m[i].waiting);
        if (m[i].clock && m[i].clock[0])
            jw_key_str(j, "clock", m[i].clock);
        if (m[i].failed)
            jw_raw_fields(j, "\"latency_ms\":null");
        else
            jw_key_double(j, "latency_ms", m[i].latency_ms);
        jw_obj_close(j);
    }
    jw_arr_close(j);
    jw_obj_close(j);
}

void body_hold_event(jw *j, const char *event, int64_t validity_ms, const char *reason)
{
    jw_obj_open(j);
    jw_key_str(j, "event", event);
    if (validity_ms >= 0)
        jw_key_int(j, "validity_ms", validity_ms);
    if (reason)
        jw_key_str(j, "reason", reason);
    jw_obj_close(j);
}
