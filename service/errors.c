/* errors.c -- lookups into the error table declared in errors.h. */
#include "errors.h"

static const struct {
    int status;
    const char *code;
    const char *message;
} rl_err_table[RL_ERR__COUNT] = {
#define RL_ERR_ROW(sym, status, code, msg) [sym] = {status, code, msg},
    RL_ERRORS(RL_ERR_ROW)
#undef RL_ERR_ROW
};

int rl_err_status(rl_err e)
{
    if ((unsigned)e >= RL_ERR__COUNT)
        return 500;
    return rl_err_table[e].status;
}

const char *rl_err_code(rl_err e)
{
    if ((unsigned)e >= RL_ERR__COUNT)
        return "internal";
    return rl_err_table[e].code;
}

const char *rl_err_message(rl_err e)
{
    if ((unsigned)e >= RL_ERR__COUNT)
        return "internal error";
    return rl_err_table[e].message;
}
