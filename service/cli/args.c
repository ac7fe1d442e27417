/* args.c -- the redlock client's command line and environment (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest --grace. */
#define CLI_GRACE_MAX (24L * 3600L * 1000L)

static const char usage_text[] =
    "usage: redlock run NAME [--shared] [--ttl MS] [--wait MS] [--grace MS]\n"
    "                        [--max-hold MS] -- CMD [ARGS...]\n"
    "       redlock elect NAME [--owner ID] [--ttl MS] [--grace MS] [--max-hold MS]\n"
    "                          -- CMD [ARGS...]\n"
    "       redlock acquire NAME [--shared | --reentrant] [--ttl MS] [--wait MS]\n"
    "                            [--lease L] [--quiet]\n"
    "       redlock release NAME --lease L [--quiet]\n"
    "       redlock extend  NAME --lease L [--ttl MS] [--quiet]\n"
    "       redlock status  NAME [--quiet]\n"
    "       redlock watch   NAME\n"
    "       redlock sem run NAME --permits N [--ttl MS] [--wait MS] [--grace MS]\n"
    "                            -- CMD [ARGS...]\n"
    "       redlock sem acquire NAME --permits N [--ttl MS] [--wait MS] [--lease L]\n"
    "                                [--quiet]\n"
    "       redlock sem release NAME --lease L [--quiet]\n"
    "       redlock sem extend  NAME --lease L [--ttl MS] [--quiet]\n"
    "       redlock sem status  NAME [--quiet]\n"
    "       redlock --help | --version\n"
    "  (each also takes --url, --token, --cacert; acquire and run also -E N)\n"
    "\n"
    "A client for redlockd, the Redlock lock service: a distributed flock.\n"
    "\n"
    "  run       take the lock, run CMD with REDLOCK_FENCING_TOKEN and REDLOCK_LEASE in\n"
    "            its environment, extend the lease every ttl/3 while CMD runs, release it\n"
    "            when CMD exits and exit with CMD's status (128+N if killed by signal N).\n"
    "            If the lock is lost (the lease is gone, or its validity ran out with no\n"
    "            successful extension) CMD gets SIGTERM, then SIGKILL after the grace\n"
    "            period, and redlock exits 75, releasing the lease if the service still\n"
    "            has it.  SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to CMD.\n"
    "            CMD never outlives the lock: a guard process stops it a tenth of the ttl\n"
    "            (10 ms..1 s) before the validity ends even if redlock is held up, and\n"
    "            when redlock dies (SIGKILL included); redlock releases the lock only\n"
    "            once CMD has ended.\n"
    "  elect     leader election: campaign for the lock (wait for it as long as it takes,\n"
    "            held with hold=stream: the service keeps it while redlock is connected),\n"
    "            then run CMD as the leader with REDLOCK_FENCING_TOKEN and REDLOCK_LEASE.\n"
    "            If leadership is lost (the service says lost, the stream or connection\n"
    "            ends, or its validity runs out with nothing to renew it) CMD gets\n"
    "            SIGTERM, then SIGKILL after the grace period, and redlock exits 75.\n"
    "            When CMD exits the lock is released and redlock exits with CMD's status.\n"
    "            Signals are forwarded to CMD and CMD is guarded as for run; if redlock\n"
    "            is killed, CMD is stopped before the lock is let go.  Validity comes\n"
    "            from pings counted from their send (a duplex hold), or from extensions\n"
    "            with a service that predates duplex holds.\n"
    "  acquire   take the lock and print the server's JSON (it holds the lease)\n"
    "  release   give the lock back\n"
    "  extend    extend the lease's validity\n"
    "  status    print whether the lock is held (never the lease)\n"
    "  watch     print the lock's state (held, owner, fencing_token, validity_ms) as one\n"
    "            JSON line now and one more at every change, until interrupted\n"
    "  sem       the same verbs for a counting semaphore of N permits (/semaphores/NAME):\n"
    "            at most N holders at once, each with a lease and a fencing token;\n"
    "            sem run also puts the permit's slot (0..N-1) in REDLOCK_SLOT\n"
    "\n"
    "options:\n"
    "  --url URL       service URL (env REDLOCK_URL, default " CLI_DEFAULT_URL ")\n"
    "  --token TOKEN   send Authorization: Bearer TOKEN (env REDLOCK_TOKEN, better:\n"
    "                  arguments are visible to other users in ps)\n"
    "  --cacert FILE   CA certificates (PEM) to verify an https:// service with\n"
    "                  (env CURL_CA_BUNDLE, then SSL_CERT_FILE; default: the system's)\n"
    "  --ttl MS        lease time to live in ms, 1..2592000000 (default: the server's,\n"
    "                  whose --max-ttl-ms, 3600000 unless configured, is the real limit)\n"
    "  --wait MS       wait up to MS for a held lock, 0..86400000 (default 0: fail at\n"
    "                  once; the server's --max-wait-ms, 60000 unless configured, applies)\n"
    "  -E, --conflict-exit-code N\n"
    "                  acquire, run: exit N (0..255) when the lock is held by someone\n"
    "                  else, after --wait if given (default 75, as for an unreachable\n"
    "                  service or no quorum: give another N to tell them apart)\n"
    "  --lease L       the lease (env REDLOCK_LEASE; '-' reads it from stdin)\n"
    "  --owner ID      acquire, run, elect: who holds it (1..256 printable characters),\n"
    "                  shown by the service to others; never secret\n"
    "  --shared        acquire, run: a shared (read) hold: any number of shared holders\n"
    "                  at once, or one exclusive holder (the default)\n"
    "  --reentrant     acquire: if the lease (--lease, else REDLOCK_LEASE) holds the lock,\n"
    "                  count one more hold instead of retrying; each release takes one\n"
    "                  back and the lock is free at zero\n"
    "  --permits N     sem acquire, sem run: the semaphore's number of permits; every\n"
    "                  holder of NAME must give the same N (the other sem verbs accept\n"
    "                  it and do not need it)\n"
    "  --grace MS      run, elect: SIGTERM -> SIGKILL grace after the lock is lost\n"
    "                  (default 5000)\n"
    "  --max-hold MS   run, elect: hold the lock at most MS in all (at least the ttl):\n"
    "                  the service extends it no further, and CMD is stopped as when the\n"
    "                  lock is lost (exit 75) once the last validity has run out\n"
    "  -q, --quiet     do not print the JSON (elect: the line saying it leads)\n"
    "  -h, --help      this text;  -V, --version  the version\n"
    "\n"
    "exit status: 0 success (run, elect: CMD's status); 75 lock held (or the\n"
    "--conflict-exit-code), quorum unavailable, service unreachable or (run, elect) lock\n"
    "lost; 1 other errors; 2 usage errors.\n";

