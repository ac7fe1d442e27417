/* judge.h -- the chaos checker's verdicts: a recorded client history in, one verdict
 * line per property out.  Pure logic (the only I/O is the report stream and the history
 * file), so the self-test can feed it synthetic histories. */
#ifndef CHAOS_JUDGE_H
#define CHAOS_JUDGE_H

#include <stdint.h>
#include <stdio.h>

/* CHAOS_STREAM: an acquire with hold=stream (judged as an acquire; t_recv: when its
 * grant line was read).  CHAOS_LINE: not a request but what became of a granted stream
 * after its grant line: a line read from it, or its end without one (status: the
 * CHAOS_LINE_* kind; link: the stream's grant). */
enum chaos_op { CHAOS_ACQUIRE = 0, CHAOS_RELEASE = 1, CHAOS_INSPECT = 2, CHAOS_STREAM = 3, CHAOS_LINE = 4 };

/* The kinds of CHAOS_LINE events (in chaos_event.status).  t_recv: when the line was
 * read (CLOSED: when the client closed the connection; CUT: when it saw the end); t_send:
 * when the client began waiting for it (CLOSED: when it decided to close, its hold's
 * end).  error: the line's reason ("no_quorum", "lease_lost", "shutting_down") or "";
 * shape: how the line departs from the contract, or "". */
#define CHAOS_LINE_EXTENDED 1 /* {"event":"extended","validity_ms":V} (validity_ms: V) */
#define CHAOS_LINE_LOST 2     /* {"event":"lost","reason":...}: the end of the stream */
#define CHAOS_LINE_RELEASED 3 /* {"event":"released"[,"reason":...]}: the end of the stream */
#define CHAOS_LINE_CLOSED 4   /* no line: the client closed the stream */
#define CHAOS_LINE_CUT 5      /* no line: the stream ended (or broke) without a final line */
#define CHAOS_LINE_OTHER 6    /* a line that is none of the above (shape says how) */
#define CHAOS_LINE_ALIVE 7    /* duplex hold (Upgrade: redlock-hold): {"event":"alive","ping":n,"validity_ms":V},
                                 the answer to the client's ping n; t_send: when that ping was sent, from
                                 which the client counts V (docs/DESIGN.md section 10) */
#define CHAOS_LINE_KINDS 8

/* Outcomes stored in chaos_event.status when no HTTP status could be read. */
#define CHAOS_ST_TIMEOUT (-1) /* no complete response within the client's own timeout */
#define CHAOS_ST_CONNERR (-2) /* connect/send/recv failed, or the peer closed mid-response */
#define CHAOS_ST_BADRESP (-3) /* bytes came back but not a parseable HTTP response */
#define CHAOS_ST_HUNGUP (-4)  /* the client hung up on purpose (a waiter that gives up early):
                                 neither (c) nor (d) judges it; its lease is gone from then on */

#define CHAOS_MAX_NAMES 64

/* chaos_event.mode: how a request on a lock name asked for it.  A semaphore's requests
 * (on a name with chaos_history.permits > 0) are exclusive here: their mode is the
 * name's. */
#define CHAOS_MODE_EXCLUSIVE 0
#define CHAOS_MODE_SHARED 1 /* "mode":"shared": a reader */

/* One request as the client saw it.  Times are CLOCK_MONOTONIC nanoseconds taken by the
 * client: t_send just before the first byte of the request was written, t_recv just after
 * the last byte of the response was read (for a timeout: when the client gave up). */
typedef struct chaos_event {
    int op;              /* enum chaos_op */
    int name;            /* index into chaos_history.names */
    int thread;
    int64_t t_send;
    int64_t t_recv;
    int status;          /* HTTP status, or CHAOS_ST_* */
    char error[32];      /* the body's "error" code; "" if none */
    char shape[48];      /* first way the response departs from the contract; "" if none */
    int64_t token;       /* acquire 201: fencing_token */
    int64_t validity_ms; /* acquire 201: validity_ms */
    int64_t ttl_ms;      /* acquire: the ttl_ms asked for */
    int64_t wait_ms;     /* acquire: the wait_ms asked for */
    long link;           /* acquire, stream: index of the release of this grant, -1 if none;
                            release: index of the acquire it releases;
                            line: index of its stream's grant */
    int64_t allow_ns;    /* CPU starvation measured while this request was out (the client
                            thread's own, plus the service's most starved thread): time the
                            machine, not the service, held it up; widens bound (c) */
    int mode;            /* CHAOS_MODE_*: acquire, stream (and their lines, releases) */
    int slot;            /* a semaphore's grant: the slot it answered; a semaphore's
                            inspect: the permits it showed held (evidence only); -1 otherwise */
    int inst;            /* the service instance it went to (0: the first, 1: the second) */
    int nested;          /* a reentrant re-entry of a lease that already holds the name (its
                            grant is not a holder of its own: (a), (b), (j) skip it), or the
                            release of such a re-entry (answered released: false) */
    char lease[40];      /* the lease: the client's own, or the one a grant answered; "" if
                            unknown (a refused request that let the service choose) */
} chaos_event;

