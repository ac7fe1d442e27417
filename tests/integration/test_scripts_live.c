/* test_scripts_live.c -- the Lua scripts of service/scripts.c run on a real redis-server,
 * one call at a time, checked against the rules of docs/DESIGN.md: the master's record
 * checked first, the effective counter (floor, base), the attempt tags, retention, the
 * batch, and the marker script's verdicts.  No service: each call is made by hand. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "scripts.h"

static pid_t redis_pid;
static redisContext *R;
static int R_port;

static int pick_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        cr_assert_fail("no free port");
    close(fd);
    return ntohs(a.sin_port);
}

static void start(void)
{
    for (int attempt = 0; attempt < 5 && !R; attempt++) {
        int port = pick_port();
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        redis_pid = fork();
        if (redis_pid == 0) {
            int devnull = open("/dev/null", 1);
            dup2(devnull, 1);
            dup2(devnull, 2);
            execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", NULL);
            _exit(127);
        }
        double end = h_now_ms() + 5000;
        while (h_now_ms() < end) {
            R_port = port;
            redisContext *c = redisConnect("127.0.0.1", port);
            if (c && !c->err) {
                redisReply *r = redisCommand(c, "PING");
                int ok = r && r->type == REDIS_REPLY_STATUS;
                if (r)
                    freeReplyObject(r);
                /* ours, not another's that took the port between pick_port() and now */
                ok = ok && h_redis_is(port, redis_pid, NULL);
                if (ok) {
                    R = c;
                    break;
                }
            }
            if (c)
                redisFree(c);
            usleep(10000);
        }
        if (!R) {
            kill(redis_pid, SIGKILL);
            waitpid(redis_pid, NULL, 0);
        }
    }
    cr_assert_not_null(R, "redis-server did not start");
}

static void stop(void)
{
    if (R)
        redisFree(R);
    R = NULL;
    if (redis_pid > 0) {
        kill(redis_pid, SIGKILL);
        waitpid(redis_pid, NULL, 0);
    }
}

TestSuite(scripts_live, .init = start, .fini = stop, .timeout = 60);

#define MK "redlock:#master"

/* EVAL a lock script as master.c sends it: the record key first. */
/* The clock window the next lock_script() sends ("": none, as a service that does not
 * watch clocks sends). */
static const char *window = "";
static long long last_time; /* the master time the last lock_script() answered (ms) */

static redisReply *lock_script(int id, int nkeys, const char **keys, int nargs, const char **args)
{
    const char *argv[64];
    char nk[8];
    int a = 0;
    snprintf(nk, sizeof nk, "%d", nkeys + 1);
    argv[a++] = "EVAL";
    argv[a++] = script_source(id);
    argv[a++] = nk;
    argv[a++] = MK;
    for (int i = 0; i < nkeys; i++)
        argv[a++] = keys[i];
    argv[a++] = window; /* every lock script's first argument: its clock window */
    for (int i = 0; i < nargs; i++)
        argv[a++] = args[i];
    redisReply *r = redisCommandArgv(R, a, argv, NULL);
    cr_assert_not_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        return r; /* refused whole (PRELUDE), or the script raised */
    /* the time it ran at first (proto.h; none without a window): an integer in front of
     * an array's elements, a string in front of any other reply */
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements >= 1, "a lock script answers its time first");
    redisReply *t = r->element[0], *reply = r;
    if (t->type == REDIS_REPLY_INTEGER) {
        last_time = t->integer;
        freeReplyObject(t);
        memmove(r->element, r->element + 1, (r->elements - 1) * sizeof *r->element);
        r->elements--;
    } else {
        cr_assert(t->type == REDIS_REPLY_STRING && r->elements == 2, "{\"<time>\", reply}");
        last_time = atoll(t->str);
        reply = r->element[1];
        r->element[1] = NULL; /* kept: freeReplyObject() skips it */
        freeReplyObject(r);
    }
    if (!window[0])
        cr_assert_eq(last_time, PROTO_TIME_NONE, "no window: no time");
    return reply;
}

static void cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(R, fmt, ap);
    va_end(ap);
    cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r ? r->str : "no reply");
    freeReplyObject(r);
}

static long long int_cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(R, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_STRING ? atoll(r->str) : -999;
    freeReplyObject(r);
    return v;
}

