/* sampler.c -- reads the lock state live on each master, for verdict (l). */
#include "sampler.h"

#include "http.h"
#include "procs.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One read-only call: the master's time and every live entry under the prefix, one line
 * each: "k|<name>|<value>|<pttl>" (a lock key), "s|<name>#<i>|<value>|<pttl>" (a permit
 * slot), "r|<name>|<lease>|<ms left>" and "w|<name>|<lease>|<ms left>" (a reader entry, a
 * writer mark: members whose score, in the master's clock, is still ahead). */
static const char SCRIPT[] =
    "local pfx = ARGV[1] "
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local out = {} "
    "for _, k in ipairs(redis.call('KEYS', pfx .. '*')) do "
    "  local rest = string.sub(k, #pfx + 1) "
    "  local c = string.sub(rest, 1, 1) "
    "  local h3 = string.sub(rest, 1, 3) "
    "  if c ~= '#' or (string.sub(rest, 1, 5) == '#sem:' and string.find(rest, '#', 6, true)) then "
    "    if redis.call('TYPE', k)['ok'] == 'string' then "
    "      local v = redis.call('GET', k) "
    "      local pt = redis.call('PTTL', k) "
    "      if v and pt > 0 then "
    "        if c == '#' then out[#out + 1] = 's|' .. string.sub(rest, 6) .. '|' .. v .. '|' .. pt "
    "        else out[#out + 1] = 'k|' .. rest .. '|' .. v .. '|' .. pt end "
    "      end "
    "    end "
    "  elseif h3 == '#w:' or h3 == '#r:' then "
    "    local m = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') "
    "    for i = 1, #m, 2 do "
    "      local left = tonumber(m[i + 1]) - now "
    "      if left > 0 then out[#out + 1] = string.sub(rest, 2, 2) .. '|' .. string.sub(rest, 4) .. '|' .. m[i] "
    "        .. '|' .. left end "
    "    end "
    "  end "
    "end "
    "return table.concat(out, '\\n')";

struct chaos_sampler {
    pthread_t th;
    atomic_int stop;
    const int *ports;
    int n, period_ms;
    char prefix[64];
    const chaos_history *h;
    chaos_obs_set *s;
    pthread_mutex_t *mu;
};

static int name_index(const chaos_history *h, const char *name, size_t len)
{
    for (int i = 0; i < h->n_names; i++)
        if (strlen(h->names[i]) == len && !memcmp(h->names[i], name, len))
            return i;
    return -1;
}

void chaos_sampler_parse(const char *reply, int master, int64_t t, long pass, const char *prefix,
                         const chaos_history *h, chaos_obs_set *s)
{
    (void)prefix;
    const char *p = reply;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        if (ll < sizeof line) {
            memcpy(line, p, ll);
            line[ll] = '\0';
            char *f1 = strchr(line, '|'), *f2 = f1 ? strchr(f1 + 1, '|') : NULL;
            char *f3 = f2 ? strrchr(f2 + 1, '|') : NULL;
            if (f1 && f2 && f3 && f1 == line + 1) {
                chaos_obs o;
                memset(&o, 0, sizeof o);
                o.t = t;
                o.pass = pass;
                o.master = master;
                o.kind = line[0];
                o.count = 1;
                o.left_ms = strtoll(f3 + 1, NULL, 10);
                const char *name = f1 + 1;
                size_t nlen = (size_t)(f2 - name);
                if (o.kind == CHAOS_OBS_SLOT) { /* <name>#<i> */
                    const char *hash = memchr(name, '#', nlen);
                    nlen = hash ? (size_t)(hash - name) : nlen;
                }
                o.name = name_index(h, name, nlen);
                /* a value: <lease>[.<tag>][!]*<n>...; a member: the lease */
                const char *v = f2 + 1;
                size_t vl = (size_t)(f3 - v), l = strcspn(v, ".*\n|");
                if (l > vl)
                    l = vl;
                if (l >= sizeof o.lease)
                    l = sizeof o.lease - 1;
                memcpy(o.lease, v, l);
                o.lease[l] = '\0';
                const char *star = memchr(v, '*', vl);
                if (star && (o.kind == CHAOS_OBS_KEY || o.kind == CHAOS_OBS_SLOT))
                    o.count = atoi(star + 1);
                if (o.name >= 0 && (o.kind == CHAOS_OBS_KEY || o.kind == CHAOS_OBS_SLOT || o.kind == CHAOS_OBS_READER ||
                                    o.kind == CHAOS_OBS_MARK))
                    (void)chaos_obs_add(s, &o);
            }
        }
        if (!eol)
            break;
        p = eol + 1;
    }
}

static void *sampler_main(void *arg)
{
    chaos_sampler *sp = arg;
    long pass = 0;
    const char *argv[] = {"EVAL", SCRIPT, "0", sp->prefix};
    while (!atomic_load(&sp->stop)) {
        long long next = now_ms() + sp->period_ms;
        for (int i = 0; i < sp->n && !atomic_load(&sp->stop); i++) {
            size_t len = 0;
            int64_t t0 = http_now_ns();
            char *r = redis_call(sp->ports[i], 4, argv, &len, sp->period_ms / 2 > 20 ? sp->period_ms / 2 : 20);
            int64_t t1 = http_now_ns();
            if (!r)
                continue;
            if (r[0] != '-' && r[0] != '+' && r[0] != ':') {
                pthread_mutex_lock(sp->mu);
                chaos_sampler_parse(r, i, t0 + (t1 - t0) / 2, pass, sp->prefix, sp->h, sp->s);
                if (i < 8)
                    sp->s->master_looks[i]++;
                pthread_mutex_unlock(sp->mu);
            }
            free(r);
        }
        pthread_mutex_lock(sp->mu);
        sp->s->passes = ++pass;
        pthread_mutex_unlock(sp->mu);
        long long left = next - now_ms();
        if (left > 0)
            sleep_ms(left);
    }
    return NULL;
}

chaos_sampler *chaos_sampler_start(const int *ports, int n, const char *prefix, const chaos_history *h,
                                   chaos_obs_set *s, pthread_mutex_t *mu, int period_ms)
{
    chaos_sampler *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->ports = ports;
    sp->n = n;
    sp->period_ms = period_ms;
    snprintf(sp->prefix, sizeof sp->prefix, "%s", prefix);
    sp->h = h;
    sp->s = s;
    sp->mu = mu;
    if (pthread_create(&sp->th, NULL, sampler_main, sp) != 0) {
        free(sp);
        return NULL;
    }
    return sp;
}

void chaos_sampler_stop(chaos_sampler *sp)
{
    if (!sp)
        return;
    atomic_store(&sp->stop, 1);
    pthread_join(sp->th, NULL);
    free(sp);
}