const char *cli_usage(void) { return usage_text; }

void cli_opts_init(cli_opts *o, cli_getenv_fn getenv_fn)
{
    const char *v;

    memset(o, 0, sizeof(*o));
    o->cmd = CLI_CMD_NONE;
    o->url = CLI_DEFAULT_URL;
    o->ttl_ms = -1;
    o->wait_ms = -1;
    o->grace_ms = CLI_DEFAULT_GRACE_MS;
    o->conflict_exit = CLI_EXIT_TEMPFAIL;
    if (getenv_fn == NULL)
        return;
    if ((v = getenv_fn("REDLOCK_URL")) != NULL && v[0] != '\0')
        o->url = v;
    if ((v = getenv_fn("REDLOCK_TOKEN")) != NULL && v[0] != '\0')
        o->token = v;
    if ((v = getenv_fn("REDLOCK_LEASE")) != NULL && v[0] != '\0')
        o->env_lease = v;
    /* As curl(1): CURL_CA_BUNDLE first, then OpenSSL's SSL_CERT_FILE. */
    if ((v = getenv_fn("CURL_CA_BUNDLE")) != NULL && v[0] != '\0')
        o->cacert = v;
    else if ((v = getenv_fn("SSL_CERT_FILE")) != NULL && v[0] != '\0')
        o->cacert = v;
}