static void str_cmd(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(R, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* v without the counter a grant stamps into its header ("@<F>", docs/DESIGN.md section
 * 14), which must be there: the value as its attempt wrote it. */
static const char *unstamped(char *v)
{
    char *at = strchr(v, '@'), *nl = strchr(v, '\n');
    cr_assert(at && (!nl || at < nl), "the grant's counter is stamped in the header: %s", v);
    size_t k = strspn(at + 1, "0123456789");
    cr_assert_gt(k, 0, "%s", v);
    memmove(at, at + 1 + k, strlen(at + 1 + k) + 1);
    return v;
}

/* acquire name in bucket -> {kind, F} or {0, pttl, F, holder}: returns kind, F in *f */
static long long acquire_in(const char *name, const char *bucket, const char *value, long long *f)
{
    char key[128];
    snprintf(key, sizeof key, "redlock:%s", name);
    const char *keys[] = {key};
    const char *args[] = {bucket, value, "10000"};
    redisReply *r = lock_script(SCRIPT_ACQUIRE, 1, keys, 3, args);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long kind = r->element[0]->integer;
    *f = r->element[kind == 0 ? 2 : 1]->integer;
    freeReplyObject(r);
    return kind;
}

static long long acquire(const char *name, const char *value, long long *f)
{
    return acquire_in(name, "b7", value, f);
}

static long long release(const char *name, const char *who)
{
    char key[128];
    snprintf(key, sizeof key, "redlock:%s", name);
    const char *keys[] = {key};
    const char *args[] = {who, "redlock:#released:x", "origin"};
    redisReply *r = lock_script(SCRIPT_RELEASE, 1, keys, 3, args);
    /* 0 | {1, pttl} deleted | {10 + holds left, pttl}: the code */
    cr_assert(r->type == REDIS_REPLY_INTEGER ||
              (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_INTEGER));
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

static void mark(void) { cmd("HSET " MK " cluster c run r1 base 0 nb 0"); }

static int refused_as(redisReply *r, const char *code)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, code, strlen(code)) == 0;
}

Test(scripts_live, a_master_without_its_whole_record_refuses_before_any_write)
{
    const char *keys[] = {"redlock:x"};
    const char *args[] = {"b1", "lease.0000000000000001", "10000"};
    redisReply *r = lock_script(SCRIPT_ACQUIRE, 1, keys, 3, args);
    cr_assert(refused_as(r, SCRIPT_ERR_UNMARKED), "%s", r->str);
    freeReplyObject(r);
    cr_assert_eq(int_cmd("DBSIZE"), 0, "nothing written");
    mark();
    cmd("HSET " MK " q 1");
    r = lock_script(SCRIPT_ACQUIRE, 1, keys, 3, args);
    cr_assert(refused_as(r, SCRIPT_ERR_QUARANTINED), "%s", r->str);
    freeReplyObject(r);
    cr_assert_eq(int_cmd("EXISTS redlock:x"), 0);
    /* A record that lost one of its counters (a field deleted by hand) is a lost record. */
    cmd("HDEL " MK " q");
    long long f;
    cr_assert_eq(acquire_in("x", "b1", "L.0000000000000001", &f), 1);
    cr_assert_eq(release("x", "L"), 1);
    cmd("HDEL " MK " b1");
    r = lock_script(SCRIPT_ACQUIRE, 1, keys, 3, args);
    cr_assert(refused_as(r, SCRIPT_ERR_UNMARKED), "a damaged record: %s", r->str);
    freeReplyObject(r);
}

Test(scripts_live, tokens_grow_per_bucket_and_nothing_per_name_outlives_its_lock)
{
    mark();
    long long f;
    cr_assert_eq(acquire("a", "L1.0000000000000001", &f), 1);
    cr_assert_eq(f, 1);
    cr_assert_eq(release("a", "L1"), 1);
    cr_assert_eq(acquire("a", "L2.0000000000000002", &f), 1);
    cr_assert_eq(f, 2);
    cr_assert_eq(acquire("b", "L3.0000000000000003", &f), 1);
    cr_assert_eq(f, 3, "a name of the same bucket continues its counter");
    cr_assert_eq(acquire_in("c", "b9", "L4.0000000000000004", &f), 1);
    cr_assert_eq(f, 1, "another bucket has its own");
    cr_assert_eq(int_cmd("HGET " MK " nb"), 2, "the record counts its counters");
    cr_assert_eq(release("a", "L2"), 1);
    cr_assert_eq(release("b", "L3"), 1);
    cr_assert_eq(release("c", "L4"), 1);
    cr_assert_eq(int_cmd("DBSIZE"), 2, "only the record and the expiry key are left once the locks are gone");
    long long x = int_cmd("PTTL redlock:#expiry");
    cr_assert(x > 0 && x <= 11000, "the expiry key goes with the longest lock's ttl (and "
              "settle()'s slack of 1 s): %lld", x);
    cr_assert_eq(acquire("a", "L5.0000000000000005", &f), 1);
    cr_assert_eq(f, 4, "and a name's tokens still grow");
}

Test(scripts_live, new_names_in_other_buckets_start_alike_whatever_the_order)
{
    /* Two masters see two new names in opposite orders: each name gets the same value
     * on both (its own bucket's counter), so no raise round is needed. */
    mark();
    long long f1, f2;
    cr_assert_eq(acquire_in("n2", "b11", "B.0000000000000002", &f2), 1);
    cr_assert_eq(acquire_in("n1", "b10", "A.0000000000000001", &f1), 1);
    cr_assert_eq(f1, 1);
    cr_assert_eq(f2, 1);
}

Test(scripts_live, base_lifts_a_stale_counter)
{
    mark();
    cmd("HSET " MK " b7 3 nb 1 base 10");
    long long f;
    cr_assert_eq(acquire("s", "L1.0000000000000001", &f), 1);
    cr_assert_eq(f, 11, "a counter below the base reads as the base");
    const char *args[] = {"b7", "5"};
    redisReply *r = lock_script(SCRIPT_RAISE, 0, NULL, 2, args);
    cr_assert_eq(r->integer, 11, "a raise never lowers");
    freeReplyObject(r);
    const char *args2[] = {"b7", "20"};
    r = lock_script(SCRIPT_RAISE, 0, NULL, 2, args2);
    cr_assert_eq(r->integer, 20);
    freeReplyObject(r);
    cr_assert_eq(int_cmd("HGET " MK " b7"), 20);
    const char *args3[] = {"b8", "30"};
    r = lock_script(SCRIPT_RAISE, 0, NULL, 2, args3);
    cr_assert_eq(r->integer, 30);
    freeReplyObject(r);
    cr_assert_eq(int_cmd("HGET " MK " nb"), 2, "a raise that creates a counter counts it");
    r = redisCommand(R, "EVAL %s 2 %s redlock:#expiry", script_source(SCRIPT_PROOF), MK);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    cr_assert_eq(r->element[1]->integer, 30, "the largest counter, for a repair");
    freeReplyObject(r);
}

static void marker(const char *act, const char *run, const char *delay, const char *floor, long long out[3]);

/* SCRIPT_PROOF -> {proven, largest counter, expiry pttl, history, why} */
static void proof(long long o[4], char *why, size_t cap)
{
    redisReply *r = redisCommand(R, "EVAL %s 2 %s redlock:#expiry", script_source(SCRIPT_PROOF), MK);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 5, "%s",
              r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    for (int i = 0; i < 4; i++)
        o[i] = r->element[i]->integer;
    snprintf(why, cap, "%s", r->element[4]->str);
    freeReplyObject(r);
}

/* The repair trusts only what a master proves in the same call (issue 21): a record
 * that is whole, not quarantined, not made anew after a loss, and written under the
 * run id the process has now.  Each refusal below is a way the old SCRIPT_TOP answered
 * a counter that could be behind. */
Test(scripts_live, the_proof_answers_only_for_a_whole_trusted_record_of_this_run)
{
    char info[64], why[64];
    redisReply *r = redisCommand(R, "INFO server");
    const char *p = strstr(r->str, "run_id:");
    cr_assert_not_null(p);
    snprintf(info, sizeof info, "%.40s", p + 7);
    freeReplyObject(r);
    long long o[4];
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 0, "no record: nothing proven");
    cr_assert_str_eq(why, "no record");
    long long mk[3];
    marker("mark", info, "5000", "0", mk);
    cmd("HSET " MK " b5 7 b9 12 nb 2");
    long long f;
    cr_assert_eq(acquire("px", "L1.0000000000000001", &f), 1);
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 1, "whole, trusted, this run: proven (%s)", why);
    cr_assert_eq(o[1], 12);
    cr_assert(o[2] > 9000 && o[2] <= 11000, "the expiry key outlives the lock (ttl 10 s, slack 1 s): %lld",
              o[2]);
    cr_assert_eq(o[3], 1);
    /* Finding 2: a counter deleted by hand. */
    cmd("HDEL " MK " b9");
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 0, "a damaged record proves nothing");
    cr_assert_eq(o[3], 0, "and carries no history");
    cr_assert_str_eq(why, "damaged record");
    cmd("HSET " MK " b9 12");
    /* Finding 1: a record with the quarantine mark. */
    cmd("HSET " MK " q 1");
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 0);
    cr_assert_eq(o[3], 1, "quarantined after a restart that kept its data: history");
    cr_assert_str_eq(why, "quarantined");
    /* Made anew after a loss. */
    cmd("HSET " MK " lost 1");
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 0);
    cr_assert_eq(o[3], 0, "a record made anew has no history");
    cmd("HDEL " MK " q lost");
    /* Written under another run id: the process restarted since it was trusted. */
    cmd("HSET " MK " run 0000000000000000000000000000000000000000");
    proof(o, why, sizeof why);
    cr_assert_eq(o[0], 0);
    cr_assert_str_eq(why, "restarted");
}

