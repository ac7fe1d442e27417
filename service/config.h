/* config.h -- the service's configuration: one struct, its defaults in one place,
 * command-line flags overriding environment variables overriding defaults.
 *
 * Invalid configuration is refused at start with a message naming the bad value. */
#ifndef RL_CONFIG_H
#define RL_CONFIG_H

#include <stddef.h>

#define CONFIG_MAX_MASTERS 64

typedef struct config_master {
    char address[288];   /* display form, never the password: "host:port", "unix:/p" */
    char host[256];      /* TCP host (empty for a unix socket) */
    int port;            /* TCP port (0 for a unix socket) */
    char unix_path[256]; /* unix socket path (empty for TCP) */
    char user[128];      /* ACL user (redis://user:pw@...): AUTH user pw; empty: AUTH pw */
    char password[256];  /* AUTH password, empty for none */
    int db;              /* SELECT index, 0 by default */
    int tls;             /* rediss://: TLS (redis_tls.h) */
    char server_name[256]; /* rediss://...?server_name=: the name its certificate must
                          * carry (and the SNI); empty: --redis-tls-server-name, or host */
} config_master;

struct redis_tls_creds;

typedef struct config {
    config_master masters[CONFIG_MAX_MASTERS];
    size_t n_masters;
    char listen_host[256];
    int listen_port;
    long node_timeout_ms;  /* per master, per round */
    double drift_factor;
    long default_ttl_ms;
    long max_ttl_ms;
    long max_wait_ms;
    long lock_delay_ms;    /* the lock-delay of an exclusive lock whose acquire gives none
                            * (docs/DESIGN.md section 14); at most max_ttl_ms */
    char key_prefix[128];
    int threads;
    long max_connections;  /* whole process */
    long max_waiters;      /* parked acquirers, whole process */
    long max_streams;      /* locks held for open streams (hold=stream), whole process */
    long quarantine_ms;    /* how long a master that restarted or lost its data stays out of
                            * quorums (the delayed restart; default: max ttl) */
    int trust_fsync_always; /* 1: a restarted master whose config is AOF with appendfsync
                             * always rejoins without the delay (still repaired) */
    int clock_check;       /* 1: masters' clocks are watched (mclock.h), and every lock
                            * script carries a window of times it may run in */
    long clock_max_skew_ms; /* a master's clock this far from the others' is not trusted
                             * (0: not compared) */
    long header_timeout_ms; /* a request header must arrive within this (slow clients) */
    char auth_tokens_file[512]; /* empty: no authentication */
    int auth_probes;       /* 1: /readyz and /metrics need a token too */
    char tls_cert[512], tls_key[512]; /* both set: HTTPS */
    char redis_password_file[512];
    /* TLS to rediss:// masters (redis_tls.h) */
    char redis_tls_ca_file[512];    /* the CAs that vouch for masters; empty: the system's */
    char redis_tls_cert[512], redis_tls_key[512]; /* our client certificate (mutual TLS) */
    char redis_tls_server_name[512]; /* the name every rediss:// master's certificate
                                      * carries, unless its URL names one (empty: its host) */
    int redis_tls_insecure;          /* 1: no verification at all (warned at start, /readyz) */
    struct redis_tls_creds *redis_tls; /* made by main from the above, once, when a
                                      * master is rediss://; read by every worker */
    int log_json;          /* 1: JSON lines, 0: text */
    int log_level;         /* LOG_LEVEL_ERROR..LOG_LEVEL_DEBUG from log.h */
} config;

/* redlockd's exit status when the listen address is in use (EADDRINUSE): apart from
 * other start failures (1) so that a supervisor can refuse to restart-loop on it
 * (deploy/redlockd.service's RestartPreventExitStatus). */
#define CONFIG_EXIT_ADDRESS_IN_USE 3

/* Outcome of config_load(). */
enum { CONFIG_OK = 0, CONFIG_EXIT = 1, CONFIG_ERROR = -1 };

/* Fill *cfg from defaults, the environment (REDLOCK_*) and argv (flags win).
 * Returns CONFIG_OK, CONFIG_EXIT when --help or --version was printed (exit 0),
 * or CONFIG_ERROR with a message naming the bad value in err. */
int config_load(config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Set the defaults only (used by tests and by config_load). */
void config_defaults(config *cfg);

/* Parse one master: "host:port", "[v6]:port", "redis://[[user]:password@]host:port[/db]",
 * "rediss://[[user]:password@]host:port[/db][?server_name=NAME]" (TLS),
 * "unix:///path.sock".  Returns 0, or -1 with a message in err that never shows the
 * password. */
int config_parse_master(const char *s, config_master *out, char *err, size_t errlen);

/* Whether name can be a TLS server name (a DNS name or an address, no wildcard): 0 or -1. */
int config_check_server_name(const char *name);

/* The name a rediss:// master's certificate must carry: its URL's server_name, else
 * --redis-tls-server-name, else the host it is reached by. */
const char *config_master_tls_name(const config *cfg, const config_master *m);

/* How many masters are rediss://. */
size_t config_tls_masters(const config *cfg);

/* The AUTH command for master m, for redisAsyncCommandArgv: fills argv with "AUTH",
 * [user,] password and returns the count (3 with an ACL user, 2 without), or 0 when m
 * has no password (no AUTH to send).  argv points into m. */
int config_master_auth_argv(const config_master *m, const char *argv[3]);

/* Parse a comma-separated master list into cfg->masters.  Returns 0 or -1 + err. */
int config_parse_masters(config *cfg, const char *list, char *err, size_t errlen);

/* Parse "HOST:PORT" (port 0..65535; "[v6]:port" allowed).  Returns 0 or -1. */
int config_parse_hostport(const char *s, char *host, size_t hostlen, int *port);

/* Strict decimal parse of a whole string into [min, max].  Returns 0 or -1. */
int config_parse_long(const char *s, long min, long max, long *out);

/* Quorum for n masters: n/2 + 1. */
size_t config_quorum(size_t n_masters);

#endif
