/* trust.h -- the verdict on a worker's masters found without their record ("unmarked":
 * new, or wiped; docs/DESIGN.md section 4, "Master trust", rule 3).  Such a master
 * joins without quarantine only when no master carries a record (a new cluster:
 * nothing can have been granted), as every master answered to checks sent after the
 * last of them was found bare; any record elsewhere means it lost its data, and it is
 * quarantined; until every master has answered, it stays out.  The pure rule is
 * redlock.h's (redlock_judge_unmarked); here are the checks it needs and the verdict
 * written on the master (master.h). */
#ifndef RL_TRUST_H
#define RL_TRUST_H

#include <stddef.h>

typedef struct master_conn master_conn;
typedef struct log_ctx log_ctx;

/* Judge the unmarked masters among masters[0..n), a worker's connections (its thread).
 * judge: this worker gives the verdicts (one worker per instance, so that the workers
 * of one instance never race each other into quarantining a new cluster's masters);
 * the others only ask again until a verdict is on the master.  origin: the instance's
 * id, written with a verdict.  While a verdict waits for every master, that is logged
 * (rarely) to log. */
void trust_judge_unmarked(master_conn *masters, size_t n, int judge, const char *origin,
                          log_ctx *log);

/* Whether one of masters[0..n) is unmarked (a verdict is due). */
int trust_any_unmarked(const master_conn *masters, size_t n);

#endif