/* shorten lowers a quarantine, never raises it, and never cuts that of a restart it
 * finds in the same call; rejoin takes "lost" away with "q". */
Test(scripts_live, shorten_only_lowers_and_a_rejoin_ends_the_loss)
{
    long long o[3];
    cmd("FLUSHALL");
    marker("quarantine", "run1", "60000", "0", o);
    cr_assert_eq(o[0], 2);
    cr_assert_eq(int_cmd("HEXISTS " MK " lost"), 1, "a bare master's new record has no history");
    marker("shorten", "run1", "60000", "500", o);
    cr_assert(o[1] > 0 && o[1] <= 500, "lowered: %lld", o[1]);
    marker("shorten", "run1", "60000", "30000", o);
    cr_assert(o[1] <= 500, "never raised: %lld", o[1]);
    marker("shorten", "run2", "60000", "1", o);
    cr_assert(o[1] > 50000, "a restart found in the same call keeps its full delay: %lld", o[1]);
    cmd("DEL redlock:#quarantine");
    marker("rejoin", "run2", "0", "9", o);
    cr_assert_eq(o[0], 1);
    cr_assert_eq(int_cmd("HEXISTS " MK " lost"), 0);
    cr_assert_eq(int_cmd("HEXISTS " MK " q"), 0);
    cr_assert_eq(int_cmd("HGET " MK " base"), 9);
}

Test(scripts_live, a_retry_adopts_the_key_and_the_first_attempts_cleanup_misses_it)
{
    mark();
    long long f;
    cr_assert_eq(acquire("r", "LEASE.aaaaaaaaaaaaaaaa", &f), 1);
    cr_assert_eq(acquire("r", "LEASE.bbbbbbbbbbbbbbbb", &f), 2, "same lease: an idempotent retry");
    char v[128];
    str_cmd(v, sizeof v, "GET redlock:r");
    cr_assert_str_eq(unstamped(v), "LEASE.bbbbbbbbbbbbbbbb!", "adopted: marked so that no clean-up takes it");
    cr_assert_eq(release("r", "LEASE.aaaaaaaaaaaaaaaa"), 0, "the first attempt's clean-up misses");
    cr_assert_eq(release("r", "LEASE.bbbbbbbbbbbbbbbb"), 0, "and so does the adopter's own");
    cr_assert_eq(int_cmd("EXISTS redlock:r"), 1);
    cr_assert_eq(acquire("r", "OTHER.cccccccccccccccc", &f), 0, "another lease is refused");
    cr_assert_eq(release("r", "LEASE"), 1, "the client's release matches any tag");
    cr_assert_eq(int_cmd("EXISTS redlock:r"), 0);
    cr_assert_eq(acquire("r", "LEASEX.dddddddddddddddd", &f), 1);
    cr_assert_eq(release("r", "LEASE"), 0, "a lease that is a prefix of another is not it");
}

