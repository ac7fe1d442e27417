/* auth.h -- bearer-token authentication: the tokens file, and the check of an
 * Authorization header.  Tokens are compared in constant time.
 *
 * One token per line: TOKEN [NAME-PREFIX] [+admin] [name=LABEL], the fields after the
 * token in any order: a lock-name prefix scopes the token; +admin lets it break locks
 * (DELETE ?force=true); LABEL (1..64 of [A-Za-z0-9._:@/-]) names it in the logs
 * (default: "line N").  '+' and '=' are not name characters, so a file of the older
 * form TOKEN [NAME-PREFIX] reads as it always did. */
#ifndef RL_AUTH_H
#define RL_AUTH_H

#include <stddef.h>

#include "errors.h"

#define AUTH_LABEL_MAX 64

typedef struct auth_token {
    char *token;
    char *scope;   /* lock-name prefix, or NULL for every name */
    int admin;     /* +admin: may break locks */
    char label[AUTH_LABEL_MAX + 1]; /* what the logs call it: name=, or "line N" */
} auth_token;

typedef struct auth {
    auth_token *tokens;
    size_t n;
} auth;

/* Load path into a (replacing nothing: a must be zeroed).  Returns 0, or -1 with a
 * message naming the file and line in err. */
int auth_load(auth *a, const char *path, char *err, size_t errlen);

/* Parse the text of a tokens file (used by auth_load and the fuzzer). */
int auth_parse(auth *a, const char *text, char *err, size_t errlen);

void auth_free(auth *a);

/* Check an Authorization header value (may be NULL) for a lock name (NULL for routes
 * without one).  RL_OK, RL_E_UNAUTHORIZED (missing or unknown token) or RL_E_FORBIDDEN
 * (a known token whose scope does not cover name). */
rl_err auth_check(const auth *a, const char *header, const char *name, size_t name_len);

/* The scope (name prefix) of the token in header, or NULL if the token covers every
 * name or is unknown (auth_check() has judged the header already). */
const char *auth_scope(const auth *a, const char *header);

/* Whether an Authorization header value uses the Bearer scheme (any case) with
 * something after it: a 401 for it says error="invalid_token" (RFC 6750). */
int auth_is_bearer(const char *header);

/* The known token in header (NULL if none): its scope, admin mark and label. */
const auth_token *auth_token_of(const auth *a, const char *header);

#endif