/* A growable history.  Zero-initialise, then chaos_history_add(); chaos_history_free(). */
typedef struct chaos_history {
    chaos_event *ev;
    long n, cap;
    char names[CHAOS_MAX_NAMES][64];
    int permits[CHAOS_MAX_NAMES]; /* 0: a lock name; N > 0: a semaphore of N permits */
    int n_names;
} chaos_history;

/* One (a), (b), (j) or (k) violation: the property, the name, and when it happened
 * (CLOCK_MONOTONIC ns: the start of the overlap; the later grant's t_send for a token
 * inversion/duplicate, the reader's for a reader's token below a writer's). */
typedef struct chaos_violation {
    char prop; /* 'a', 'b', 'j' or 'k' */
    int name;
    int64_t t_ns;
} chaos_violation;

#define CHAOS_MAX_VIOLATIONS 4096

/* Filled by chaos_judge_mutex and chaos_judge_fencing when chaos_judge_opts.stats is set
 * (zero it first): the counts behind their verdict lines, and the first
 * CHAOS_MAX_VIOLATIONS violations, so the caller can relate them to its faults. */
typedef struct chaos_judge_stats {
    long grants, overlaps, inversions, duplicates;
    /* chaos_judge_streams: granted streams, lines by kind, streams ended without a final
     * line, lines late (lost or extended after the validity last announced had ended; and
     * of those late only by measured starvation), lines out of contract */
    long streams, extended, lost, released, closed, cut, late, late_lost, late_starved, bad_lines, alive;
    /* chaos_judge_shared: shared grants (streamed ones among them), readers whose hold
     * overlapped a writer's, tokens out of order between readers and writers, the most
     * readers of one name at once, reader holds that began while another reader held */
    long shared_grants, shared_streams, reader_writer, shared_bad_tokens, max_readers, readers_together;
    /* chaos_judge_semaphores: permits granted (streamed ones among them), holds that
     * began with N already held, the token findings as (b)'s, and per semaphore name
     * (indexed like chaos_history.names) the most holders seen at once */
    long sem_grants, sem_streams, sem_over, sem_inversions, sem_duplicates;
    long max_permits[CHAOS_MAX_NAMES];
    /* chaos_judge_leftovers: samples judged, by kind; entries left beyond their bound, by
     * kind; passes in which a quorum held a lease answered released: true; samples of
     * leases the history does not know; the longest a writer mark outlived its writer */
    long obs_judged, obs_unknown, left_over[4], left_quorum, nested_grants, hung_up;
    double mark_after_gone_ms, entry_after_gone_ms;
    /* chaos_judge_stopped: stopped holders judged, released within the bound, not */
    long stopped, stopped_ok, stopped_late;
    double stopped_worst_ms;
    long n_v;
    chaos_violation v[CHAOS_MAX_VIOLATIONS];
} chaos_judge_stats;

/* What the verdicts are judged against. */
typedef struct chaos_judge_opts {
    int64_t node_timeout_ms; /* the service's --node-timeout-ms */
    int64_t mark_bound_ms;   /* (l): how long a writer mark may outlive its writer (3000) */
    int quorum;              /* (l): masters that make a quorum (3) */
    int acquire_rounds;      /* master round trips per acquire attempt (acquire, raise, release) */
    int release_rounds;      /* master round trips of a release or an inspect */
    int64_t margin_ms;       /* scheduling/HTTP allowance added to every latency bound */
    int max_evidence;        /* evidence lines printed per failed property */
    int64_t t0;              /* timestamps are printed relative to this (ns) */
    chaos_judge_stats *stats; /* NULL, or filled as described above */
} chaos_judge_opts;