/* A script that ran with a window answers the master time it ran at (the TIME it checked
 * the window with), alone and once for a batch: the service holds it against its clock
 * (docs/DESIGN.md §4, Rule 7). */
Test(scripts_live, a_script_with_a_window_answers_the_time_it_ran_at)
{
    mark();
    long long t0 = int_cmd("EVAL %s 0", "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)");
    char win[64];
    snprintf(win, sizeof win, "%lld:%lld", t0 - 10000, t0 + 10000);
    window = win;
    long long f;
    cr_assert_eq(acquire("tm", "LEASE.aaaaaaaaaaaaaaaa", &f), PROTO_ACQ_GRANTED);
    long long at = last_time;
    long long t1 = int_cmd("EVAL %s 0", "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)");
    cr_assert(at >= t0 && at <= t1, "ran at %lld, between %lld and %lld", at, t0, t1);
    cr_assert_eq(release("tm", "LEASE"), PROTO_REL_DELETED);
    cr_assert_geq(last_time, at);
    last_time = 0;
    cr_assert_eq(release("tm", "LEASE"), PROTO_REL_NOT_OURS, "an integer reply, its time a string in front");
    cr_assert_geq(last_time, at);
    window = "";
    const char *argv[] = {"EVAL", script_source(SCRIPT_BATCH), "4", MK, "redlock:tb", "redlock:#r:tb",
                          "redlock:#w:tb", win, "a", "b3", "T.0000000000000001", "10000",
                          "redlock:#released:tb", "o", "0", "0"};
    redisReply *r = redisCommandArgv(R, 16, argv, NULL);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "%s",
              r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->element[0]->type, REDIS_REPLY_INTEGER);
    cr_assert(r->element[0]->integer >= at && r->element[0]->integer <= t0 + 10000, "the batch's time first");
    cr_assert_eq(r->element[1]->element[0]->integer, PROTO_ACQ_GRANTED);
    freeReplyObject(r);
}

Test(scripts_live, a_batch_checks_the_record_once_and_a_wipe_refuses_it_whole)
{
    mark();
    const char *argv[] = {"EVAL", script_source(SCRIPT_BATCH), "7", MK, "redlock:p",
                          "redlock:#r:p", "redlock:#w:p", "redlock:q", "redlock:#r:q", "redlock:#w:q", "",
                          "a", "b3", "P.0000000000000001", "10000", "redlock:#released:p", "o", "0", "0",
                          "a", "b3", "Q.0000000000000002", "10000", "redlock:#released:q", "o", "0", "0"};
    redisReply *r = redisCommandArgv(R, 27, argv, NULL);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3, "%s",
              r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->element[0]->integer, PROTO_TIME_NONE, "the time first: none without a window");
    cr_assert_eq(r->element[1]->element[1]->integer, 1);
    cr_assert_eq(r->element[2]->element[1]->integer, 2);
    freeReplyObject(r);
    cmd("FLUSHALL");
    r = redisCommandArgv(R, 27, argv, NULL);
    cr_assert(r && refused_as(r, SCRIPT_ERR_UNMARKED));
    freeReplyObject(r);
    cr_assert_eq(int_cmd("DBSIZE"), 0, "a wiped master refuses the whole batch, before any write");
}

static void marker(const char *act, const char *run, const char *delay, const char *floor, long long out[3])
{
    const char *argv[] = {"EVAL", script_source(SCRIPT_MARKER), "2", MK, "redlock:#quarantine",
                          act, run, delay, "inst", floor};
    redisReply *r = redisCommandArgv(R, 10, argv, NULL);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3, "%s",
              r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    for (int i = 0; i < 3; i++)
        out[i] = r->element[i]->integer;
    freeReplyObject(r);
}

Test(scripts_live, the_marker_quarantines_every_restart_and_rejoins_with_the_repaired_base)
{
    long long o[3];
    marker("check", "run1", "5000", "0", o);
    cr_assert_eq(o[0], 0, "no record: unmarked");
    marker("mark", "run1", "5000", "0", o);
    cr_assert_eq(o[0], 1);
    marker("check", "run1", "5000", "0", o);
    cr_assert_eq(o[0], 1, "same run id: ready");
    cr_assert_eq(o[2], 0, "nothing granted yet");
    cmd("HSET " MK " b5 7 nb 1");
    /* The process restarted (another run id): quarantined, the delay from the restart. */
    marker("check", "run2", "3000", "0", o);
    cr_assert_eq(o[0], 2);
    cr_assert(o[1] > 2000 && o[1] <= 3000, "pttl %lld", o[1]);
    cr_assert_eq(o[2], 1, "one counter: something was granted");
    /* Another instance connecting later does not extend it, nor end it. */
    marker("check", "run2", "100", "0", o);
    cr_assert_eq(o[0], 2);
    cr_assert(o[1] > 2000, "kept: %lld", o[1]);
    marker("rejoin", "run2", "100", "50", o);
    cr_assert_eq(o[0], 2, "no rejoin before the delay is over");
    cmd("DEL redlock:#quarantine");
    marker("rejoin", "run2", "0", "50", o);
    cr_assert_eq(o[0], 1, "rejoined");
    cr_assert_eq(int_cmd("HGET " MK " base"), 50);
    cr_assert_eq(int_cmd("HEXISTS " MK " q"), 0);
    marker("check", "run2", "3000", "0", o);
    cr_assert_eq(o[0], 1, "trusted under the new run id");
    /* A wipe, judged as a loss: the record comes back quarantined for the full delay. */
    cmd("FLUSHALL");
    marker("quarantine", "run2", "4000", "0", o);
    cr_assert_eq(o[0], 2);
    cr_assert(o[1] > 3000 && o[1] <= 4000);
    marker("mark", "run2", "4000", "0", o);
    cr_assert_eq(o[0], 2, "mark on a marked master only reports its state");
    /* A damaged record reads as none, and is quarantined as a lost one. */
    cmd("DEL redlock:#quarantine");
    cmd("HDEL " MK " q");
    cmd("HSET " MK " nb 3");
    marker("check", "run2", "4000", "0", o);
    cr_assert_eq(o[0], 0, "fewer fields than it counts: unmarked");
    marker("quarantine", "run2", "4000", "0", o);
    cr_assert_eq(o[0], 2);
}