int cli_parse_ms(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v;

    if (s == NULL || s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static cli_cmd command_of(const char *s)
{
    static const struct {
        const char *word;
        cli_cmd cmd;
    } table[] = {
        {"run", CLI_CMD_RUN},         {"elect", CLI_CMD_ELECT},
        {"acquire", CLI_CMD_ACQUIRE},
        {"release", CLI_CMD_RELEASE}, {"extend", CLI_CMD_EXTEND},
        {"status", CLI_CMD_STATUS},   {"watch", CLI_CMD_WATCH},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(s, table[i].word) == 0)
            return table[i].cmd;
    return CLI_CMD_NONE;
}

/* The options that take a value. */
enum {
    OPT_URL, OPT_TOKEN, OPT_TTL, OPT_WAIT, OPT_LEASE, OPT_GRACE, OPT_OWNER, OPT_PERMITS,
    OPT_CACERT, OPT_CONFLICT, OPT_MAX_HOLD, OPT__COUNT
};

static const char *const value_opts[OPT__COUNT] = {
    [OPT_URL] = "url",     [OPT_TOKEN] = "token", [OPT_TTL] = "ttl",
    [OPT_WAIT] = "wait",   [OPT_LEASE] = "lease", [OPT_GRACE] = "grace",
    [OPT_OWNER] = "owner", [OPT_PERMITS] = "permits", [OPT_CACERT] = "cacert",
    [OPT_CONFLICT] = "conflict-exit-code", [OPT_MAX_HOLD] = "max-hold",
};

/* A count of milliseconds for --NAME in [min, max], or -1 with a message that says
 * which limit a number broke. */
static int parse_ms_opt(const char *flag, const char *val, long min, long max, const char *limit,
                        long *out, char *err, size_t errlen)
{
    long v;
    if (cli_parse_ms(val, min, max, out) == 0)
        return 0;
    if (cli_parse_ms(val, 0, LONG_MAX, &v) != 0)
        snprintf(err, errlen, "--%s: '%s' is not a whole number of milliseconds", flag, val);
    else if (v < min)
        snprintf(err, errlen, "--%s: %s is below %ld", flag, val, min);
    else
        snprintf(err, errlen, "--%s: %s ms is above %ld%s", flag, val, max, limit);
    return -1;
}

/* Match "--name" or "--name=value" against the value options.  Returns the index and
 * sets *inline_value (NULL for the "--name value" form), or -1 if not one of them. */
static int match_value_opt(const char *arg, const char **inline_value)
{
    const char *p = arg + 2;
    size_t n = strcspn(p, "=");

    for (int i = 0; i < OPT__COUNT; i++) {
        if (strlen(value_opts[i]) == n && strncmp(p, value_opts[i], n) == 0) {
            *inline_value = p[n] == '=' ? p + n + 1 : NULL;
            return i;
        }
    }
    return -1;
}

static int set_value_opt(cli_opts *o, int opt, const char *val, char *err, size_t errlen)
{
    switch (opt) {
    case OPT_URL:
        if (val[0] == '\0') {
            snprintf(err, errlen, "--url must not be empty");
            return -1;
        }
        o->url = val;
        return 0;
    case OPT_TOKEN:
        o->token = val[0] != '\0' ? val : NULL;
        return 0;
    case OPT_TTL:
        return parse_ms_opt("ttl", val, 1, CLI_TTL_MAX,
                            " (30 days), the largest ttl any redlockd accepts; the service's "
                            "own limit is its --max-ttl-ms (3600000 unless configured)",
                            &o->ttl_ms, err, errlen);
    case OPT_WAIT:
        return parse_ms_opt("wait", val, 0, CLI_WAIT_MAX,
                            " (24 h), the largest wait any redlockd accepts; the service's "
                            "own limit is its --max-wait-ms (60000 unless configured)",
                            &o->wait_ms, err, errlen);
    case OPT_GRACE:
        return parse_ms_opt("grace", val, 0, CLI_GRACE_MAX, " (24 h)", &o->grace_ms, err,
                            errlen);
    case OPT_MAX_HOLD:
        return parse_ms_opt("max-hold", val, 1, CLI_MAX_HOLD_MAX, " (366 days)", &o->max_hold_ms,
                            err, errlen);
    case OPT_CACERT:
        if (val[0] == '\0') {
            snprintf(err, errlen, "--cacert must not be empty");
            return -1;
        }
        o->cacert = val;
        return 0;
    case OPT_CONFLICT: {
        long n;
        if (cli_parse_ms(val, 0, 255, &n) != 0) {
            snprintf(err, errlen, "--conflict-exit-code: '%s' is not an exit code 0..255", val);
            return -1;
        }
        o->conflict_exit = (int)n;
        return 0;
    }
    case OPT_OWNER: {
        size_t n = strlen(val);
        int printable = n >= 1 && n <= CLI_OWNER_MAX;
        for (size_t k = 0; printable && k < n; k++)
            printable = (unsigned char)val[k] >= 0x20 && (unsigned char)val[k] <= 0x7e;
        if (!printable) {
            snprintf(err, errlen, "--owner must be 1..%d printable ASCII characters",
                     CLI_OWNER_MAX);
            return -1;
        }
        o->owner = val;
        return 0;
    }
    case OPT_PERMITS:
        if (cli_parse_ms(val, 1, CLI_PERMITS_MAX, &o->permits) != 0) {
            snprintf(err, errlen, "--permits: '%s' is not a number of permits >= 1", val);
            return -1;
        }
        return 0;
    case OPT_LEASE:
        /* Never echo a lease in a message: it is the credential for the lock. */
        if (strcmp(val, "-") == 0) {
            o->lease = NULL;
            o->lease_from_stdin = 1;
            return 0;
        }
        if (val[0] == '\0' || strlen(val) > CLI_LEASE_MAX) {
            snprintf(err, errlen, "--lease must be 1..%d characters", CLI_LEASE_MAX);
            return -1;
        }
        o->lease = val;
        o->lease_from_stdin = 0;
        return 0;
    default:
        snprintf(err, errlen, "internal error: unknown option %d", opt);
        return -1;
    }
}

/* The options of one kind of primitive: --permits for the sem verbs (required by those
 * that acquire), --shared and --reentrant for the lock verbs that acquire.  Returns 0, or
 * -1 with a message in err. */
static int check_kind_options(const cli_opts *o, char *err, size_t errlen)
{
    int acquires = o->cmd == CLI_CMD_ACQUIRE || o->cmd == CLI_CMD_RUN;

    if (o->sem && !acquires && o->cmd != CLI_CMD_RELEASE && o->cmd != CLI_CMD_EXTEND &&
        o->cmd != CLI_CMD_STATUS) {
        snprintf(err, errlen, "sem: the verbs are acquire, release, extend, status and run");
        return -1;
    }
    if (o->permits > 0 && !o->sem) {
        snprintf(err, errlen, "--permits is for the sem verbs (redlock sem acquire NAME "
                 "--permits N)");
        return -1;
    }
    if (o->sem && acquires && o->permits <= 0) {
        snprintf(err, errlen, "sem %s needs --permits N", o->cmd == CLI_CMD_RUN ? "run"
                                                                               : "acquire");
        return -1;
    }
    if (o->shared && (o->sem || !acquires)) {
        snprintf(err, errlen, "--shared is for acquire and run (of a lock)");
        return -1;
    }
    if (o->reentrant && (o->sem || o->cmd != CLI_CMD_ACQUIRE)) {
        snprintf(err, errlen, "--reentrant is for acquire (of a lock)");
        return -1;
    }
    if (o->reentrant && o->shared) {
        snprintf(err, errlen, "--reentrant and --shared do not go together: a reentrant "
                 "hold is an exclusive one");
        return -1;
    }
    return 0;
}

int cli_opts_parse(cli_opts *o, int argc, char **argv, char *err, size_t errlen)
{
    int i;
    int positional = 0; /* 0: expecting the command, 1: NAME, 2: done */
    int want_help = 0, want_version = 0;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] == '-' && a[1] == '-' && a[2] != '\0') {
            const char *val = NULL;
            int opt = match_value_opt(a, &val);

            if (opt >= 0) {
                if (val == NULL) {
                    if (i + 1 >= argc) {
                        snprintf(err, errlen, "%s needs a value", a);
                        return -1;
                    }
                    val = argv[++i];
                }
                if (set_value_opt(o, opt, val, err, errlen) != 0)
                    return -1;
            } else if (strcmp(a, "--quiet") == 0) {
                o->quiet = 1;
            } else if (strcmp(a, "--shared") == 0) {
                o->shared = 1;
            } else if (strcmp(a, "--reentrant") == 0) {
                o->reentrant = 1;
            } else if (strcmp(a, "--help") == 0) {
                want_help = 1;
            } else if (strcmp(a, "--version") == 0) {
                want_version = 1;
            } else {
                snprintf(err, errlen, "unknown option '%s'", a);
                return -1;
            }
            continue;
        }
        if (a[0] == '-' && a[1] != '\0') {
            /* Short flags, possibly grouped: -q, -h, -V; -E N (or -EN) ends a group. */
            for (const char *p = a + 1; *p != '\0'; p++) {
                if (*p == 'E') {
                    const char *val = p[1] != '\0' ? p + 1 : NULL;
                    if (val == NULL) {
                        if (i + 1 >= argc) {
                            snprintf(err, errlen, "-E needs a value");
                            return -1;
                        }
                        val = argv[++i];
                    }
                    if (set_value_opt(o, OPT_CONFLICT, val, err, errlen) != 0)
                        return -1;
                    break;
                } else if (*p == 'q') {
                    o->quiet = 1;
                } else if (*p == 'h') {
                    want_help = 1;
                } else if (*p == 'V') {
                    want_version = 1;
                } else {
                    snprintf(err, errlen, "unknown option '-%c'", *p);
                    return -1;
                }
            }
            continue;
        }
        if (positional == 0 && !o->sem && strcmp(a, "sem") == 0) {
            o->sem = 1; /* the verb comes next */
        } else if (positional == 0) {
            o->cmd = command_of(a);
            if (o->cmd == CLI_CMD_NONE && !want_help && !want_version) {
                snprintf(err, errlen, "unknown %s '%s'", o->sem ? "sem verb" : "command", a);
                return -1;
            }
            positional = 1;
        } else if (positional == 1) {
            o->name = a;
            positional = 2;
        } else if (o->cmd == CLI_CMD_RUN || o->cmd == CLI_CMD_ELECT) {
            break; /* CMD starts here, as in `flock FILE CMD` */
        } else {
            snprintf(err, errlen, "unexpected argument '%s'", a);
            return -1;
        }
    }

    if (want_help) {
        o->cmd = CLI_CMD_HELP;
        return 0;
    }
    if (want_version) {
        o->cmd = CLI_CMD_VERSION;
        return 0;
    }
    if (o->cmd == CLI_CMD_NONE) {
        snprintf(err, errlen, o->sem ? "sem: no verb given (acquire, release, extend, "
                 "status or run)" : "no command given");
        return -1;
    }
    if (o->name == NULL || o->name[0] == '\0') {
        snprintf(err, errlen, "no %s NAME given", o->sem ? "semaphore" : "lock");
        return -1;
    }
    if (check_kind_options(o, err, errlen) != 0)
        return -1;
    if (o->owner != NULL && o->cmd != CLI_CMD_ACQUIRE && o->cmd != CLI_CMD_RUN &&
        o->cmd != CLI_CMD_ELECT) {
        snprintf(err, errlen, "--owner is for acquire, run and elect");
        return -1;
    }
    if (o->conflict_exit != CLI_EXIT_TEMPFAIL && o->cmd != CLI_CMD_ACQUIRE &&
        o->cmd != CLI_CMD_RUN) {
        snprintf(err, errlen, "--conflict-exit-code is for acquire and run");
        return -1;
    }
    if (o->max_hold_ms > 0 && (o->sem || o->shared ||
                               (o->cmd != CLI_CMD_RUN && o->cmd != CLI_CMD_ELECT))) {
        snprintf(err, errlen, "--max-hold is for run and elect (of an exclusive lock)");
        return -1;
    }
    if (o->max_hold_ms > 0 && o->ttl_ms > 0 && o->max_hold_ms < o->ttl_ms) {
        snprintf(err, errlen, "--max-hold %ld is below --ttl %ld: a hold lasts at least its ttl",
                 o->max_hold_ms, o->ttl_ms);
        return -1;
    }
    if (o->cmd == CLI_CMD_ELECT && (o->wait_ms >= 0 || o->lease != NULL ||
                                    o->lease_from_stdin)) {
        snprintf(err, errlen, "elect: --wait and --lease do not apply (elect waits for "
                 "as long as it takes, with a lease of the service's)");
        return -1;
    }
    if (o->cmd == CLI_CMD_RUN || o->cmd == CLI_CMD_ELECT) {
        if (i >= argc) {
            snprintf(err, errlen, "%s: no command given after NAME",
                     o->cmd == CLI_CMD_ELECT ? "elect" : o->sem ? "sem run" : "run");
            return -1;
        }
        o->argv = argv + i;
        o->argc = argc - i;
        return 0;
    }
    if (i < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[i]);
        return -1;
    }
    if ((o->cmd == CLI_CMD_RELEASE || o->cmd == CLI_CMD_EXTEND || o->reentrant) &&
        o->lease == NULL && !o->lease_from_stdin)
        o->lease = o->env_lease;
    if ((o->cmd == CLI_CMD_RELEASE || o->cmd == CLI_CMD_EXTEND) && o->lease == NULL &&
        !o->lease_from_stdin) {
        snprintf(err, errlen, "%s%s needs --lease (or REDLOCK_LEASE)", o->sem ? "sem " : "",
                 o->cmd == CLI_CMD_RELEASE ? "release" : "extend");
        return -1;
    }
    return 0;
}