/* One look at one master's lock state (tests/chaos/chaos.c's sampler, straight to the
 * master's own port): an entry that was live there at time t (CLOCK_MONOTONIC ns, the
 * middle of the call) and had left_ms more to live by the master's clock. */
#define CHAOS_OBS_KEY 'k'    /* a lock key P<name> (exclusive, reentrant: count) */
#define CHAOS_OBS_SLOT 's'   /* a permit slot P#sem:<name>#<i> */
#define CHAOS_OBS_READER 'r' /* a member of P#r:<name> */
#define CHAOS_OBS_MARK 'w'   /* a writer-intent mark, a member of P#w:<name> */
typedef struct chaos_obs {
    int64_t t;
    long pass;     /* samples of one pass over the masters share it */
    int master;
    char kind;     /* CHAOS_OBS_* */
    int name;      /* index into chaos_history.names */
    int count;     /* a lock key's reentrant count (1 without one) */
    int64_t left_ms;
    char lease[40];
} chaos_obs;

/* A time when a process could not act: master m frozen (who = m), or service instance i
 * frozen (who = CHAOS_PAUSE_INST + i).  Commands queued to it run when it resumes. */
#define CHAOS_PAUSE_INST 100
/* ... or master m out of the service's quorums because it forgot (restarted empty, data cut
 * or restored, wiped): who = CHAOS_PAUSE_OUT + m.  (l)'s quorum check does not count it. */
#define CHAOS_PAUSE_OUT 200
/* ... or master m's clock moved (who = CHAOS_PAUSE_SKIP + m): from the move until what it
 * wrote in its moved clock has run out by the true one; (l) does not judge its entries then. */
#define CHAOS_PAUSE_SKIP 300
typedef struct chaos_pause {
    int who;
    int64_t from, to;
} chaos_pause;

typedef struct chaos_obs_set {
    chaos_obs *o;
    long n, cap;
    chaos_pause *p;
    long n_p, cap_p;
    long passes;         /* passes made */
    long master_looks[8]; /* per master: looks that answered */
    unsigned skip_masters; /* masters (bit i) (l) does not judge at all (a scenario's moved clocks) */
} chaos_obs_set;

/* Appends (0, or -1 when out of memory). */
int chaos_obs_add(chaos_obs_set *s, const chaos_obs *o);
int chaos_pause_add(chaos_obs_set *s, int who, int64_t from, int64_t to);
void chaos_obs_free(chaos_obs_set *s);
/* As chaos_history_save/load, for the samples and pauses (times relative to o->t0). */
int chaos_obs_save(const chaos_obs_set *s, const chaos_history *h, const chaos_judge_opts *o, FILE *f);
int chaos_obs_load(chaos_obs_set *s, const chaos_history *h, FILE *f);

/* Sets the documented defaults: 50 ms node timeout, 3 and 1 rounds, 200 ms margin. */
void chaos_judge_opts_default(chaos_judge_opts *o);

/* Appends a copy of e.  Returns its index, or -1 when out of memory (h unchanged). */
long chaos_history_add(chaos_history *h, const chaos_event *e);
/* Frees the events; h is left empty and reusable.  NULL is a no-op. */
void chaos_history_free(chaos_history *h);
/* Writes h and o as a tab-separated file (times relative to o->t0).  0, or -1 on error. */
int chaos_history_save(const chaos_history *h, const chaos_judge_opts *o, FILE *f);
/* Reads a file written by chaos_history_save into an empty h and sets o from it (t0 = 0).
 * 0, or -1 on a malformed file (h may hold a prefix; free it). */
int chaos_history_load(chaos_history *h, chaos_judge_opts *o, FILE *f);

/* Each judge prints one "PASS|FAIL (x) ..." line, and on failure up to o->max_evidence
 * indented evidence lines, to out; it returns the number of violations found.
 *
 * (a) mutual exclusion.  A grant's hold is [t_recv, min(release t_send, t_send + validity)):
 *     the client cannot act before it has the answer, stops when it sends the release, and
 *     the service only promises the lock until start-of-its-round + validity, a moment no
 *     earlier than t_send + validity.  Both bounds are thus inside the true hold, so any two
 *     overlapping holds of one name are a real double grant, never a measuring artefact.
 *     Exclusive grants of lock names only: readers are (j)'s, semaphores (k)'s. */