/* inspect name -> {lease|nil, pttl, F, owner, readers, longest, holds, stored, rest}: the
 * lease into lease, the owner into owner */
static void inspect(const char *name, char *lease, size_t lcap, char *owner, size_t ocap)
{
    char key[128];
    snprintf(key, sizeof key, "redlock:%s", name);
    char readers[128];
    snprintf(readers, sizeof readers, "redlock:#r:%s", name);
    const char *keys[] = {key, readers};
    const char *args[] = {"b7"};
    redisReply *r = lock_script(SCRIPT_INSPECT, 2, keys, 1, args);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 9, "%s",
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    snprintf(lease, lcap, "%s", r->element[0]->type == REDIS_REPLY_STRING ? r->element[0]->str : "");
    cr_assert_eq(r->element[3]->type, REDIS_REPLY_STRING);
    snprintf(owner, ocap, "%s", r->element[3]->str);
    freeReplyObject(r);
}

Test(scripts_live, an_owner_rides_after_the_tag_and_every_rule_still_holds)
{
    mark();
    long long f;
    char v[600], lease[200], owner[300];
    /* A grant with an owner: the lease and the owner, never the tag, come back. */
    cr_assert_eq(acquire("o", "LEASE.aaaaaaaaaaaaaaaa\nhost-1 pid 42. (x)", &f), 1);
    inspect("o", lease, sizeof lease, owner, sizeof owner);
    cr_assert_str_eq(lease, "LEASE");
    cr_assert_str_eq(owner, "host-1 pid 42. (x)", "an owner with '.' is no tag");
    /* Clean-up is exact, owner included: another attempt's value (another tag, or
     * the same tag without the owner) misses it. */
    cr_assert_eq(release("o", "LEASE.aaaaaaaaaaaaaaaa"), 0, "the value without the owner is not it");
    cr_assert_eq(release("o", "LEASE.bbbbbbbbbbbbbbbb\nhost-1 pid 42. (x)"), 0);
    cr_assert_eq(release("o", "LEASE.aaaaaaaaaaaaaaaa\nhost-1 pid 42. (x)"), 1, "its own, whole");
    /* Adoption: the mark goes before the owner, and no clean-up takes the key. */
    cr_assert_eq(acquire("o", "LEASE.aaaaaaaaaaaaaaaa\nfirst", &f), 1);
    cr_assert_eq(acquire("o", "LEASE.bbbbbbbbbbbbbbbb\nsecond", &f), 2, "same lease: adopted");
    str_cmd(v, sizeof v, "GET redlock:o");
    cr_assert_str_eq(unstamped(v), "LEASE.bbbbbbbbbbbbbbbb!\nsecond");
    inspect("o", lease, sizeof lease, owner, sizeof owner);
    cr_assert_str_eq(lease, "LEASE");
    cr_assert_str_eq(owner, "second", "the adopting attempt's owner");
    cr_assert_eq(release("o", "LEASE.aaaaaaaaaaaaaaaa\nfirst"), 0);
    cr_assert_eq(release("o", "LEASE.bbbbbbbbbbbbbbbb\nsecond"), 0, "not even the adopter's own");
    /* Another lease is refused, and told the holder's lease alone. */
    char key[] = "redlock:o";
    const char *keys[] = {key};
    const char *args[] = {"b7", "OTHER.cccccccccccccccc\nthief", "10000"};
    redisReply *r = lock_script(SCRIPT_ACQUIRE, 1, keys, 3, args);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 4 && r->element[0]->integer == 0);
    cr_assert_str_eq(r->element[3]->str, "LEASE", "the holder's lease, not its owner");
    freeReplyObject(r);
    /* Extend and release by the lease alone, whatever the tag and owner. */
    const char *kx[] = {key, "redlock:#set:LEASE"};
    const char *ax[] = {"b7", "LEASE", "20000"};
    r = lock_script(SCRIPT_EXTEND, 2, kx, 3, ax);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    cr_assert_eq(release("o", "LEASE"), 1);
    cr_assert_eq(int_cmd("EXISTS redlock:o"), 0);
    /* A free key: no lease, no owner; a bare lease (a fresh one): no owner. */
    inspect("o", lease, sizeof lease, owner, sizeof owner);
    cr_assert_str_eq(lease, "");
    cr_assert_str_eq(owner, "");
    cr_assert_eq(acquire("o", "FRESHLEASE", &f), 1);
    inspect("o", lease, sizeof lease, owner, sizeof owner);
    cr_assert_str_eq(lease, "FRESHLEASE");
    cr_assert_str_eq(owner, "");
    cr_assert_eq(acquire("o", "FRESHLEASE.dddddddddddddddd\nlater", &f), 2);
    str_cmd(v, sizeof v, "GET redlock:o");
    cr_assert_str_eq(unstamped(v), "FRESHLEASE.dddddddddddddddd!\nlater");
}

