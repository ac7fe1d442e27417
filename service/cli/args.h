/* args.h -- the redlock client's options: one struct, defaults in one place, the
 * environment (REDLOCK_URL, REDLOCK_TOKEN, REDLOCK_LEASE) overriding the defaults and
 * the command line overriding both.  Pure: no I/O beyond what the caller passes in. */
#ifndef RLC_ARGS_H
#define RLC_ARGS_H

#include <stddef.h>

#define CLI_DEFAULT_URL "http://127.0.0.1:8080"
#define CLI_DEFAULT_GRACE_MS 5000L
#define CLI_LEASE_MAX 128
#define CLI_OWNER_MAX 256
/* The largest --permits accepted on the command line; the service applies its own bound
 * (1024), answering 400 invalid_permits above it. */
#define CLI_PERMITS_MAX 1000000L

/* The largest --ttl: the largest --max-ttl-ms a redlockd accepts (30 days); and --wait:
 * the largest --max-wait-ms (24 h).  The service's own limits (by default 3600000 and
 * 60000) are usually smaller; it answers 400 naming them. */
#define CLI_TTL_MAX (30L * 24L * 3600L * 1000L)
#define CLI_WAIT_MAX (24L * 3600L * 1000L)
/* The largest --max-hold: the largest max_hold_ms a redlockd accepts (366 days). */
#define CLI_MAX_HOLD_MAX (366L * 24L * 3600L * 1000L)

/* Exit codes shared by every command (sysexits.h names where one exists). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILURE = 1,  /* the server refused the request (4xx/5xx other than below) */
    CLI_EXIT_USAGE = 2,    /* bad command line */
    CLI_EXIT_TEMPFAIL = 75 /* EX_TEMPFAIL: lock held (unless --conflict-exit-code), quorum
                            * unavailable, service unreachable, or (run, elect) the lock
                            * was lost while CMD ran */
};

typedef enum {
    CLI_CMD_NONE = 0,
    CLI_CMD_RUN,
    CLI_CMD_ELECT,
    CLI_CMD_ACQUIRE,
    CLI_CMD_RELEASE,
    CLI_CMD_EXTEND,
    CLI_CMD_STATUS,
    CLI_CMD_WATCH,
    CLI_CMD_HELP,    /* --help was given: print the usage on stdout, exit 0 */
    CLI_CMD_VERSION, /* --version was given */
} cli_cmd;

typedef struct cli_opts {
    cli_cmd cmd;
    const char *name;       /* lock name (borrowed from argv) */
    const char *url;        /* service base URL (borrowed from argv or the environment) */
    const char *token;      /* bearer token or NULL */
    const char *lease;      /* release/extend/acquire: the lease, NULL if none */
    const char *owner;      /* acquire/run/elect: "owner" sent with the POST, NULL if none */
    const char *env_lease;  /* REDLOCK_LEASE: used by release/extend (and acquire
                             * --reentrant) only, so that a plain `acquire` inside
                             * `redlock run` never reuses it */
    int lease_from_stdin;   /* --lease -: read the lease from standard input */
    int sem;                /* `redlock sem VERB`: cmd is the verb, on /semaphores/NAME */
    long permits;           /* sem acquire/run: --permits N; 0 when not given */
    int shared;             /* acquire/run --shared: "mode": "shared" */
    int reentrant;          /* acquire --reentrant: "reentrant": true, with the lease of
                             * --lease or else REDLOCK_LEASE */
    long ttl_ms;            /* -1: let the server choose */
    long wait_ms;           /* -1: not given (the server's default, 0) */
    long grace_ms;          /* run, elect: SIGTERM -> SIGKILL grace */
    long max_hold_ms;       /* run, elect: --max-hold: "max_hold_ms" of the grant (the
                             * service extends the lock no further: CMD is stopped
                             * then); 0 when not given */
    int quiet;              /* do not print the JSON on stdout */
    int conflict_exit;      /* acquire, run: exit code when the lock is held by someone else
                             * (HTTP 409), like flock's -E; default CLI_EXIT_TEMPFAIL */
    const char *cacert;     /* CA bundle (PEM) to verify an https:// service with: --cacert,
                             * else CURL_CA_BUNDLE, else SSL_CERT_FILE; NULL: libcurl's */
    char **argv;            /* run, elect: CMD and its arguments, NULL-terminated
                             * (borrowed) */
    int argc;               /* run, elect: number of words in argv */
} cli_opts;

/* Environment lookup, getenv() in production, a table in tests. */
typedef const char *(*cli_getenv_fn)(const char *key);

/* Set the defaults, then apply the environment through getenv_fn (may be NULL):
 * REDLOCK_URL, REDLOCK_TOKEN, REDLOCK_LEASE, CURL_CA_BUNDLE, SSL_CERT_FILE. */
void cli_opts_init(cli_opts *o, cli_getenv_fn getenv_fn);

/* Parse argv (argv[0] is the program name).  Options may come before or after the
 * command and NAME; `sem` is followed by its verb (acquire, release, extend, status,
 * run), which becomes o->cmd with o->sem set; for `run`, `sem run` and `elect`, CMD
 * starts after `--` or at the first word after NAME that is not an option.
 * Returns 0, or -1 with a message in err (exit CLI_EXIT_USAGE).
 * The strings in *o point into argv and the environment: keep them alive. */
int cli_opts_parse(cli_opts *o, int argc, char **argv, char *err, size_t errlen);

/* Parse a decimal count of milliseconds in [min, max].  Returns 0 or -1. */
int cli_parse_ms(const char *s, long min, long max, long *out);

/* The usage text, printed by --help and after usage errors. */
const char *cli_usage(void);

#endif
