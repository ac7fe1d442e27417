/* judge.c -- the chaos checker's verdicts over a client history (see judge.h for the
 * exact bounds each property is judged with and why they are sound). */
#include "judge.h"

#include <elf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000LL

void chaos_judge_opts_default(chaos_judge_opts *o)
{
    memset(o, 0, sizeof *o);
    o->node_timeout_ms = 50;
    o->acquire_rounds = 3;
    o->release_rounds = 1;
    o->margin_ms = 200;
    o->max_evidence = 5;
    o->mark_bound_ms = 3000;
    o->quorum = 3;
}

long chaos_history_add(chaos_history *h, const chaos_event *e)
{
    if (h->n == h->cap) {
        long cap = h->cap ? h->cap * 2 : 1024;
        chaos_event *ev = realloc(h->ev, (size_t)cap * sizeof *ev);
        if (!ev)
            return -1;
        h->ev = ev;
        h->cap = cap;
    }
    h->ev[h->n] = *e;
    return h->n++;
}

void chaos_history_free(chaos_history *h)
{
    if (!h)
        return;
    free(h->ev);
    h->ev = NULL;
    h->n = h->cap = 0;
}

static const char op_letter[] = {'A', 'R', 'I', 'S', 'L'};

static const char *or_dash(const char *s)
{
    return *s ? s : "-";
}

int chaos_history_save(const chaos_history *h, const chaos_judge_opts *o, FILE *f)
{
    /* v2: S and L events (streamed holds); v3: the mode and slot columns, the permits line;
     * v4: the inst, nested and lease columns */
    fprintf(f, "# chaos history v4\n");
    fprintf(f, "# opts node_timeout_ms=%" PRId64 " acquire_rounds=%d release_rounds=%d margin_ms=%" PRId64 "\n",
            o->node_timeout_ms, o->acquire_rounds, o->release_rounds, o->margin_ms);
    fprintf(f, "# names");
    for (int i = 0; i < h->n_names; i++)
        fprintf(f, " %s", h->names[i]);
    fprintf(f, "\n# permits");
    for (int i = 0; i < h->n_names; i++)
        fprintf(f, " %d", h->permits[i]);
    fprintf(f, "\n# op\tname\tthread\tt_send_ns\tt_recv_ns\tstatus\terror\tshape\ttoken\tvalidity_ms\tttl_ms\twait_ms\tlink"
               "\tallow_ns\tmode\tslot\tinst\tnested\tlease\n");
    for (long i = 0; i < h->n; i++) {
        const chaos_event *e = &h->ev[i];
        fprintf(f, "%c\t%d\t%d\t%" PRId64 "\t%" PRId64 "\t%d\t%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%ld\t%" PRId64
                   "\t%c\t%d\t%d\t%d\t%s\n",
                op_letter[e->op], e->name, e->thread, e->t_send - o->t0, e->t_recv - o->t0, e->status,
                or_dash(e->error), or_dash(e->shape), e->token, e->validity_ms, e->ttl_ms, e->wait_ms, e->link,
                e->allow_ns, e->mode == CHAOS_MODE_SHARED ? 's' : 'x', e->slot, e->inst, e->nested, or_dash(e->lease));
    }
    return ferror(f) ? -1 : 0;
}

static void copy_field(char *dst, size_t dsz, const char *src)
{
    if (!strcmp(src, "-"))
        src = "";
    size_t n = strlen(src);
    if (n >= dsz)
        n = dsz - 1; /* longer than the field: keep what fits */
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int chaos_history_load(chaos_history *h, chaos_judge_opts *o, FILE *f)
{
    char line[1024];
    chaos_judge_opts_default(o);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            char *p;
            if ((p = strstr(line, "node_timeout_ms=")))
                o->node_timeout_ms = strtoll(p + 16, NULL, 10);
            if ((p = strstr(line, "acquire_rounds=")))
                o->acquire_rounds = atoi(p + 15);
            if ((p = strstr(line, "release_rounds=")))
                o->release_rounds = atoi(p + 15);
            if ((p = strstr(line, "margin_ms=")))
                o->margin_ms = strtoll(p + 10, NULL, 10);
            if (!strncmp(line, "# permits", 9)) {
                char *save = NULL;
                int k = 0;
                for (char *t = strtok_r(line + 9, " \n", &save); t && k < CHAOS_MAX_NAMES;
                     t = strtok_r(NULL, " \n", &save))
                    h->permits[k++] = atoi(t);
            }
            if (!strncmp(line, "# names", 7)) {
                char *save = NULL;
                for (char *t = strtok_r(line + 7, " \n", &save); t && h->n_names < CHAOS_MAX_NAMES;
                     t = strtok_r(NULL, " \n", &save))
                    snprintf(h->names[h->n_names++], sizeof h->names[0], "%s", t);
            }
            continue;
        }
        chaos_event e;
        memset(&e, 0, sizeof e);
        char op, err[64], shape[64], lease[64] = "-", mode = 'x';
        e.slot = -1;
        int n = sscanf(line, "%c\t%d\t%d\t%" SCNd64 "\t%" SCNd64 "\t%d\t%63s\t%63s\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%" SCNd64 "\t%ld\t%" SCNd64
                             "\t%c\t%d\t%d\t%d\t%63s",
                       &op, &e.name, &e.thread, &e.t_send, &e.t_recv, &e.status, err, shape, &e.token,
                       &e.validity_ms, &e.ttl_ms, &e.wait_ms, &e.link, &e.allow_ns, &mode, &e.slot, &e.inst, &e.nested,
                       lease);
        /* 14: v2, exclusive locks only; 16: v3 */
        if ((n != 14 && n != 16 && n != 19) || (mode != 'x' && mode != 's'))
            return -1;
        copy_field(e.lease, sizeof e.lease, lease);
        e.mode = mode == 's' ? CHAOS_MODE_SHARED : CHAOS_MODE_EXCLUSIVE;
        const char *opp = memchr(op_letter, op, sizeof op_letter);
        if (!opp || e.name < 0 || e.name >= CHAOS_MAX_NAMES)
            return -1;
        e.op = (int)(opp - op_letter);
        copy_field(e.error, sizeof e.error, err);
        copy_field(e.shape, sizeof e.shape, shape);
        if (chaos_history_add(h, &e) < 0)
            return -1;
    }
    for (long i = 0; i < h->n; i++) /* links must point inside the history */
        if (h->ev[i].link < -1 || h->ev[i].link >= h->n)
            return -1;
    while (h->n_names < CHAOS_MAX_NAMES) {
        int used = 0;
        for (long i = 0; i < h->n; i++)
            used |= h->ev[i].name >= h->n_names;
        if (!used)
            break;
        snprintf(h->names[h->n_names], sizeof h->names[0], "name%d", h->n_names);
        h->n_names++;
    }
    return ferror(f) ? -1 : 0;
}

/* ---- helpers ---------------------------------------------------------------------- */

static double rel_ms(const chaos_judge_opts *o, int64_t t)
{
    return (double)(t - o->t0) / 1e6;
}

static const char *name_of(const chaos_history *h, int i)
{
    return i >= 0 && i < h->n_names ? h->names[i] : "?";
}

/* Any 201 holds the lock, whatever else is wrong with its body ((d) reports that);
 * a streamed one too. */
static int is_grant(const chaos_event *e)
{
    return (e->op == CHAOS_ACQUIRE || e->op == CHAOS_STREAM) && e->status == 201;
}

/* What became of a streamed grant (indexed like the history; -1: none): its last
 * extended line, its first final line (lost, released), its client's close. */
typedef struct stream_end {
    long last_ext, final, closed;
    int64_t alive_end; /* a duplex hold: the latest ping send + validity answered; 0 if none */
} stream_end;

static int is_final_line(const chaos_event *l)
{
    return l->status == CHAOS_LINE_LOST || l->status == CHAOS_LINE_RELEASED;
}

/* NULL when out of memory (streams are then judged by their grant line alone). */
static stream_end *stream_ends(const chaos_history *h)
{
    stream_end *se = malloc(((size_t)h->n + 1) * sizeof *se);
    if (!se)
        return NULL;
    for (long i = 0; i < h->n; i++)
        se[i] = (stream_end){-1, -1, -1, 0};
    for (long i = 0; i < h->n; i++) {
        const chaos_event *l = &h->ev[i];
        if (l->op != CHAOS_LINE || l->link < 0 || l->link >= h->n)
            continue;
        stream_end *st = &se[l->link];
        if (l->status == CHAOS_LINE_EXTENDED) {
            if (st->last_ext < 0 || h->ev[st->last_ext].t_recv <= l->t_recv)
                st->last_ext = i;
        } else if (l->status == CHAOS_LINE_ALIVE) {
            int64_t end = l->t_send + l->validity_ms * NS_PER_MS;
            if (end > st->alive_end)
                st->alive_end = end;
        } else if (is_final_line(l)) {
            if (st->final < 0 || l->t_recv < h->ev[st->final].t_recv)
                st->final = i;
        } else if (l->status == CHAOS_LINE_CLOSED) {
            if (st->closed < 0 || l->t_send < h->ev[st->closed].t_send)
                st->closed = i;
        }
    }
    return se;
}