long chaos_judge_mutex(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/*     A streamed holder (CHAOS_STREAM) holds from when its grant line was read until the
 *     earliest of: its release sent (a DELETE with the lease), its decision to close the
 *     stream, the read of a final line (lost, released), and the end of the validity last
 *     announced: for an extended line, its read + validity_ms (the service counts it from
 *     when it writes the line, which is earlier); for the grant line, as for any grant,
 *     sent + validity_ms (the grant's validity counts from its round's start, not from the
 *     line).  A stream that ends without a final line is thus held until that validity.
 *
 * (a') the same with the end a client reading validity "from now" would use,
 *     t_recv + validity.  Informational: an overlap here that (a) does not show means the
 *     response reached the client more than the drift allowance after the service computed
 *     validity (slow delivery or a validity computed too early).  Prints INFO, returns count. */
long chaos_judge_mutex_client_view(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (b) fencing: for grants A, B of one name with A.t_recv < B.t_send (A's answer was in
 *     before B was asked, so A was issued first), B.token > A.token; and no token is
 *     issued twice for one name.  Exclusive grants of lock names only, as (a). */
long chaos_judge_fencing(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (i) streamed holds: each "lost" line, and each "extended" line, is read before the
 *     validity announced last before it ends for the client (read of that line +
 *     validity_ms; for the grant line its read too), up to the measured starvation of the
 *     wait (allow_ns: late only by that is counted, not failed); lines read after the
 *     client sent its DELETE are not timed (it was busy with the DELETE, not reading, and
 *     its hold was over).  Every line is as documented (shape), and none follows a final
 *     one.  Fills the stream counts of o->stats. */
long chaos_judge_streams(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (j) no reader with a writer: on each lock name, no shared grant's hold overlaps an
 *     exclusive grant's hold (holds as in (a), streamed ones too; readers may overlap each
 *     other).  And tokens between the two kinds (docs/DESIGN.md section 12): a reader's
 *     token is at least the token of every exclusive grant of the name answered before the
 *     reader was asked (W.t_recv < R.t_send), and an exclusive grant's token is above the
 *     token of every reader answered before it was asked (R.t_recv < W.t_send): a reader's
 *     token is fenced on a quorum like a writer's, and the next writer increments it.  A
 *     reader of a name no writer held has token 0.  Exclusive grants among themselves are
 *     (a)'s and (b)'s. */
long chaos_judge_shared(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (k) semaphores, never more than N holders: on each name with permits N > 0, at no
 *     instant more than N holds (as in (a)) overlap; and its tokens are ordered as (b)
 *     orders a lock's (for grants A, B with A.t_recv < B.t_send, B.token > A.token; no
 *     token twice).  (a) and (b) leave semaphore names alone. */
long chaos_judge_semaphores(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (l) nothing held by nobody: no writer-intent mark, reader entry, permit slot or lock key
 *     (with its reentrant count) is live on a master after its holder is gone, beyond
 *     the bound docs/DESIGN.md's state table gives: a mark o->mark_bound_ms (renewed every
 *     second while its writer waits, dropped when it stops waiting, else expiring), the
 *     others the lease's ttl (their own expiry) plus a second (an extension or a
 *     clean-up in flight).  "Gone": a lease's last request answered (or given up) when it
 *     was never granted; else the end of its last hold (as (a) has it) or the answer of
 *     its release, whichever is later.  Counted from the resumption instead when the
 *     master, or the instance the lease went through, was frozen meanwhile (its queued
 *     commands ran then).  And "released means free": in no pass over the masters after a
 *     release answered released: true do a quorum of them hold that lease.  Masters in
 *     s->skip_masters (their clock was moved) are not judged. */
long chaos_judge_leftovers(const chaos_history *h, const chaos_obs_set *s, const chaos_judge_opts *o, FILE *out);

/* One stopped streamed holder (a client process holding with hold=stream, then SIGSTOPped). */
typedef struct chaos_stopped {
    int name;
    int duplex;          /* the service answered 101 (pings); 0: a one-way stream */
    int64_t ttl_ms, silence_ms;
    int64_t last_ping;   /* when it sent its last ping (the grant's read if none) */
    int64_t stopped;     /* SIGSTOP */
    int64_t held_last;   /* the last GET that found a quorum holding the name with the holder's
                            token (no one else takes these names); 0: none */
    int64_t freed;       /* the first grant of the name to another client (answer read); 0: never */
    int64_t gave_up;     /* when the checker stopped trying (freed == 0) */
    int faults;          /* a fault was active on some master meanwhile */
} chaos_stopped;

/* (m) a stopped streamed holder lets go: no GET finds a quorum still holding the name with
 *     the holder's token later than silence + 2 node timeouts + margin after the holder's
 *     last ping (docs/DESIGN.md section 10: released at most the silence after the last
 *     ping answered, plus an extension in flight and a release round), or than ttl + ttl/3
 *     more when a fault was active (a release that reached no quorum: the keys expire a
 *     ttl after the last extension); and the name is granted to another client in the end.
 *     Answers 503 prove nothing either way (the service could not reach a quorum). */
long chaos_judge_stopped(const chaos_stopped *s, long n, const chaos_judge_opts *o, FILE *out);

/* (c) latency: acquire answered within wait_ms + acquire_rounds x node_timeout + margin,
 *     release and inspect within release_rounds x node_timeout + margin, each plus the
 *     event's measured starvation allowance (allow_ns).  A client-side timeout (the client
 *     waits 5 s beyond the bound) is judged the same way, so it fails unless that much
 *     starvation was measured. */
long chaos_judge_latency(const chaos_history *h, const chaos_judge_opts *o, FILE *out);
/* (d) statuses: acquire 201 | 409 lock_held | 503 quorum_unavailable|validity_exhausted;
 *     release 200 | 404 lease_not_found | 503 quorum_unavailable; inspect 200 |
 *     503 quorum_unavailable; and every body/header shaped as documented.  A transport
 *     error (connection closed or reset, unparseable answer) is a violation; a client
 *     timeout is left to (c). */
long chaos_judge_status(const chaos_history *h, const chaos_judge_opts *o, FILE *out);

/* The sanitizers a binary was built with (`make SANITIZER=...`). */
#define CHAOS_SAN_ADDRESS 1u   /* AddressSanitizer, with LeakSanitizer */
#define CHAOS_SAN_UNDEFINED 2u /* UndefinedBehaviorSanitizer */
#define CHAOS_SAN_THREAD 4u    /* ThreadSanitizer */

/* Returns the CHAOS_SAN_* bits of the sanitizer runtimes an executable (64-bit ELF)
 * calls into: __asan_init, __ubsan_handle_*, __tsan_init in its dynamic symbol table,
 * where they are whether the runtime is a shared library (gcc) or linked in (clang
 * exports its entry points).  0 for an uninstrumented build or anything unreadable.
 * clang's ASan and TSan runtimes carry the UBSan handlers too, so with clang the UBSan
 * bit comes with either; (f) goes by the ASan and TSan bits, which are exact. */
unsigned chaos_sanitizers_in(FILE *exe);
/* "AddressSanitizer+UndefinedBehaviorSanitizer", ..., "no sanitizer" for 0. */
const char *chaos_sanitizer_names(unsigned san);

/* (f) what the service's resources looked like, and what its exit on SIGTERM showed. */
typedef struct chaos_resources {
    unsigned sanitizers; /* CHAOS_SAN_* of the service binary */
    int base_fds, end_fds, fd_slack;
    long base_rss_kb, end_rss_kb, rss_slack_kb;
    int rss_slack_pct;
    int peak_fds;
    long peak_rss_kb;
    int exited;            /* it exited with a status on SIGTERM, so its at-exit checks ran */
    char leak_report[256]; /* what LeakSanitizer printed at that exit ("" if nothing) */
} chaos_resources;

/* (f) resources.  fds after the run within fd_slack of the baseline, always.  RSS within
 *     the larger of rss_slack_kb and rss_slack_pct% above the baseline -- except under
 *     AddressSanitizer, whose quarantine keeps freed memory resident (RSS 18 -> 117 MB in
 *     a 30 s run with no leak), where leaks are judged by LeakSanitizer's report at exit
 *     instead (any report fails: a leak, or LeakSanitizer unable to run), and under
 *     ThreadSanitizer, whose shadow memory grows with the memory touched and which has no
 *     leak checker: RSS is then printed, not judged, and the line says so.
 *     UndefinedBehaviorSanitizer leaves the allocator alone: judged as a default build.
 *     Prints one line; returns 0 if it held, 1 if not. */
int chaos_judge_resources(const chaos_resources *r, FILE *out);

#endif