Test(scripts_live, a_handoff_writes_the_waiters_own_owner)
{
    mark();
    long long f;
    cr_assert_eq(acquire("h", "OLD.aaaaaaaaaaaaaaaa\nold-owner", &f), 1);
    const char *keys[] = {"redlock:h"};
    const char *args[] = {"b7", "OLD", "NEW.bbbbbbbbbbbbbbbb\nnew-owner", "10000"};
    redisReply *r = lock_script(SCRIPT_HANDOFF, 1, keys, 4, args);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 3, "replaced");
    freeReplyObject(r);
    char v[200];
    str_cmd(v, sizeof v, "GET redlock:h");
    cr_assert_str_eq(unstamped(v), "NEW.bbbbbbbbbbbbbbbb\nnew-owner");
    /* The same through the batch: code h, one key, six arguments. */
    const char *argv[] = {"EVAL", script_source(SCRIPT_BATCH), "7", MK, "redlock:h",
                          "redlock:#r:h", "redlock:#t:h", "redlock:#w:h", "redlock:h", "redlock:#r:h", "",
                          "h", "b7", "NEW", "THIRD.cccccccccccccccc\nthird", "10000",
                          "redlock:#released:h", "o", "i", "b7"};
    redisReply *b = redisCommandArgv(R, 20, argv, NULL);
    cr_assert(b && b->type == REDIS_REPLY_ARRAY && b->elements == 3, "%s",
              b && b->type == REDIS_REPLY_ERROR ? b->str : "");
    cr_assert_eq(b->element[1]->element[0]->integer, 3);
    cr_assert_eq(b->element[2]->elements, 9, "inspect in a batch answers the owner, readers, holds, "
                                             "the stored token and the rest too");
    cr_assert_str_eq(b->element[2]->element[0]->str, "THIRD");
    cr_assert_str_eq(b->element[2]->element[3]->str, "third");
    freeReplyObject(b);
}

Test(scripts_live, force_deletes_whatever_the_value_and_announces_it)
{
    mark();
    long long f;
    cr_assert_eq(acquire("fz", "SOMEONE.aaaaaaaaaaaaaaaa\nhost", &f), 1);
    const char *keys[] = {"redlock:fz"};
    const char *args[] = {"redlock:#released:fz", "origin"};
    redisReply *r = lock_script(SCRIPT_FORCE, 1, keys, 2, args);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->integer, 1);
    freeReplyObject(r);
    cr_assert_eq(int_cmd("EXISTS redlock:fz"), 0);
    r = lock_script(SCRIPT_FORCE, 1, keys, 2, args);
    cr_assert_eq(r->integer, 0, "nothing to break");
    freeReplyObject(r);
    cmd("HSET " MK " q 1");
    r = lock_script(SCRIPT_FORCE, 1, keys, 2, args);
    cr_assert(refused_as(r, SCRIPT_ERR_QUARANTINED), "a quarantined master refuses it too");
    freeReplyObject(r);
}

/* scan with pattern -> the names (sorted by the caller), *more set */
static size_t scan(const char *pattern, const char *limit, const char *calls, char names[][64],
                   size_t cap, long long *more)
{
    const char *args[] = {pattern, "8", limit, calls};
    redisReply *r = lock_script(SCRIPT_SCAN, 0, NULL, 4, args);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements >= 1, "%s",
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    *more = r->element[0]->integer;
    size_t n = 0;
    for (size_t i = 1; i < r->elements && n < cap; i++)
        snprintf(names[n++], 64, "%s", r->element[i]->str);
    freeReplyObject(r);
    return n;
}

Test(scripts_live, scan_lists_lock_names_under_a_prefix_never_the_services_keys)
{
    mark();
    cmd("SET redlock:#quarantine 1");
    cmd("SET redlock:#set:LEASE x");
    long long f, more;
    cr_assert_eq(acquire("jobs/a", "A.aaaaaaaaaaaaaaaa", &f), 1);
    cr_assert_eq(acquire("jobs/b", "B.bbbbbbbbbbbbbbbb", &f), 1);
    cr_assert_eq(acquire("other", "C.cccccccccccccccc", &f), 1);
    cmd("SET unrelated:jobs/x 1");
    char names[16][64];
    size_t n = scan("redlock:[^#]*", "100", "10", names, 16, &more);
    cr_assert_eq(n, 3, "three locks, no '#' key");
    cr_assert_eq(more, 0);
    for (size_t i = 0; i < n; i++)
        cr_assert(names[i][0] != '#', "%s", names[i]);
    n = scan("redlock:jobs/*", "100", "10", names, 16, &more);
    cr_assert_eq(n, 2);
    cr_assert_eq(more, 0);
    cr_assert(strncmp(names[0], "jobs/", 5) == 0 && strncmp(names[1], "jobs/", 5) == 0);
    n = scan("redlock:jobs/*", "1", "10", names, 16, &more);
    cr_assert_eq(n, 1, "at most limit names");
    cr_assert_eq(more, 1, "and it says there were more");
}

/* The next message on a subscriber connection, or "" when none came within 1 s. */
static void next_message(redisContext *sub, char *out, size_t cap)
{
    out[0] = '\0';
    struct timeval tv = {1, 0};
    redisSetTimeout(sub, tv);
    void *rep = NULL;
    if (redisGetReply(sub, &rep) != REDIS_OK || !rep)
        return;
    redisReply *m = rep;
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", m->element[2]->str);
    freeReplyObject(m);
}

/* A grant is announced ("+origin") on the name's channel, so that watchers on other
 * instances learn of it; an adoption and a refusal are not grants and say nothing. */