/* A grant whose token can be ordered (a missing or zero token is (d)'s finding). */
static int is_token_grant(const chaos_event *e)
{
    return is_grant(e) && e->token >= 1;
}

static int is_sem_name(const chaos_history *h, int nm)
{
    return nm >= 0 && nm < CHAOS_MAX_NAMES && h->permits[nm] > 0;
}

/* The grants each verdict judges: exclusive grants of lock names ((a), (b)), shared
 * ones ((j)), a semaphore's permits ((k)). */
typedef int (*grant_kind)(const chaos_history *h, const chaos_event *e);

/* A reentrant re-entry (nested) holds nothing of its own: its lease's first grant does. */
static int is_writer(const chaos_history *h, const chaos_event *e)
{
    return is_grant(e) && !e->nested && !is_sem_name(h, e->name) && e->mode != CHAOS_MODE_SHARED;
}

static int is_reader(const chaos_history *h, const chaos_event *e)
{
    return is_grant(e) && !is_sem_name(h, e->name) && e->mode == CHAOS_MODE_SHARED;
}

static int is_permit(const chaos_history *h, const chaos_event *e)
{
    return is_grant(e) && is_sem_name(h, e->name);
}

/* A grant with its judged hold interval [start, end) and what ended it. */
enum hold_end { END_VALIDITY, END_RELEASE, END_CLOSED, END_LINE };
static const char *const end_names[] = {"validity ran out", "release sent", "stream closed by its client",
                                        "final line read"};

typedef struct hold {
    long idx;
    int64_t start, end;
    int why; /* enum hold_end */
} hold;

/* The end of grant gi's hold (judge.h, (a)); se: stream_ends() or NULL. */
static int64_t grant_end(const chaos_history *h, const stream_end *se, long gi, int client_view, int *why)
{
    const chaos_event *g = &h->ev[gi];
    int64_t end = (client_view ? g->t_recv : g->t_send) + g->validity_ms * NS_PER_MS;
    *why = END_VALIDITY;
    if (g->op == CHAOS_STREAM && se) {
        const stream_end *st = &se[gi];
        if (st->last_ext >= 0) /* the validity announced last */
            end = h->ev[st->last_ext].t_recv + h->ev[st->last_ext].validity_ms * NS_PER_MS;
        if (st->alive_end > end) /* a duplex hold: the latest end an answered ping told */
            end = st->alive_end;
        if (st->closed >= 0 && h->ev[st->closed].t_send < end) {
            end = h->ev[st->closed].t_send;
            *why = END_CLOSED;
        }
        if (st->final >= 0 && h->ev[st->final].t_recv < end) {
            end = h->ev[st->final].t_recv;
            *why = END_LINE;
        }
    }
    if (g->link >= 0 && g->link < h->n) {
        const chaos_event *r = &h->ev[g->link];
        if (r->t_send < end) {
            end = r->t_send;
            *why = END_RELEASE;
        }
    }
    return end;
}

