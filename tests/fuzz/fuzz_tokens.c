/* fuzz_tokens.c -- libFuzzer target: the tokens file (auth.h, auth_parse).
 *
 * Input: the file's text (a C string: it stops at the first NUL).  Checks, beyond "no
 * crash":
 *  - a parse that fails says why, and holds no token;
 *  - a parse that succeeds holds only non-empty tokens, each with a label, a scope that
 *    is NULL or non-empty, and an admin flag of 0 or 1;
 *  - every token is accepted by auth_check as a Bearer header, for a name inside its
 *    scope, and auth_token_of finds that same token;
 *  - a header with no token or an unknown one is refused (401). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    auth a = {0};
    char err[256] = "";
    int rc = auth_parse(&a, text, err, sizeof err);
    if (rc != 0) {
        if (!err[0])
            abort(); /* a refusal says why */
        auth_free(&a);
        free(text);
        return 0;
    }
    for (size_t i = 0; i < a.n; i++) {
        const auth_token *t = &a.tokens[i];
        if (!t->token || !t->token[0] || !t->label[0] || (t->scope && !t->scope[0]) ||
            (t->admin != 0 && t->admin != 1))
            abort();
        size_t hl = strlen(t->token) + 8;
        char *hdr = malloc(hl);
        if (!hdr)
            break;
        snprintf(hdr, hl, "Bearer %s", t->token);
        const char *name = t->scope ? t->scope : "x";
        /* Another token may be the same string with another scope: the first wins. */
        const auth_token *found = auth_token_of(&a, hdr);
        if (!found || strcmp(found->token, t->token) != 0)
            abort();
        if (found == t && auth_check(&a, hdr, name, strlen(name)) != RL_OK)
            abort();
        free(hdr);
    }
    if (a.n && auth_check(&a, NULL, "x", 1) != RL_E_UNAUTHORIZED)
        abort();
    if (a.n && auth_check(&a, "Bearer ", "x", 1) != RL_E_UNAUTHORIZED)
        abort();
    auth_free(&a);
    free(text);
    return 0;
}
