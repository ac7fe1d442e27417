/* auth.c -- bearer tokens (see auth.h). */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lease.h"

void auth_free(auth *a)
{
    for (size_t i = 0; i < a->n; i++) {
        /* Tokens are secrets: do not leave them in freed memory. */
        memset(a->tokens[i].token, 0, strlen(a->tokens[i].token));
        free(a->tokens[i].token);
        free(a->tokens[i].scope);
    }
    free(a->tokens);
    a->tokens = NULL;
    a->n = 0;
}

/* A token's name in the logs: 1..AUTH_LABEL_MAX of [A-Za-z0-9._:@/-]. */
static int valid_label(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > AUTH_LABEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("._:@/-", c)))
            return 0;
    }
    return 1;
}

int auth_parse(auth *a, const char *text, char *err, size_t errlen)
{
    int line = 0;
    const char *p = text;
    while (*p) {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[1024];
        if (len >= sizeof buf) {
            snprintf(err, errlen, "line %d: too long", line);
            return -1;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (eol ? 1 : 0);
        char *save = NULL;
        char *tok = strtok_r(buf, " \t\r", &save);
        if (!tok || tok[0] == '#')
            continue;
        char *scope = NULL, *label = NULL, *f;
        int admin = 0;
        while ((f = strtok_r(NULL, " \t\r", &save))) {
            if (strcmp(f, "+admin") == 0 && !admin) {
                admin = 1;
            } else if (strncmp(f, "name=", 5) == 0 && !label && valid_label(f + 5)) {
                label = f + 5;
            } else if (f[0] != '+' && !strchr(f, '=') && !scope) {
                scope = f;
            } else {
                memset(buf, 0, sizeof buf);
                snprintf(err, errlen, "line %d: expected 'TOKEN [NAME-PREFIX] [+admin] [name=LABEL]'"
                         " (LABEL: 1..%d of [A-Za-z0-9._:@/-])", line, AUTH_LABEL_MAX);
                return -1;
            }
        }
        if (strlen(tok) < 16) {
            snprintf(err, errlen, "line %d: a token must have at least 16 characters", line);
            return -1;
        }
        auth_token *nt = realloc(a->tokens, (a->n + 1) * sizeof *nt);
        if (!nt) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        a->tokens = nt;
        nt[a->n].token = strdup(tok);
        nt[a->n].scope = scope ? strdup(scope) : NULL;
        nt[a->n].admin = admin;
        if (label)
            snprintf(nt[a->n].label, sizeof nt[a->n].label, "%s", label);
        else
            snprintf(nt[a->n].label, sizeof nt[a->n].label, "line %d", line);
        if (!nt[a->n].token || (scope && !nt[a->n].scope)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        a->n++;
        memset(buf, 0, sizeof buf);
    }
    if (a->n == 0) {
        snprintf(err, errlen, "no tokens");
        return -1;
    }
    return 0;
}

int auth_load(auth *a, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read tokens file '%s'", path);
        return -1;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + k + 1 > cap) {
            cap = (len + k + 1) * 2;
            char *nt = realloc(text, cap);
            if (!nt) {
                free(text);
                fclose(f);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            text = nt;
        }
        memcpy(text + len, chunk, k);
        len += k;
    }
    fclose(f);
    if (!text) {
        snprintf(err, errlen, "tokens file '%s' is empty", path);
        return -1;
    }
    text[len] = '\0';
    char inner[256];
    int rc = auth_parse(a, text, inner, sizeof inner);
    memset(text, 0, len);
    free(text);
    if (rc != 0)
        snprintf(err, errlen, "tokens file '%s': %s", path, inner);
    return rc;
}

int auth_is_bearer(const char *header)
{
    /* RFC 9110: the scheme is case-insensitive ("bearer", "BEARER"). */
    return header && strncasecmp(header, "Bearer", 6) == 0 && (header[6] == ' ' || header[6] == '\t');
}

static const auth_token *find_token(const auth *a, const char *header)
{
    if (!auth_is_bearer(header))
        return NULL;
    const char *given = header + 6;
    while (*given == ' ' || *given == '\t')
        given++;
    size_t glen = strlen(given);
    const auth_token *match = NULL;
    /* Look at every token, whatever matched, so the time does not tell which. */
    for (size_t i = 0; i < a->n; i++) {
        const auth_token *t = &a->tokens[i];
        if (lease_equal(t->token, strlen(t->token), given, glen) && !match)
            match = t;
    }
    return match;
}

const char *auth_scope(const auth *a, const char *header)
{
    const auth_token *t = find_token(a, header);
    return t ? t->scope : NULL;
}

const auth_token *auth_token_of(const auth *a, const char *header)
{
    return find_token(a, header);
}

rl_err auth_check(const auth *a, const char *header, const char *name, size_t name_len)
{
    const auth_token *match = find_token(a, header);
    if (!match)
        return RL_E_UNAUTHORIZED;
    if (match->scope && name) {
        size_t sl = strlen(match->scope);
        if (name_len < sl || memcmp(name, match->scope, sl) != 0)
            return RL_E_FORBIDDEN;
    }
    return RL_OK;
}