static int cmp_hold_start(const void *a, const void *b)
{
    const hold *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void print_grant(const chaos_history *h, const chaos_judge_opts *o, FILE *out, const char *label,
                        const hold *g)
{
    const chaos_event *e = &h->ev[g->idx];
    char kind[48];
    snprintf(kind, sizeof kind, "%s%s", e->op == CHAOS_STREAM ? "streamed " : "",
             is_sem_name(h, e->name) ? "permit " : e->mode == CHAOS_MODE_SHARED ? "shared " : "");
    if (is_sem_name(h, e->name) && e->slot >= 0)
        snprintf(kind + strlen(kind), sizeof kind - strlen(kind), "(slot %d) ", e->slot);
    fprintf(out, "      %s %sgrant #%ld thread %d: sent %.3f recv %.3f ms, token %" PRId64 ", validity %" PRId64
                 " ms, ttl %" PRId64 " ms, hold until %.3f ms (%s)\n",
            label, kind, g->idx, e->thread, rel_ms(o, e->t_send),
            rel_ms(o, e->t_recv), e->token, e->validity_ms, e->ttl_ms, rel_ms(o, g->end),
            e->op == CHAOS_STREAM && g->why == END_VALIDITY ? "the validity announced last ran out" : end_names[g->why]);
}

static void note_violation(const chaos_judge_opts *o, char prop, int name, int64_t t_ns)
{
    chaos_judge_stats *st = o->stats;
    if (st && st->n_v < CHAOS_MAX_VIOLATIONS)
        st->v[st->n_v++] = (chaos_violation){.prop = prop, .name = name, .t_ns = t_ns};
}

/* The hold of grant i (judge.h, (a)); 0 if it is empty (ended before it began). */
static int hold_of(const chaos_history *h, const stream_end *se, long i, int client_view, hold *g)
{
    *g = (hold){.idx = i, .start = h->ev[i].t_recv};
    g->end = grant_end(h, se, i, client_view, &g->why);
    return g->end > g->start;
}

/* Sweep line over each name's exclusive holds sorted by start: a hold that starts
 * before the latest end seen so far overlaps the hold that owns that end. */
static long judge_overlaps(const chaos_history *h, const chaos_judge_opts *o, FILE *out, int client_view,
                           long *n_grants, double *worst_ms, int print)
{
    hold *hs = malloc(((size_t)h->n + 1) * sizeof *hs);
    stream_end *se = stream_ends(h);
    long violations = 0, shown = 0;
    *n_grants = 0;
    *worst_ms = 0;
    if (!hs || !se) {
        fprintf(out, "chaos: judge: out of memory\n");
        free(hs);
        free(se);
        return 1;
    }
    for (int nm = 0; nm < CHAOS_MAX_NAMES; nm++) {
        long k = 0;
        for (long i = 0; i < h->n; i++) {
            const chaos_event *e = &h->ev[i];
            if (e->name != nm || !is_writer(h, e))
                continue;
            (*n_grants)++;
            if (hold_of(h, se, i, client_view, &hs[k]))
                k++;
        }
        qsort(hs, (size_t)k, sizeof *hs, cmp_hold_start);
        long owner = -1;
        for (long j = 0; j < k; j++) {
            if (owner >= 0 && hs[j].start < hs[owner].end) {
                int64_t ov_end = hs[j].end < hs[owner].end ? hs[j].end : hs[owner].end;
                double ov = (double)(ov_end - hs[j].start) / 1e6;
                violations++;
                if (print)
                    note_violation(o, 'a', nm, hs[j].start);
                if (ov > *worst_ms)
                    *worst_ms = ov;
                if (print && shown++ < o->max_evidence) {
                    fprintf(out, "    name %s: two holders for %.3f ms (from %.3f to %.3f ms)\n", name_of(h, nm), ov,
                            rel_ms(o, hs[j].start), rel_ms(o, ov_end));
                    print_grant(h, o, out, "first ", &hs[owner]);
                    print_grant(h, o, out, "second", &hs[j]);
                }
            }
            if (owner < 0 || hs[j].end > hs[owner].end)
                owner = j;
        }
    }
    free(hs);
    free(se);
    return violations;
}

long chaos_judge_mutex(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long grants;
    double worst;
    /* evidence is printed before the verdict line is known; buffer it */
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    long v = judge_overlaps(h, o, ev ? ev : out, 0, &grants, &worst, 1);
    if (ev)
        fclose(ev);
    fprintf(out, "chaos: %s (a) mutual exclusion: %ld grants, %ld overlapping holds%s"
                 " [hold = recv .. min(release sent, sent + validity_ms)]\n",
            v ? "FAIL" : "PASS", grants, v, v ? "" : "");
    if (o->stats) {
        o->stats->grants = grants;
        o->stats->overlaps = v;
    }
    if (v && worst > 0)
        fprintf(out, "    worst overlap %.3f ms; first %d shown:\n", worst, o->max_evidence);
    if (buf && v)
        fputs(buf, out);
    free(buf);
    return v;
}

long chaos_judge_mutex_client_view(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long grants;
    double worst, worst_strict;
    long strict = judge_overlaps(h, o, out, 0, &grants, &worst_strict, 0);
    long v = judge_overlaps(h, o, out, 1, &grants, &worst, 0);
    long extra = v > strict ? v - strict : 0;
    fprintf(out, "chaos: INFO (a') client view [recv .. min(release sent, recv + validity_ms)]: %ld overlapping holds,"
                 " %ld beyond (a)%s (worst %.3f ms)\n",
            v, extra, extra ? ": a response reached its client later than the drift allowance" : "", worst);
    return extra;
}

/* ---- (b) fencing ------------------------------------------------------------------- */

static const chaos_event *g_sort_ev; /* qsort has no context argument; judge is single-threaded */

static int cmp_idx_recv(const void *a, const void *b)
{
    const chaos_event *x = &g_sort_ev[*(const long *)a], *y = &g_sort_ev[*(const long *)b];
    if (x->t_recv != y->t_recv)
        return x->t_recv < y->t_recv ? -1 : 1;
    return 0;
}

static int cmp_idx_token(const void *a, const void *b)
{
    const chaos_event *x = &g_sort_ev[*(const long *)a], *y = &g_sort_ev[*(const long *)b];
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    return 0;
}

static void print_ev(const chaos_history *h, const chaos_judge_opts *o, FILE *out, const char *label, long i)
{
    const chaos_event *e = &h->ev[i];
    fprintf(out, "      %s grant #%ld thread %d: sent %.3f recv %.3f ms, token %" PRId64 ", validity %" PRId64 " ms\n",
            label, i, e->thread, rel_ms(o, e->t_send), rel_ms(o, e->t_recv), e->token, e->validity_ms);
}

/* What one name's tokens showed (fence_name); shown counts evidence printed. */
typedef struct fence_tally {
    long grants, inversions, dups, shown;
    double pairs;
} fence_tally;

/* Orders name nm's grants of kind `keep` by their tokens as (b) says, into t; evidence to
 * eo, violations noted as prop.  ix and pm: scratch of h->n + 1 entries each. */
static void fence_name(const chaos_history *h, const chaos_judge_opts *o, FILE *eo, int nm, grant_kind keep,
                       char prop, long *ix, long *pm, fence_tally *t)
{
    long k = 0;
    for (long i = 0; i < h->n; i++)
        if (h->ev[i].name == nm && is_token_grant(&h->ev[i]) && keep(h, &h->ev[i]))
            ix[k++] = i;
    t->grants += k;
    g_sort_ev = h->ev;
    qsort(ix, (size_t)k, sizeof *ix, cmp_idx_recv);
    for (long j = 0; j < k; j++) /* prefix argmax of token, by t_recv */
        pm[j] = (j == 0 || h->ev[ix[j]].token > h->ev[pm[j - 1]].token) ? ix[j] : pm[j - 1];
    for (long j = 0; j < k; j++) {
        const chaos_event *b = &h->ev[ix[j]];
        /* number of grants whose answer arrived before b was asked */
        long lo = 0, hi = k;
        while (lo < hi) {
            long mid = (lo + hi) / 2;
            if (h->ev[ix[mid]].t_recv < b->t_send)
                lo = mid + 1;
            else
                hi = mid;
        }
        t->pairs += (double)lo;
        if (lo > 0 && h->ev[pm[lo - 1]].token >= b->token) {
            t->inversions++;
            note_violation(o, prop, nm, b->t_send);
            if (t->shown++ < o->max_evidence) {
                fprintf(eo, "    name %s: token %" PRId64 " issued after token %" PRId64 " was already out\n",
                        name_of(h, nm), b->token, h->ev[pm[lo - 1]].token);
                print_ev(h, o, eo, "earlier", pm[lo - 1]);
                print_ev(h, o, eo, "later  ", ix[j]);
            }
        }
    }
    qsort(ix, (size_t)k, sizeof *ix, cmp_idx_token);
    for (long j = 1; j < k; j++) {
        if (h->ev[ix[j]].token == h->ev[ix[j - 1]].token) {
            t->dups++;
            note_violation(o, prop, nm,
                           h->ev[ix[j]].t_send > h->ev[ix[j - 1]].t_send ? h->ev[ix[j]].t_send
                                                                       : h->ev[ix[j - 1]].t_send);
            if (t->shown++ < o->max_evidence) {
                fprintf(eo, "    name %s: token %" PRId64 " issued twice\n", name_of(h, nm), h->ev[ix[j]].token);
                print_ev(h, o, eo, "one  ", ix[j - 1]);
                print_ev(h, o, eo, "other", ix[j]);
            }
        }
    }
}

long chaos_judge_fencing(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long *ix = malloc(((size_t)h->n + 1) * sizeof *ix);
    long *pm = malloc(((size_t)h->n + 1) * sizeof *pm);
    fence_tally t = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    if (!ix || !pm) {
        fprintf(out, "chaos: judge: out of memory\n");
        free(ix);
        free(pm);
        if (ev)
            fclose(ev);
        free(buf);
        return 1;
    }
    for (int nm = 0; nm < CHAOS_MAX_NAMES; nm++)
        if (!is_sem_name(h, nm))
            fence_name(h, o, eo, nm, is_writer, 'b', ix, pm, &t);
    if (ev)
        fclose(ev);
    long v = t.inversions + t.dups;
    if (o->stats) {
        o->stats->inversions = t.inversions;
        o->stats->duplicates = t.dups;
    }
    fprintf(out, "chaos: %s (b) fencing tokens: %ld grants, %.0f ordered pairs checked, %ld inversions, %ld duplicates\n",
            v ? "FAIL" : "PASS", t.grants, t.pairs, t.inversions, t.dups);
    if (v && buf)
        fputs(buf, out);
    free(buf);
    free(ix);
    free(pm);
    return v;
}

/* ---- (j) readers and writers, (k) semaphores --------------------------------------- */

static int cmp_hold_end(const void *a, const void *b)
{
    const hold *x = a, *y = b;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Among holds hs[0..k) sorted by start, the number with start < t (binary search). */
static long starting_before(const hold *hs, long k, int64_t t)
{
    long lo = 0, hi = k;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (hs[mid].start < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* One step of a sweep over holds sorted by start: drops from the live set act (n_act
 * entries, indices into hs) every hold that ended by hs[j].start (holds are half-open),
 * leaving those live when hs[j] begins; the caller then appends j. */
static void sweep_to(const hold *hs, long j, long *act, long *n_act)
{
    long w = 0;
    for (long a = 0; a < *n_act; a++)
        if (hs[act[a]].end > hs[j].start)
            act[w++] = act[a];
    *n_act = w;
}

/* Sorts ix[0..k) (grants) by answer and fills pm with the prefix argmax of their tokens. */
static void by_answer(const chaos_history *h, long *ix, long *pm, long k)
{
    g_sort_ev = h->ev;
    qsort(ix, (size_t)k, sizeof *ix, cmp_idx_recv);
    for (long j = 0; j < k; j++)
        pm[j] = (j == 0 || h->ev[ix[j]].token > h->ev[pm[j - 1]].token) ? ix[j] : pm[j - 1];
}

/* Of the grants ix[0..k) (as by_answer left them) answered before t, the one with the
 * largest token; -1 if none. */
static long answered_before(const chaos_history *h, const long *ix, const long *pm, long k, int64_t t)
{
    long lo = 0, hi = k;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (h->ev[ix[mid]].t_recv < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 ? pm[lo - 1] : -1;
}

long chaos_judge_shared(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    size_t sz = (size_t)h->n + 1;
    hold *xs = malloc(sz * sizeof *xs), *rs = malloc(sz * sizeof *rs);
    long *pm = malloc(sz * sizeof *pm), *act = malloc(sz * sizeof *act), *tx = malloc(sz * sizeof *tx);
    long *rx = malloc(sz * sizeof *rx), *pm2 = malloc(sz * sizeof *pm2);
    stream_end *se = stream_ends(h);
    long readers = 0, streamed = 0, writers = 0, overlaps = 0, low = 0, checked = 0, together = 0, most = 0, shown = 0;
    double worst = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    if (!xs || !rs || !pm || !act || !tx || !rx || !pm2 || !se) {
        fprintf(out, "chaos: judge: out of memory\n");
        free(xs);
        free(rs);
        free(pm);
        free(act);
        free(tx);
        free(rx);
        free(pm2);
        free(se);
        if (ev)
            fclose(ev);
        free(buf);
        return 1;
    }
    for (int nm = 0; nm < CHAOS_MAX_NAMES; nm++) {
        if (is_sem_name(h, nm))
            continue;
        long nx = 0, nr = 0, nt = 0;
        for (long i = 0; i < h->n; i++) {
            const chaos_event *e = &h->ev[i];
            if (e->name != nm)
                continue;
            if (is_writer(h, e)) {
                writers++;
                nx += hold_of(h, se, i, 0, &xs[nx]);
                if (is_token_grant(e))
                    tx[nt++] = i;
            } else if (is_reader(h, e)) {
                readers++;
                streamed += e->op == CHAOS_STREAM;
                nr += hold_of(h, se, i, 0, &rs[nr]);
            }
        }
        if (!nr && !nt)
            continue;
        /* a reader beside a writer: some writer starts before the reader's end and ends
         * after its start; by start order with the largest end so far (pm) */
        qsort(xs, (size_t)nx, sizeof *xs, cmp_hold_start);
        for (long j = 0; j < nx; j++)
            pm[j] = (j == 0 || xs[j].end > xs[pm[j - 1]].end) ? j : pm[j - 1];
        qsort(rs, (size_t)nr, sizeof *rs, cmp_hold_start);
        for (long j = 0; j < nr; j++) {
            long p = starting_before(xs, nx, rs[j].end);
            if (p == 0 || xs[pm[p - 1]].end <= rs[j].start)
                continue;
            const hold *w = &xs[pm[p - 1]];
            int64_t from = w->start > rs[j].start ? w->start : rs[j].start;
            int64_t to = w->end < rs[j].end ? w->end : rs[j].end;
            double ov = (double)(to - from) / 1e6;
            overlaps++;
            note_violation(o, 'j', nm, from);
            if (ov > worst)
                worst = ov;
            if (shown++ < o->max_evidence) {
                fprintf(eo, "    name %s: a reader and a writer for %.3f ms (from %.3f to %.3f ms)\n", name_of(h, nm),
                        ov, rel_ms(o, from), rel_ms(o, to));
                print_grant(h, o, eo, "writer", w);
                print_grant(h, o, eo, "reader", &rs[j]);
            }
        }
        /* readers together (legal): the most at once, and holds begun beside another */
        long n_act = 0;
        for (long j = 0; j < nr; j++) {
            sweep_to(rs, j, act, &n_act);
            together += n_act > 0;
            act[n_act++] = j;
            if (n_act > most)
                most = n_act;
        }
        /* tokens: a reader's is at least every writer's answered before it was asked,
         * and a writer's above every reader's answered before it was asked */
        long nrt = 0;
        for (long i = 0; i < h->n; i++)
            if (h->ev[i].name == nm && is_reader(h, &h->ev[i]))
                rx[nrt++] = i;
        by_answer(h, tx, pm, nt);
        by_answer(h, rx, pm2, nrt);
        for (long j = 0; j < nrt; j++) {
            const chaos_event *r = &h->ev[rx[j]];
            long w = answered_before(h, tx, pm, nt, r->t_send);
            checked += w >= 0;
            if (w >= 0 && h->ev[w].token > r->token) {
                low++;
                note_violation(o, 'j', nm, r->t_send);
                if (shown++ < o->max_evidence) {
                    fprintf(eo, "    name %s: reader's token %" PRId64 " below token %" PRId64
                                " of a writer answered before the reader asked\n",
                            name_of(h, nm), r->token, h->ev[w].token);
                    print_ev(h, o, eo, "writer", w);
                    print_ev(h, o, eo, "reader", rx[j]);
                }
            }
        }
        for (long j = 0; j < nt; j++) {
            const chaos_event *w = &h->ev[tx[j]];
            long r = answered_before(h, rx, pm2, nrt, w->t_send);
            checked += r >= 0;
            if (r >= 0 && h->ev[r].token >= w->token) {
                low++;
                note_violation(o, 'j', nm, w->t_send);
                if (shown++ < o->max_evidence) {
                    fprintf(eo, "    name %s: writer's token %" PRId64 " not above token %" PRId64
                                " of a reader answered before the writer asked\n",
                            name_of(h, nm), w->token, h->ev[r].token);
                    print_ev(h, o, eo, "reader", r);
                    print_ev(h, o, eo, "writer", tx[j]);
                }
            }
        }
    }
    if (ev)
        fclose(ev);
    long v = overlaps + low;
    if (o->stats) {
        chaos_judge_stats *st = o->stats;
        st->shared_grants = readers;
        st->shared_streams = streamed;
        st->reader_writer = overlaps;
        st->shared_bad_tokens = low;
        st->max_readers = most;
        st->readers_together = together;
    }
    fprintf(out, "chaos: %s (j) no reader with a writer: %ld shared grants (%ld streamed) beside %ld exclusive, %ld"
                 " readers' holds overlapping a writer's [holds as (a)]; readers together: up to %ld at once, %ld"
                 " holds begun beside another reader; tokens: %ld out of order between readers and writers"
                 " [reader >= every earlier writer, writer > every earlier reader] (%ld grants asked after"
                 " the other kind's answer)\n",
            v ? "FAIL" : "PASS", readers, streamed, writers, overlaps, most, together, low, checked);
    if (overlaps)
        fprintf(out, "    worst overlap %.3f ms; first %d shown:\n", worst, o->max_evidence);
    if (v && buf)
        fputs(buf, out);
    free(buf);
    free(xs);
    free(rs);
    free(pm);
    free(act);
    free(tx);
    free(rx);
    free(pm2);
    free(se);
    return v;
}

long chaos_judge_semaphores(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    size_t sz = (size_t)h->n + 1;
    hold *hs = malloc(sz * sizeof *hs), *live = malloc(sz * sizeof *live);
    long *ix = malloc(sz * sizeof *ix), *pm = malloc(sz * sizeof *pm), *act = malloc(sz * sizeof *act);
    stream_end *se = stream_ends(h);
    long grants = 0, streamed = 0, over = 0, shown = 0, n_sem = 0;
    fence_tally t = {0};
    char per_name[512] = "";
    size_t pn = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    if (!hs || !live || !ix || !pm || !act || !se) {
        fprintf(out, "chaos: judge: out of memory\n");
        free(hs);
        free(live);
        free(ix);
        free(pm);
        free(act);
        free(se);
        if (ev)
            fclose(ev);
        free(buf);
        return 1;
    }
    for (int nm = 0; nm < CHAOS_MAX_NAMES; nm++) {
        if (!is_sem_name(h, nm))
            continue;
        long permits = h->permits[nm], k = 0, most = 0, n_act = 0;
        n_sem++;
        for (long i = 0; i < h->n; i++) {
            const chaos_event *e = &h->ev[i];
            if (e->name != nm || !is_permit(h, e))
                continue;
            grants++;
            streamed += e->op == CHAOS_STREAM;
            k += hold_of(h, se, i, 0, &hs[k]);
        }
        qsort(hs, (size_t)k, sizeof *hs, cmp_hold_start);
        for (long j = 0; j < k; j++) {
            sweep_to(hs, j, act, &n_act);
            if (n_act >= permits) { /* hs[j] is holder N + 1 (or more) */
                over++;
                note_violation(o, 'k', nm, hs[j].start);
                if (shown++ < o->max_evidence) {
                    long n_live = 0;
                    for (long a = 0; a < n_act; a++)
                        live[n_live++] = hs[act[a]];
                    qsort(live, (size_t)n_live, sizeof *live, cmp_hold_end);
                    int64_t to = live[0].end < hs[j].end ? live[0].end : hs[j].end;
                    fprintf(eo, "    name %s (%ld permits): %ld holders at once from %.3f to %.3f ms\n",
                            name_of(h, nm), permits, n_act + 1, rel_ms(o, hs[j].start), rel_ms(o, to));
                    for (long a = 0; a < n_live && a < 8; a++)
                        print_grant(h, o, eo, "holder", &live[a]);
                    print_grant(h, o, eo, "and   ", &hs[j]);
                }
            }
            act[n_act++] = j;
            if (n_act > most)
                most = n_act;
        }
        if (o->stats)
            o->stats->max_permits[nm] = most;
        if (pn < sizeof per_name)
            pn += (size_t)snprintf(per_name + pn, sizeof per_name - pn, "%s%s %ld of %ld", pn ? ", " : "",
                                   name_of(h, nm), most, permits);
        fence_name(h, o, eo, nm, is_permit, 'k', ix, pm, &t);
    }
    if (ev)
        fclose(ev);
    long v = over + t.inversions + t.dups;
    if (o->stats) {
        chaos_judge_stats *st = o->stats;
        st->sem_grants = grants;
        st->sem_streams = streamed;
        st->sem_over = over;
        st->sem_inversions = t.inversions;
        st->sem_duplicates = t.dups;
    }
    fprintf(out, "chaos: %s (k) semaphores, never more than N holders: %ld permits granted (%ld streamed) on %ld"
                 " names, %ld holds begun with all N permits already held [holds as (a)]; most at once: %s;"
                 " tokens: %.0f ordered pairs checked, %ld inversions, %ld duplicates\n",
            v ? "FAIL" : "PASS", grants, streamed, n_sem, over, pn ? per_name : "no semaphore names", t.pairs,
            t.inversions, t.dups);
    if (v && buf)
        fputs(buf, out);
    free(buf);
    free(hs);
    free(live);
    free(ix);
    free(pm);
    free(act);
    free(se);
    return v;
}

/* ---- (i) streamed holds ------------------------------------------------------------ */

/* A stream's lines together, in the order they were read. */
static int cmp_line(const void *a, const void *b)
{
    const chaos_event *x = &g_sort_ev[*(const long *)a], *y = &g_sort_ev[*(const long *)b];
    if (x->link != y->link)
        return x->link < y->link ? -1 : 1;
    if (x->t_recv != y->t_recv)
        return x->t_recv < y->t_recv ? -1 : 1;
    return *(const long *)a < *(const long *)b ? -1 : *(const long *)a > *(const long *)b;
}

static const char *const line_names[] = {"?", "extended", "lost", "released", "closed", "cut", "other", "alive"};

long chaos_judge_streams(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long *ix = malloc(((size_t)h->n + 1) * sizeof *ix);
    long streams = 0, by_kind[CHAOS_LINE_KINDS] = {0}, late = 0, late_lost = 0, starved = 0, bad = 0, shown = 0, k = 0;
    double worst = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    if (!ix) {
        fprintf(out, "chaos: judge: out of memory\n");
        if (ev)
            fclose(ev);
        free(buf);
        return 1;
    }
    for (long i = 0; i < h->n; i++) {
        const chaos_event *e = &h->ev[i];
        streams += e->op == CHAOS_STREAM && is_grant(e);
        if (e->op == CHAOS_LINE && e->link >= 0 && e->link < h->n && e->status >= CHAOS_LINE_EXTENDED &&
            e->status < CHAOS_LINE_KINDS)
            ix[k++] = i;
        else if (e->op == CHAOS_LINE) {
            bad++;
            if (shown++ < o->max_evidence)
                fprintf(eo, "    line #%ld thread %d: kind %d of no granted stream (link %ld)\n", i, e->thread,
                        e->status, e->link);
        }
    }
    g_sort_ev = h->ev;
    qsort(ix, (size_t)k, sizeof *ix, cmp_line);
    for (long j = 0; j < k;) {
        long gi = h->ev[ix[j]].link;
        const chaos_event *g = &h->ev[gi];
        /* the client's deadline: the read of the line announcing validity last + it */
        int64_t deadline = g->t_recv + g->validity_ms * NS_PER_MS, announced = g->t_recv;
        int64_t validity = g->validity_ms;
        int over = 0;
        for (; j < k && h->ev[ix[j]].link == gi; j++) {
            const chaos_event *l = &h->ev[ix[j]];
            by_kind[l->status]++;
            const char *why = NULL;
            if (!is_grant(g) || g->op != CHAOS_STREAM)
                why = "a line of no granted stream";
            else if (over)
                why = "a line after the stream's end";
            else if (l->shape[0])
                why = l->shape;
            if (why) {
                bad++;
                if (shown++ < o->max_evidence)
                    fprintf(eo, "    name %s stream #%ld thread %d: %s line read at %.3f ms: %s\n", name_of(h, l->name),
                            gi, l->thread, line_names[l->status], rel_ms(o, l->t_recv), why);
            }
            int reading = g->link < 0 || g->link >= h->n || l->t_recv <= h->ev[g->link].t_send;
            if ((l->status == CHAOS_LINE_EXTENDED || l->status == CHAOS_LINE_LOST) && reading && l->t_recv > deadline) {
                double by = (double)(l->t_recv - deadline) / 1e6;
                if (l->t_recv - deadline <= l->allow_ns) {
                    starved++; /* late only by time the machine took */
                } else {
                    late++;
                    late_lost += l->status == CHAOS_LINE_LOST;
                    if (by > worst)
                        worst = by;
                    if (shown++ < o->max_evidence)
                        fprintf(eo,
                                "    name %s stream #%ld thread %d token %" PRId64 ": \"%s\"%s%s%s read at %.3f ms, %.3f ms"
                                " after the validity announced at %.3f ms (%" PRId64 " ms) ended (measured CPU"
                                " starvation %.3f ms)\n",
                                name_of(h, l->name), gi, l->thread, g->token, line_names[l->status],
                                l->error[0] ? " (" : "", l->error, l->error[0] ? ")" : "", rel_ms(o, l->t_recv), by,
                                rel_ms(o, announced), validity, (double)l->allow_ns / 1e6);
                }
            }
            if (l->status == CHAOS_LINE_EXTENDED) {
                deadline = l->t_recv + l->validity_ms * NS_PER_MS;
                announced = l->t_recv;
                validity = l->validity_ms;
            } else if (l->status == CHAOS_LINE_ALIVE) {
                /* an answer to a ping: counted from the ping's send (never judged late:
                 * the service writes it when it reads the ping) */
                if (l->t_send + l->validity_ms * NS_PER_MS > deadline) {
                    deadline = l->t_send + l->validity_ms * NS_PER_MS;
                    announced = l->t_send;
                    validity = l->validity_ms;
                }
            } else if (l->status != CHAOS_LINE_OTHER) {
                over = 1; /* a final line, or the stream's end */
            }
        }
    }
    if (ev)
        fclose(ev);
    long v = late + bad;
    if (o->stats) {
        chaos_judge_stats *st = o->stats;
        st->streams = streams;
        st->extended = by_kind[CHAOS_LINE_EXTENDED];
        st->lost = by_kind[CHAOS_LINE_LOST];
        st->released = by_kind[CHAOS_LINE_RELEASED];
        st->closed = by_kind[CHAOS_LINE_CLOSED];
        st->cut = by_kind[CHAOS_LINE_CUT];
        st->late = late;
        st->late_lost = late_lost;
        st->late_starved = starved;
        st->bad_lines = bad;
        st->alive = by_kind[CHAOS_LINE_ALIVE];
    }
    fprintf(out, "chaos: %s (i) streamed holds: %ld streams granted, %ld extended, %ld lost, %ld released, %ld closed"
                 " by their client, %ld ended without a final line; %ld lost/extended lines read after the validity"
                 " announced last had ended [read + validity_ms]%s, %ld late only by measured CPU starvation; %ld"
                 " lines out of contract; %ld duplex answers to pings (alive)\n",
            v ? "FAIL" : "PASS", streams, by_kind[CHAOS_LINE_EXTENDED], by_kind[CHAOS_LINE_LOST],
            by_kind[CHAOS_LINE_RELEASED], by_kind[CHAOS_LINE_CLOSED], by_kind[CHAOS_LINE_CUT], late,
            late ? " (the service said it too late)" : "", starved, bad, by_kind[CHAOS_LINE_ALIVE]);
    if (late)
        fprintf(out, "    latest by %.3f ms; first %d shown:\n", worst, o->max_evidence);
    if (v && buf)
        fputs(buf, out);
    free(buf);
    free(ix);
    return v;
}

/* ---- (c) latency ------------------------------------------------------------------- */

static int64_t bound_ms(const chaos_event *e, const chaos_judge_opts *o)
{
    if (e->op == CHAOS_ACQUIRE || e->op == CHAOS_STREAM)
        return e->wait_ms + o->acquire_rounds * o->node_timeout_ms + o->margin_ms;
    return o->release_rounds * o->node_timeout_ms + o->margin_ms;
}

static const char *const op_names[] = {"acquire", "release", "inspect", "streamed acquire", "stream line"};

/* Requests (every event but a stream's lines). */
static long n_requests(const chaos_history *h)
{
    long n = 0;
    for (long i = 0; i < h->n; i++)
        n += h->ev[i].op != CHAOS_LINE;
    return n;
}

long chaos_judge_latency(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long v = 0, shown = 0, allowed = 0;
    double max_lat[3] = {0}, max_over_wait = 0, max_allow = 0; /* acquire: latency - wait_ms */
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    for (long i = 0; i < h->n; i++) {
        const chaos_event *e = &h->ev[i];
        if (e->op == CHAOS_LINE || e->status == CHAOS_ST_HUNGUP)
            continue; /* no request: (i) judges when lines come; a hang-up is the client's */
        int k = e->op == CHAOS_STREAM ? CHAOS_ACQUIRE : e->op;
        double lat = (double)(e->t_recv - e->t_send) / 1e6;
        double allow = (double)e->allow_ns / 1e6;
        double bound = (double)bound_ms(e, o);
        if (lat > max_lat[k])
            max_lat[k] = lat;
        if (k == CHAOS_ACQUIRE && lat - (double)e->wait_ms > max_over_wait)
            max_over_wait = lat - (double)e->wait_ms;
        if (lat > bound && lat <= bound + allow) {
            allowed++; /* late only by time the machine took: not the service's doing */
            if (allow > max_allow)
                max_allow = allow;
        }
        if (lat > bound + allow) { /* a client timeout is far beyond any bound */
            v++;
            if (shown++ < o->max_evidence)
                fprintf(eo, "    %s #%ld name %s thread %d: sent %.3f ms, %s after %.3f ms (bound %.0f ms + %.3f ms of"
                            " measured CPU starvation; status %d)\n",
                        op_names[e->op], i, name_of(h, e->name), e->thread, rel_ms(o, e->t_send),
                        e->status == CHAOS_ST_TIMEOUT ? "client gave up" : "answered", lat, bound, allow, e->status);
        }
    }
    if (ev)
        fclose(ev);
    fprintf(out, "chaos: %s (c) latency: %ld of %ld requests over bound [acquire: wait_ms + %dx%" PRId64 " + %" PRId64
                 " ms; release/inspect: %dx%" PRId64 " + %" PRId64 " ms; + measured CPU starvation]; max acquire %.1f ms"
                 " (%.1f beyond its wait), release %.1f ms, inspect %.1f ms; %ld late only by starvation (up to %.1f ms)\n",
            v ? "FAIL" : "PASS", v, n_requests(h), o->acquire_rounds, o->node_timeout_ms, o->margin_ms, o->release_rounds,
            o->node_timeout_ms, o->margin_ms, max_lat[0], max_over_wait, max_lat[1], max_lat[2], allowed, max_allow);
    if (v && buf)
        fputs(buf, out);
    free(buf);
    return v;
}

/* ---- (d) statuses ------------------------------------------------------------------ */

/* A 503 any round may answer: too few masters answered, or too few are trusted (the
 * others sit out a quarantine: docs/DESIGN.md §4). */
static int unavailable(const char *err)
{
    return !strcmp(err, "quorum_unavailable") || !strcmp(err, "masters_quarantined");
}

static int documented(const chaos_event *e)
{
    const char *err = e->error;
    switch (e->op) {
    case CHAOS_ACQUIRE:
    case CHAOS_STREAM:
        /* lock_contended: no lease held a quorum, and split rounds went on for the whole
         * retry budget (e.g. stale keys left on a master that lost its last writes) */
        return e->status == 201 ||
               (e->status == 409 && (!strcmp(err, "lock_held") || !strcmp(err, "lock_contended"))) ||
               (e->status == 503 && (unavailable(err) || !strcmp(err, "validity_exhausted")));
    case CHAOS_RELEASE:
        return e->status == 200 || (e->status == 404 && !strcmp(err, "lease_not_found")) ||
               (e->status == 503 && (unavailable(err) || !strcmp(err, "release_unconfirmed")));
    case CHAOS_INSPECT:
        return e->status == 200 || (e->status == 503 && unavailable(err));
    }
    return 0;
}

long chaos_judge_status(const chaos_history *h, const chaos_judge_opts *o, FILE *out)
{
    long v = 0, shown = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    for (long i = 0; i < h->n; i++) {
        const chaos_event *e = &h->ev[i];
        if (e->op == CHAOS_LINE)
            continue; /* a stream's lines: (i) */
        int ok = documented(e) && !e->shape[0];
        if (ok || e->status == CHAOS_ST_TIMEOUT || e->status == CHAOS_ST_HUNGUP)
            continue; /* no answer at all is a latency matter: (c); a hang-up the client's */
        v++;
        if (shown++ < o->max_evidence)
            fprintf(eo, "    %s #%ld name %s thread %d: sent %.3f recv %.3f ms: status %d error '%s'%s%s\n",
                    op_names[e->op], i, name_of(h, e->name), e->thread, rel_ms(o, e->t_send), rel_ms(o, e->t_recv),
                    e->status, e->error, e->shape[0] ? ", contract: " : "", e->shape);
    }
    if (ev)
        fclose(ev);
    fprintf(out, "chaos: %s (d) statuses: %ld of %ld responses outside the documented set or shape\n",
            v ? "FAIL" : "PASS", v, n_requests(h));
    if (v && buf)
        fputs(buf, out);
    free(buf);
    return v;
}

unsigned chaos_sanitizers_in(FILE *exe)
{
    /* The names are read from the ELF dynamic symbol table, not searched for in the
     * whole file: a program that merely mentions them (as this one does) is no build. */
    static const struct {
        const char *prefix;
        unsigned bit;
    } runtimes[] = {{"__asan_init", CHAOS_SAN_ADDRESS}, {"__ubsan_handle_", CHAOS_SAN_UNDEFINED},
                    {"__tsan_init", CHAOS_SAN_THREAD}};
    Elf64_Ehdr eh;
    if (fseeko(exe, 0, SEEK_SET) != 0 || fread(&eh, sizeof eh, 1, exe) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
        return 0;
    Elf64_Shdr *sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || fseeko(exe, (off_t)eh.e_shoff, SEEK_SET) != 0 || fread(sh, sizeof *sh, eh.e_shnum, exe) != eh.e_shnum) {
        free(sh);
        return 0;
    }
    unsigned san = 0;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        char *names = strs->sh_size < (64u << 20) ? malloc(strs->sh_size + 1) : NULL;
        if (!names || fseeko(exe, (off_t)strs->sh_offset, SEEK_SET) != 0 ||
            fread(names, 1, strs->sh_size, exe) != strs->sh_size) {
            free(names);
            continue;
        }
        names[strs->sh_size] = '\0';
        if (fseeko(exe, (off_t)sh[i].sh_offset, SEEK_SET) == 0)
            for (uint64_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
                Elf64_Sym sym;
                if (fread(&sym, sizeof sym, 1, exe) != 1)
                    break;
                if (sym.st_name >= strs->sh_size)
                    continue;
                for (size_t r = 0; r < sizeof runtimes / sizeof runtimes[0]; r++)
                    if (!strncmp(names + sym.st_name, runtimes[r].prefix, strlen(runtimes[r].prefix)))
                        san |= runtimes[r].bit;
            }
        free(names);
    }
    free(sh);
    return san;
}

const char *chaos_sanitizer_names(unsigned san)
{
    static const char *const names[8] = {"no sanitizer",
                                         "AddressSanitizer",
                                         "UndefinedBehaviorSanitizer",
                                         "AddressSanitizer+UndefinedBehaviorSanitizer",
                                         "ThreadSanitizer",
                                         "AddressSanitizer+ThreadSanitizer",
                                         "ThreadSanitizer+UndefinedBehaviorSanitizer",
                                         "AddressSanitizer+ThreadSanitizer+UndefinedBehaviorSanitizer"};
    return names[san & 7u];
}

int chaos_judge_resources(const chaos_resources *r, FILE *out)
{
    long pct = r->base_rss_kb * r->rss_slack_pct / 100;
    long rss_limit = r->base_rss_kb + (r->rss_slack_kb > pct ? r->rss_slack_kb : pct);
    int fds_ok = r->base_fds >= 0 && r->end_fds >= 0 && r->end_fds <= r->base_fds + r->fd_slack;
    int ok = fds_ok;
    char mem[600];
    if (r->sanitizers & CHAOS_SAN_ADDRESS) {
        const char *leaks = !r->exited        ? "not judged: it did not exit on SIGTERM by itself, see (e) and (h)"
                            : r->leak_report[0] ? r->leak_report
                                              : "none reported";
        if (r->exited && r->leak_report[0])
            ok = 0;
        snprintf(mem, sizeof mem,
                 "RSS %.1f -> %.1f MB not judged (%s build: its quarantine keeps freed memory resident); "
                 "leaks judged by LeakSanitizer at exit instead: %s",
                 r->base_rss_kb / 1024.0, r->end_rss_kb / 1024.0, chaos_sanitizer_names(r->sanitizers), leaks);
    } else if (r->sanitizers & CHAOS_SAN_THREAD) {
        snprintf(mem, sizeof mem,
                 "RSS %.1f -> %.1f MB not judged (%s build: its shadow memory grows with the memory touched); "
                 "leaks not judged (ThreadSanitizer has no leak checker)",
                 r->base_rss_kb / 1024.0, r->end_rss_kb / 1024.0, chaos_sanitizer_names(r->sanitizers));
    } else {
        if (r->end_rss_kb > rss_limit)
            ok = 0;
        snprintf(mem, sizeof mem, "RSS %.1f -> %.1f MB (limit %.1f MB)", r->base_rss_kb / 1024.0,
                 r->end_rss_kb / 1024.0, rss_limit / 1024.0);
    }
    fprintf(out, "chaos: %s (f) resources: fds %d -> %d (limit %d), %s; peak during the run: %d fds, %.1f MB\n",
            ok ? "PASS" : "FAIL", r->base_fds, r->end_fds, r->base_fds + r->fd_slack, mem, r->peak_fds,
            r->peak_rss_kb / 1024.0);
    return !ok;
}

/* ---- (l) nothing held by nobody ---------------------------------------------------- */

int chaos_obs_add(chaos_obs_set *s, const chaos_obs *o)
{
    if (s->n == s->cap) {
        long cap = s->cap ? s->cap * 2 : 4096;
        chaos_obs *n = realloc(s->o, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        s->o = n;
        s->cap = cap;
    }
    s->o[s->n++] = *o;
    return 0;
}

int chaos_pause_add(chaos_obs_set *s, int who, int64_t from, int64_t to)
{
    if (s->n_p == s->cap_p) {
        long cap = s->cap_p ? s->cap_p * 2 : 64;
        chaos_pause *n = realloc(s->p, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        s->p = n;
        s->cap_p = cap;
    }
    s->p[s->n_p++] = (chaos_pause){who, from, to};
    return 0;
}

void chaos_obs_free(chaos_obs_set *s)
{
    if (!s)
        return;
    free(s->o);
    free(s->p);
    memset(s, 0, sizeof *s);
}

int chaos_obs_save(const chaos_obs_set *s, const chaos_history *h, const chaos_judge_opts *o, FILE *f)
{
    (void)h;
    fprintf(f, "# chaos samples v1\n# skip_masters %u passes %ld\n", s->skip_masters, s->passes);
    for (long i = 0; i < s->n_p; i++)
        fprintf(f, "P\t%d\t%" PRId64 "\t%" PRId64 "\n", s->p[i].who, s->p[i].from - o->t0, s->p[i].to - o->t0);
    for (long i = 0; i < s->n; i++) {
        const chaos_obs *x = &s->o[i];
        fprintf(f, "O\t%ld\t%" PRId64 "\t%d\t%c\t%d\t%d\t%" PRId64 "\t%s\n", x->pass, x->t - o->t0, x->master, x->kind,
                x->name, x->count, x->left_ms, or_dash(x->lease));
    }
    return ferror(f) ? -1 : 0;
}

int chaos_obs_load(chaos_obs_set *s, const chaos_history *h, FILE *f)
{
    (void)h;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            char *p = strstr(line, "skip_masters ");
            if (p)
                s->skip_masters = (unsigned)strtoul(p + 13, NULL, 10);
            if ((p = strstr(line, "passes ")))
                s->passes = strtol(p + 7, NULL, 10);
            continue;
        }
        if (line[0] == 'P') {
            chaos_pause p;
            if (sscanf(line, "P\t%d\t%" SCNd64 "\t%" SCNd64, &p.who, &p.from, &p.to) != 3 ||
                chaos_pause_add(s, p.who, p.from, p.to) < 0)
                return -1;
            continue;
        }
        chaos_obs x;
        char lease[64];
        memset(&x, 0, sizeof x);
        if (sscanf(line, "O\t%ld\t%" SCNd64 "\t%d\t%c\t%d\t%d\t%" SCNd64 "\t%63s", &x.pass, &x.t, &x.master, &x.kind,
                   &x.name, &x.count, &x.left_ms, lease) != 8)
            return -1;
        copy_field(x.lease, sizeof x.lease, lease);
        if (chaos_obs_add(s, &x) < 0)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}

/* 1 if (l) leaves master m's entries at time t alone: its clock had moved. */
static int obs_skipped(const chaos_obs_set *s, int m, int64_t t)
{
    if (m >= 0 && m < 32 && (s->skip_masters >> m & 1))
        return 1;
    for (long p = 0; p < s->n_p; p++)
        if (s->p[p].who == CHAOS_PAUSE_SKIP + m && s->p[p].from <= t && s->p[p].to >= t)
            return 1;
    return 0;
}

/* What the history says of one lease. */
enum gone_how { GONE_ANSWERED, GONE_HUNG_UP, GONE_HOLD_ENDED, GONE_RELEASED };
static const char *const gone_names[] = {"its last request was answered", "its client hung up",
                                         "its hold ended", "its release was answered"};

typedef struct lease_info {
    const char *lease; /* points into the history; NULL: an empty slot */
    int64_t first_send, gone, released_true, ttl_ms;
    int inst, how, name, granted, mark;
    long last; /* an event of the lease, for the evidence */
} lease_info;

static uint64_t fnv1a(const char *s)
{
    uint64_t x = 1469598103934665603ULL;
    for (; *s; s++)
        x = (x ^ (uint8_t)*s) * 1099511628211ULL;
    return x;
}

/* Open addressing over cap (a power of two) slots: the slot of lease, found or empty. */
static lease_info *lease_slot(lease_info *t, size_t cap, const char *lease)
{
    size_t i = (size_t)fnv1a(lease) & (cap - 1);
    while (t[i].lease && strcmp(t[i].lease, lease) != 0)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static void note_gone(lease_info *li, int64_t t, int how, long idx)
{
    if (t >= li->gone) {
        li->gone = t;
        li->how = how;
        li->last = idx;
    }
}

static int cmp_obs_pass_lease(const void *a, const void *b)
{
    const chaos_obs *x = *(const chaos_obs *const *)a, *y = *(const chaos_obs *const *)b;
    if (x->pass != y->pass)
        return x->pass < y->pass ? -1 : 1;
    int c = strcmp(x->lease, y->lease);
    if (c)
        return c;
    return x->master - y->master;
}

static const char *obs_kind_name(char k)
{
    return k == CHAOS_OBS_MARK     ? "writer mark"
           : k == CHAOS_OBS_READER ? "reader entry"
           : k == CHAOS_OBS_SLOT   ? "permit slot"
                                   : "lock key";
}

static int obs_kind_index(char k)
{
    return k == CHAOS_OBS_MARK ? 0 : k == CHAOS_OBS_READER ? 1 : k == CHAOS_OBS_SLOT ? 2 : 3;
}

long chaos_judge_leftovers(const chaos_history *h, const chaos_obs_set *s, const chaos_judge_opts *o, FILE *out)
{
    size_t cap = 1024;
    while (cap < 2 * (size_t)h->n + 16)
        cap *= 2;
    lease_info *t = calloc(cap, sizeof *t);
    stream_end *se = stream_ends(h);
    const chaos_obs **byp = malloc(((size_t)s->n + 1) * sizeof *byp);
    long v = 0, shown = 0, judged = 0, unknown = 0, by_kind[4] = {0}, quorum_v = 0, nested = 0, hung = 0, skipped = 0;
    double worst_mark = 0, worst_entry = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    if (!t || !se || !byp) {
        fprintf(out, "chaos: judge: out of memory\n");
        free(t);
        free(se);
        free(byp);
        if (ev)
            fclose(ev);
        free(buf);
        return 1;
    }
    for (long i = 0; i < h->n; i++) {
        const chaos_event *e = &h->ev[i];
        const char *lease = e->lease;
        if (e->op == CHAOS_LINE && e->link >= 0 && e->link < h->n)
            lease = h->ev[e->link].lease; /* a stream's line: its grant's lease */
        if (!lease[0])
            continue;
        lease_info *li = lease_slot(t, cap, lease);
        if (!li->lease) {
            *li = (lease_info){.lease = lease, .first_send = e->t_send, .gone = 0, .name = e->name, .last = i};
        }
        if (e->t_send < li->first_send)
            li->first_send = e->t_send;
        if (e->ttl_ms > li->ttl_ms)
            li->ttl_ms = e->ttl_ms;
        li->inst = e->inst;
        nested += e->nested && is_grant(e);
        if (e->op == CHAOS_ACQUIRE || e->op == CHAOS_STREAM) {
            li->mark |= e->wait_ms > 0 && e->mode == CHAOS_MODE_EXCLUSIVE;
            if (e->status == CHAOS_ST_HUNGUP)
                hung++;
            if (is_grant(e)) {
                int why;
                li->granted = 1;
                note_gone(li, e->t_recv, GONE_ANSWERED, i);
                if (!e->nested)
                    note_gone(li, grant_end(h, se, i, 0, &why), GONE_HOLD_ENDED, i);
            } else {
                note_gone(li, e->t_recv, e->status == CHAOS_ST_HUNGUP ? GONE_HUNG_UP : GONE_ANSWERED, i);
            }
        } else if (e->op == CHAOS_RELEASE) {
            note_gone(li, e->t_recv, GONE_RELEASED, i);
            if (e->status == 200 && !e->nested && !e->shape[0])
                li->released_true = e->t_recv;
        } else if (e->op == CHAOS_LINE) {
            note_gone(li, e->t_recv, GONE_HOLD_ENDED, i);
        }
    }
    for (long i = 0; i < s->n; i++) {
        const chaos_obs *x = &s->o[i];
        byp[i] = x;
        if (!x->lease[0] || x->left_ms <= 0)
            continue;
        if (obs_skipped(s, x->master, x->t)) {
            skipped++;
            continue;
        }
        lease_info *li = lease_slot(t, cap, x->lease);
        if (!li->lease) {
            unknown++;
            continue;
        }
        judged++;
        /* a mark: its bound, + 500 ms for a renewal in flight when its writer went */
        int64_t bound = x->kind == CHAOS_OBS_MARK ? o->mark_bound_ms + 500 : li->ttl_ms + 1000;
        int64_t start = li->gone;
        for (long p = 0; p < s->n_p; p++) {
            const chaos_pause *pz = &s->p[p];
            if ((pz->who == x->master || pz->who == CHAOS_PAUSE_INST + li->inst) && pz->to > li->first_send &&
                pz->from < start + bound * NS_PER_MS && pz->to > start)
                start = pz->to; /* what was queued to it ran when it resumed */
        }
        double after = (double)(x->t - li->gone) / 1e6;
        if (x->kind == CHAOS_OBS_MARK && after > worst_mark)
            worst_mark = after;
        if (x->kind != CHAOS_OBS_MARK && after > worst_entry)
            worst_entry = after;
        if (x->t <= start + bound * NS_PER_MS)
            continue;
        v++;
        by_kind[obs_kind_index(x->kind)]++;
        note_violation(o, 'l', x->name, x->t);
        if (shown++ < o->max_evidence)
            fprintf(eo,
                    "    name %s master %d: a %s of lease %s live at %.3f ms (%" PRId64 " ms more to live), %.3f ms"
                    " after its holder was gone at %.3f ms (%s, #%ld); bound %" PRId64 " ms%s\n",
                    name_of(h, x->name), x->master, obs_kind_name(x->kind), x->lease, rel_ms(o, x->t), x->left_ms,
                    after, rel_ms(o, li->gone), gone_names[li->how], li->last, bound,
                    start > li->gone ? " from a resumption" : "");
    }
    /* released means free: no pass after a release answered released: true finds a quorum
     * of masters holding the lease */
    g_sort_ev = h->ev;
    qsort(byp, (size_t)s->n, sizeof *byp, cmp_obs_pass_lease);
    for (long i = 0; i < s->n;) {
        long j = i;
        unsigned masters = 0;
        int64_t first_t = byp[i]->t;
        while (j < s->n && byp[j]->pass == byp[i]->pass && !strcmp(byp[j]->lease, byp[i]->lease)) {
            const chaos_obs *x = byp[j];
            int out_of_quorums = 0; /* it forgot: the service counts it for nobody */
            for (long p = 0; p < s->n_p && !out_of_quorums; p++)
                out_of_quorums = s->p[p].who == CHAOS_PAUSE_OUT + x->master && s->p[p].from <= x->t &&
                                 s->p[p].to >= x->t;
            if (x->kind != CHAOS_OBS_MARK && x->left_ms > 0 && x->master >= 0 && x->master < 32 &&
                !obs_skipped(s, x->master, x->t) && !out_of_quorums)
                masters |= 1u << x->master;
            if (x->t < first_t)
                first_t = x->t;
            j++;
        }
        const chaos_obs *x = byp[i];
        lease_info *li = x->lease[0] ? lease_slot(t, cap, x->lease) : NULL;
        if (li && li->lease && li->released_true && first_t > li->released_true &&
            __builtin_popcount(masters) >= o->quorum) {
            quorum_v++;
            note_violation(o, 'l', x->name, first_t);
            if (shown++ < o->max_evidence)
                fprintf(eo,
                        "    name %s: lease %s held on %d masters (a quorum) at %.3f ms, after its release answered"
                        " released: true at %.3f ms\n",
                        name_of(h, x->name), x->lease, __builtin_popcount(masters), rel_ms(o, first_t),
                        rel_ms(o, li->released_true));
            li->released_true = 0; /* once per lease */
        }
        i = j;
    }
    if (ev)
        fclose(ev);
    v += quorum_v;
    if (o->stats) {
        chaos_judge_stats *st = o->stats;
        st->obs_judged = judged;
        st->obs_unknown = unknown;
        for (int k = 0; k < 4; k++)
            st->left_over[k] = by_kind[k];
        st->left_quorum = quorum_v;
        st->nested_grants = nested;
        st->hung_up = hung;
        st->mark_after_gone_ms = worst_mark;
        st->entry_after_gone_ms = worst_entry;
    }
    long marks = 0, entries = 0;
    for (long i = 0; i < s->n; i++) {
        marks += s->o[i].kind == CHAOS_OBS_MARK;
        entries += s->o[i].kind != CHAOS_OBS_MARK;
    }
    fprintf(out,
            "chaos: %s (l) nothing held by nobody: %ld passes over the masters, %ld live entries seen (%ld writer"
            " marks, %ld keys, slots and reader entries), %ld of known leases judged, %ld of leases the history does"
            " not know; left beyond the bound: %ld marks [bound %" PRId64 " + 500 ms], %ld reader entries, %ld permit"
            " slots, %ld lock keys [bound ttl + 1000 ms]; %ld leases held by a quorum after released: true;"
            " longest seen after its holder was gone: a mark %.0f ms, anything else %.0f ms; %ld waiters hung up,"
            " %ld reentrant re-entries granted; %ld entries on masters whose clock had moved not judged%s\n",
            v ? "FAIL" : "PASS", s->passes, s->n, marks, entries, judged, unknown, by_kind[0], o->mark_bound_ms,
            by_kind[1], by_kind[2], by_kind[3], quorum_v, worst_mark, worst_entry, hung, nested, skipped,
            s->skip_masters ? " (a scenario's masters whose clock moved: not judged at all)" : "");
    if (v && buf)
        fputs(buf, out);
    free(buf);
    free(t);
    free(se);
    free(byp);
    return v;
}

/* ---- (m) a stopped streamed holder lets go ----------------------------------------- */

long chaos_judge_stopped(const chaos_stopped *s, long n, const chaos_judge_opts *o, FILE *out)
{
    long late = 0, ok = 0, shown = 0, duplex = 0, unknown = 0, freed = 0;
    double worst = 0, sum = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *ev = open_memstream(&buf, &len);
    FILE *eo = ev ? ev : out;
    for (long i = 0; i < n; i++) {
        const chaos_stopped *x = &s[i];
        duplex += x->duplex;
        int64_t bound = x->silence_ms + 2 * o->node_timeout_ms + o->margin_ms + (x->faults ? x->ttl_ms * 4 / 3 : 0);
        double took = x->freed ? (double)(x->freed - x->last_ping) / 1e6 : 0;
        if (x->freed) {
            freed++;
            sum += took;
            if (took > worst)
                worst = took;
        }
        int held_late = x->held_last > x->last_ping + bound * NS_PER_MS;
        if (!held_late && x->freed) {
            ok++;
            continue;
        }
        if (!held_late) { /* never granted, but never told held past the bound: 503s */
            unknown++;
            continue;
        }
        late++;
        note_violation(o, 'm', x->name, x->stopped);
        if (shown++ < o->max_evidence)
            fprintf(eo,
                    "    stopped holder %ld (%s, ttl %" PRId64 " ms, silence %" PRId64 " ms): last ping at %.3f ms,"
                    " SIGSTOP at %.3f ms; a quorum still held it %.3f ms after its last ping (bound %" PRId64
                    " ms%s); %s\n",
                    i, x->duplex ? "duplex" : "one-way", x->ttl_ms, x->silence_ms, rel_ms(o, x->last_ping),
                    rel_ms(o, x->stopped), (double)(x->held_last - x->last_ping) / 1e6, bound,
                    x->faults ? ", a fault meanwhile" : "",
                    x->freed ? "granted to it later" : "still held when the checker gave up");
    }
    if (ev)
        fclose(ev);
    if (o->stats) {
        o->stats->stopped = n;
        o->stats->stopped_ok = ok;
        o->stats->stopped_late = late;
        o->stats->stopped_worst_ms = worst;
    }
    fprintf(out,
            "chaos: %s (m) a stopped streamed holder lets go: %ld holders stopped by SIGSTOP (%ld duplex), %ld let go"
            " in time, %ld held past the bound, %ld undetermined (answers 503 until the checker gave up)"
            " [bound: silence + 2 x node timeout + margin after the last ping, + 4/3 ttl with a fault meanwhile];"
            " the name went to another client %.0f ms after the last ping on average, %.0f ms at most\n",
            late ? "FAIL" : "PASS", n, duplex, ok, late, unknown, freed ? sum / (double)freed : 0.0, worst);
    if (late && buf)
        fputs(buf, out);
    free(buf);
    return late;
}
