/* clockshim.c -- an LD_PRELOAD library that moves a process's wall clock: it adds an
 * offset to CLOCK_REALTIME and can make it run fast or slow, as a bad NTP step, a VM
 * restored from a snapshot, `date -s` or a drifting oscillator would.  Meant for
 * redis-server, whose key expiry and TIME read the wall clock (gettimeofday).
 *
 * Interface (see tests/clock/README.md and clockshim.h):
 *   CLOCKSHIM_FILE=/path/to/file LD_PRELOAD=/path/to/clockshim.so redis-server ...
 * The file holds up to three integers, separated by white space:
 *   OFFSET_MS [RATE_PPM [ANCHOR_MS]]
 * and the process's wall clock reads
 *   real + OFFSET_MS + (real - ANCHOR_MS) * (RATE_PPM - 1000000) / 1000000   (real >= ANCHOR_MS)
 *   real + OFFSET_MS                                                         (real <  ANCHOR_MS)
 * where real is the true CLOCK_REALTIME in ms (finer in practice: everything is computed
 * in ns).  RATE_PPM defaults to 1000000 (the true rate), ANCHOR_MS to 0.  A missing,
 * unreadable or malformed file, or no CLOCKSHIM_FILE, means the true clock.  The file is
 * read again at most every CLOCKSHIM_REREAD_MS (10) of true time, so a change takes
 * effect within that.  Monotonic clocks (CLOCK_MONOTONIC, _RAW, _COARSE, BOOTTIME) and
 * CPU-time clocks are passed through untouched: a step moves only the wall clock, as on a
 * real machine, and Redis's own timers run on the monotonic one.
 *
 * Why not libfaketime: it resolves the real functions with dlsym() from inside the first
 * clock call, which redis-server's jemalloc makes during its own initialisation, before
 * dlsym can allocate: the process hangs or crashes at start-up.  This library calls the
 * kernel with raw syscalls (clock_gettime, openat, read, close), allocates nothing,
 * resolves nothing, and keeps its state in a few atomics. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CLOCKSHIM_REREAD_MS 10
#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

#define EXPORT __attribute__((visibility("default")))

/* The parameters in force, published with a sequence count (odd while being written) so
 * that readers on any thread see one consistent set without a lock. */
static _Atomic uint64_t seq;
static _Atomic int64_t p_offset_ns, p_rate_ppm, p_anchor_ns;
static _Atomic int64_t next_read_ns; /* true realtime at which the file is read again */
static atomic_flag reading = ATOMIC_FLAG_INIT;
static char path[4096];
static atomic_int have_path = -1; /* -1: not looked up yet; path is written before it */

static long raw_clock_gettime(clockid_t id, struct timespec *ts)
{
    return syscall(SYS_clock_gettime, id, ts);
}

static int64_t ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec;
}

/* Parses up to three signed decimal integers from buf; returns how many. */
static int parse_ints(const char *buf, long n, int64_t out[3])
{
    int k = 0;
    long i = 0;
    while (k < 3) {
        while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
            i++;
        if (i >= n)
            break;
        int neg = 0;
        if (buf[i] == '-' || buf[i] == '+') {
            neg = buf[i] == '-';
            i++;
        }
        if (i >= n || buf[i] < '0' || buf[i] > '9')
            return -1;
        int64_t v = 0;
        while (i < n && buf[i] >= '0' && buf[i] <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (buf[i] - '0');
            i++;
        }
        if (i < n && !(buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
            return -1;
        out[k++] = neg ? -v : v;
    }
    return k;
}

static void publish(int64_t off_ns, int64_t rate_ppm, int64_t anchor_ns)
{
    atomic_fetch_add(&seq, 1);
    atomic_store(&p_offset_ns, off_ns);
    atomic_store(&p_rate_ppm, rate_ppm);
    atomic_store(&p_anchor_ns, anchor_ns);
    atomic_fetch_add(&seq, 1);
}

static void read_file(void)
{
    int64_t v[3] = {0, 1000000, 0};
    char buf[256];
    long n = -1;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = syscall(SYS_read, fd, buf, sizeof buf);
        syscall(SYS_close, fd);
    }
    int k = n > 0 ? parse_ints(buf, n, v) : -1;
    /* a malformed file, or a rate that is not positive: the true clock */
    if (k < 1 || v[1] <= 0 || v[0] > INT64_MAX / NS_PER_MS || v[0] < INT64_MIN / NS_PER_MS ||
        v[2] > INT64_MAX / NS_PER_MS || v[2] < 0) {
        v[0] = 0;
        v[1] = 1000000;
        v[2] = 0;
    }
    publish(v[0] * NS_PER_MS, v[1], v[2] * NS_PER_MS);
}

/* The shifted wall clock at true realtime real_ns. */
static void find_path(void)
{
    const char *p = getenv("CLOCKSHIM_FILE");
    size_t len = p ? strlen(p) : 0;
    if (len > 0 && len < sizeof path)
        memcpy(path, p, len + 1);
    atomic_store(&have_path, len > 0 && len < sizeof path);
}

/* At load, before the program runs; a clock read before that (another library's
 * constructor) looks the path up itself, from the same environment. */
__attribute__((constructor)) static void clockshim_init(void)
{
    if (atomic_load(&have_path) < 0)
        find_path();
}

static int64_t shifted(int64_t real_ns)
{
    if (atomic_load(&have_path) < 0)
        find_path();
    if (!atomic_load(&have_path))
        return real_ns;
    int64_t due = atomic_load(&next_read_ns);
    if ((real_ns >= due || real_ns < due - 2 * CLOCKSHIM_REREAD_MS * NS_PER_MS) &&
        !atomic_flag_test_and_set(&reading)) {
        read_file();
        atomic_store(&next_read_ns, real_ns + CLOCKSHIM_REREAD_MS * NS_PER_MS);
        atomic_flag_clear(&reading);
    }
    int64_t off, rate, anchor;
    uint64_t s0, s1;
    do {
        s0 = atomic_load(&seq);
        off = atomic_load(&p_offset_ns);
        rate = atomic_load(&p_rate_ppm);
        anchor = atomic_load(&p_anchor_ns);
        s1 = atomic_load(&seq);
    } while (s0 != s1 || (s0 & 1));
    if (rate == 0) /* nothing read yet (another thread is reading it): the true clock */
        return real_ns;
    int64_t t = real_ns + off;
    if (real_ns > anchor && rate != 1000000)
        t += (int64_t)((__int128)(real_ns - anchor) * (rate - 1000000) / 1000000);
    return t;
}

static int is_wall(clockid_t id)
{
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE
#ifdef CLOCK_TAI
           || id == CLOCK_TAI
#endif
        ;
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts)
{
    long rc = raw_clock_gettime(id, ts);
    if (rc != 0 || !is_wall(id))
        return (int)rc;
    int64_t t = shifted(ts_ns(ts));
    int64_t sec = t / NS_PER_S, nsec = t % NS_PER_S;
    if (nsec < 0) {
        nsec += NS_PER_S;
        sec--;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)nsec;
    return 0;
}

/* glibc declares tv nonnull; callers may still pass NULL, as the kernel allows */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    if (tz)
        memset(tz, 0, 2 * sizeof(int)); /* struct timezone: obsolete, zeroes as glibc gives */
    return 0;
}

EXPORT time_t time(time_t *out)
{
    struct timespec ts;
    time_t t = clock_gettime(CLOCK_REALTIME, &ts) == 0 ? ts.tv_sec : (time_t)-1;
    if (out)
        *out = t;
    return t;
}

EXPORT int timespec_get(struct timespec *ts, int base)
{
    return base == TIME_UTC && clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}