Test(scripts_live, a_grant_and_a_handoff_are_announced_and_nothing_else)
{
    mark();
    redisContext *sub = redisConnect("127.0.0.1", R_port);
    cr_assert(sub && !sub->err);
    redisReply *ok = redisCommand(sub, "SUBSCRIBE redlock:#released:g");
    freeReplyObject(ok);
    const char *keys[] = {"redlock:g"};
    const char *grant[] = {"b9", "G.0000000000000001", "10000", "redlock:#released:g", "inst1"};
    freeReplyObject(lock_script(SCRIPT_ACQUIRE, 1, keys, 5, grant));
    char m[64];
    next_message(sub, m, sizeof m);
    cr_assert_str_eq(m, "+inst1", "a new grant is announced with its origin");
    freeReplyObject(lock_script(SCRIPT_ACQUIRE, 1, keys, 5, grant)); /* the same lease: adopted */
    const char *other[] = {"b9", "H.0000000000000002", "10000", "redlock:#released:g", "inst2"};
    freeReplyObject(lock_script(SCRIPT_ACQUIRE, 1, keys, 5, other)); /* refused */
    const char *hand[] = {"b9", "G", "W.0000000000000003", "10000", "redlock:#released:g", "inst3"};
    freeReplyObject(lock_script(SCRIPT_HANDOFF, 1, keys, 6, hand));
    next_message(sub, m, sizeof m);
    cr_assert_str_eq(m, "+inst3", "the adoption and the refusal said nothing; the handoff did");
    redisFree(sub);
}

/* acquire of name with its readers' and writers' keys and an intent -> the code */
static long long acquire_intent(const char *name, const char *value, const char *intent)
{
    char key[128], rk[128], wk[128];
    snprintf(key, sizeof key, "redlock:%s", name);
    snprintf(rk, sizeof rk, "redlock:#r:%s", name);
    snprintf(wk, sizeof wk, "redlock:#w:%s", name);
    const char *keys[] = {key, rk, wk};
    const char *args[] = {"b7", value, "10000", "redlock:#released:x", "o", intent, "0"};
    redisReply *r = lock_script(SCRIPT_ACQUIRE, 3, keys, 7, args);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long kind = r->element[0]->integer;
    freeReplyObject(r);
    return kind;
}

/* issue 23: a grant takes back its writer's mark whenever an attempt of the request may
 * have written one (intent > 0, or "-1" once it marked), and pays for no ZREM when none
 * did ("0"); a refusal by a holder marks without reading the readers. */
Test(scripts_live, a_grant_takes_its_writers_mark_back_whenever_the_request_marked)
{
    mark();
    long long f;
    cr_assert_eq(acquire("m", "HOLDER", &f), 1);
    cr_assert_eq(acquire_intent("m", "WRITER", "3000"), 0, "held: refused");
    cr_assert_neq(int_cmd("ZSCORE redlock:#w:m WRITER"), -999, "and marked waiting");
    cr_assert_eq(release("m", "HOLDER"), 1);
    cr_assert_eq(acquire_intent("m", "WRITER", "-1"), 1, "granted once free");
    cr_assert_eq(int_cmd("EXISTS redlock:#w:m"), 0, "its mark went with the grant");
    cr_assert_eq(release("m", "WRITER"), 1);
    cr_assert_eq(acquire_intent("m", "WRITER2", "3000"), 1, "a first attempt granted");
    cr_assert_eq(int_cmd("EXISTS redlock:#w:m"), 0, "marks nothing");
    cr_assert_eq(release("m", "WRITER2"), 1);
    /* a mark of a request that is not this one (an unwant lost): left to its expiry */
    cmd("ZADD redlock:#w:m 99999999999999 OTHER");
    cmd("PEXPIRE redlock:#w:m 3000");
    cr_assert_eq(acquire_intent("m", "WRITER3", "0"), 1);
    cr_assert_neq(int_cmd("ZSCORE redlock:#w:m OTHER"), -999, "a grant touches no other mark");
}

/* R-expiry (docs/DESIGN.md §4): "<prefix>#expiry" outlives every key a script writes; it
 * is lengthened by up to SCRIPTS_SETTLE_SLACK_MS more, so that the next calls only read it */
Test(scripts_live, the_expiry_key_outlives_every_grant_and_is_written_once_for_alike_ttls)
{
    mark();
    long long f;
    cr_assert_eq(acquire("e1", "L1", &f), 1);
    long long p = int_cmd("PTTL redlock:#expiry");
    cr_assert(p > 10000 && p <= 11000, "pttl %lld: the grant's 10 s and at most 1 s more", p);
    cr_assert_eq(int_cmd("PTTL redlock:e1") <= p, 1);
    cmd("PEXPIRE redlock:#expiry 10500");
    cr_assert_eq(acquire("e2", "L2", &f), 1);
    p = int_cmd("PTTL redlock:#expiry");
    cr_assert(p <= 10500 && p > 10000, "long enough already: not written (pttl %lld)", p);
    cmd("PEXPIRE redlock:#expiry 9000");
    cr_assert_eq(acquire("e3", "L3", &f), 1);
    p = int_cmd("PTTL redlock:#expiry");
    cr_assert(p > 10000, "too short: lengthened past the grant (pttl %lld)", p);
}

#define SEM_PFX "redlock:#sem:s#"
#define SEM_REC "redlock:#sem:s"

/* a permit of semaphore "s" of permits at slot, with the retry's look for the lease's
 * slot elsewhere when scan is "1" -> the code; the refusal's holder in h */
static long long sem_acq_of(const char *permits, const char *scan, int slot, const char *value, char *h,
                            size_t cap)
{
    char key[64], idx[16];
    snprintf(key, sizeof key, SEM_PFX "%d", slot);
    snprintf(idx, sizeof idx, "%d", slot);
    const char *keys[] = {key, SEM_REC};
    const char *args[] = {"b7", value, "10000", "redlock:#released:#sem:s", "o", permits, idx, SEM_PFX, scan};
    redisReply *r = lock_script(SCRIPT_SEM_ACQUIRE, 2, keys, 9, args);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long kind = r->element[0]->integer;
    if (h)
        snprintf(h, cap, "%s", kind == 0 && r->elements > 3 ? r->element[3]->str : "");
    freeReplyObject(r);
    return kind;
}

/* a permit of the 4-permit semaphore "s" at slot, a first attempt */
static long long sem_acq(int slot, const char *value, char *h, size_t cap)
{
    return sem_acq_of("4", "0", slot, value, h, cap);
}

static long long sem_rel(const char *who)
{
    const char *keys[] = {SEM_REC};
    const char *args[] = {who, "redlock:#released:#sem:s", "o", SEM_PFX};
    redisReply *r = lock_script(SCRIPT_SEM_RELEASE, 1, keys, 4, args);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : -1;
    freeReplyObject(r);
    return v;
}

/* issue 23: a full semaphore's refusal is answered from the count of its held slots
 * (SEM_HELD), not from a look at every slot; under a record of a build before the
 * count's marker ("4", not "4c": test_semcount.c has the counted one) the record goes
 * with the last permit by a look at the slots themselves, whatever the count says. */
Test(scripts_live, a_full_semaphore_refuses_from_its_count_and_the_record_stays_exact)
{
    mark();
    cmd("SET " SEM_REC " 4 PX 10000");
    char h[64];
    const char *L[] = {"L0", "L1", "L2", "L3"};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sem_acq(i, L[i], NULL, 0), 1);
    cr_assert_eq(int_cmd("ZCARD " SEM_PFX "h"), 4, "four slots held, counted");
    cr_assert(int_cmd("PTTL " SEM_PFX "h") > 9000, "the count lives as long as its slots");
    cr_assert_eq(sem_acq(2, "L9", h, sizeof h), 0);
    cr_assert_str_eq(h, SCRIPTS_HOLDER_FREE, "full: no free slot listed");
    cr_assert_eq(sem_rel("L1"), 1);
    cr_assert_eq(int_cmd("ZCARD " SEM_PFX "h"), 3, "a release leaves the count");
    cr_assert_eq(sem_acq(2, "L9", h, sizeof h), 0);
    cr_assert_str_eq(h, SCRIPTS_HOLDER_FREE "1", "not full: the free slot is found");
    /* an extension moves its slot's expiry in the count */
    const char *keys[] = {SEM_REC};
    const char *ext[] = {"b7", "L0", "20000", SEM_PFX};
    freeReplyObject(lock_script(SCRIPT_SEM_EXTEND, 1, keys, 4, ext));
    cr_assert(int_cmd("PTTL " SEM_PFX "h") > 19000);
    /* a slot the count does not know (written by a build before it) still keeps the
     * record; one it knows that is gone does not */
    cmd("SET " SEM_PFX "1 OLD PX 10000");
    cr_assert_eq(sem_rel("L0"), 1);
    cr_assert_eq(sem_rel("L2"), 1);
    cr_assert_eq(sem_rel("L3"), 1);
    cr_assert_eq(int_cmd("EXISTS " SEM_REC), 1, "slot 1 is held: the record stays");
    cmd("ZADD " SEM_PFX "h 99999999999999 2");
    cr_assert_eq(sem_rel("OLD"), 1);
    cr_assert_eq(int_cmd("EXISTS " SEM_REC), 0, "no slot left: the record goes, a stale count aside");
}

/* A retry (scan "1") looks for a slot its lease holds already, so that one lease never
 * takes two permits: under a counted record ("<N>c") among the count's members only,
 * under a record of a build before the count among all N slots, and nowhere without a
 * record (docs/DESIGN.md section 12). */
static long long sem_scan(int slot, const char *value, char *h, size_t cap)
{
    return sem_acq_of("1024", "1", slot, value, h, cap);
}

static long long gets_since_reset(void)
{
    redisReply *r = redisCommand(R, "INFO commandstats");
    cr_assert_not_null(r);
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_get:calls=") : NULL;
    long long n = p ? strtoll(p + strlen("cmdstat_get:calls="), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

Test(scripts_live, a_retry_looks_for_its_slot_among_the_counted_slots_only)
{
    mark();
    char h[64];
    /* no record: nothing to look at, and the grant makes the record counted */
    cmd("CONFIG RESETSTAT");
    cr_assert_eq(sem_scan(1000, "LR", h, sizeof h), 1, "granted at slot 1000");
    cr_assert(gets_since_reset() < 8, "%lld GETs without a record", gets_since_reset());
    /* the same lease tries slot 3: its slot 1000 is found from the count */
    cmd("CONFIG RESETSTAT");
    cr_assert_eq(sem_scan(3, "LR", h, sizeof h), 0);
    cr_assert_str_eq(h, SCRIPTS_HOLDER_MINE "1000");
    long long g = gets_since_reset();
    cr_assert(g < 8, "%lld GETs: the count's one member, not 1,000 slots", g);
    /* a record of a build before the count: every slot is looked at */
    cmd("DEL " SEM_REC " " SEM_PFX "h " SEM_PFX "1000");
    cmd("SET " SEM_REC " 1024 PX 10000");
    cmd("SET " SEM_PFX "900 LR PX 10000");
    cmd("CONFIG RESETSTAT");
    cr_assert_eq(sem_scan(3, "LR", h, sizeof h), 0);
    cr_assert_str_eq(h, SCRIPTS_HOLDER_MINE "900", "found without a member");
    cr_assert(gets_since_reset() > 900, "every slot up to 900 read");
}
