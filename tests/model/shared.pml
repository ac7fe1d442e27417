/* shared.pml -- shared locks with writer-intent marks (issue 22, finding 2): one
 * name, N = 3 masters (quorum 2), two readers R1 (two holds in turn) and R2 (one),
 * and a writer W that waits.  Checked by tests/model/check.sh (`make test-model`);
 * README.md says more.
 *
 * On each master (DESIGN.md section 12): the writer's key, the reader entries, and
 * W's mark in P#w: (a waiting writer; a reader is refused on a master with a live
 * mark).  A reader is granted by Q masters that added its entry (no key, no live
 * mark); W by Q masters that set its key (free, no reader entry), directly by its
 * own acquire or by a handoff: a reader's release through the instance where W is
 * parked removes the reader's entry and, where the name is then free, sets W's key.
 * W's acquire that is refused writes its mark where it was refused, and W waits.
 * W leaves its wait in one of four ways: granted, granted by handoff, gives up
 * (its deadline), hangs up.
 *
 * Properties:
 *   (a) no reader with a writer: when a reader is granted W does not hold; when W
 *       is granted no reader holds;
 *   (b) a mark lives no longer than its writer waits: when W leaves its wait, no
 *       mark of it is left that outlives the short expiry a waiting writer renews;
 *       and no reader is refused by a mark of W once W has left and that short
 *       expiry has passed.
 *
 * Rules (the new ones by default): W's mark carries a short expiry that W renews
 * while it waits; every exit (grant, handoff, give-up, hang-up) sends a round that
 * removes W's mark from every master (a request may be lost: that mark goes at its
 * short expiry), and the handoff script removes it where it sets W's key.
 * OLD_MARKS (today, finding 2): the mark lives until W's deadline (up to
 * --max-wait-ms); only W's own granting acquire removes it, where it sets the key.
 * NO_EXIT_CHECK: leave out the check at W's exit (to see a reader refused).
 *
 * Time is abstract: a reader entry or W's key may expire whenever its holder does
 * not hold through it; a short mark may expire at any time (a renewal lost) and is
 * gone once the short expiry has passed after W left (event "short"); a long mark
 * goes at W's deadline (event "deadline", later than "short", or when W gives up).
 * Requests: applied with the reply counted, applied with the reply lost, or lost.
 */

#define N 3
#define Q 2

/* the properties, named in the assertions (check.sh reads the name) */
bool P_no_reader_with_a_writer = 1;
bool P_no_reader_refused_by_a_stale_mark = 1;
bool P_no_mark_outlives_its_writer = 1;
bool P_no_reader_refused_by_a_mark_its_writer_removed = 1;

bool wk[N];       /* W's key                                                     */
byte rd[N];       /* reader entries: bit 0 R1, bit 1 R2                          */
byte mark[N];     /* W's mark: 0 none, 1 short expiry (renewed), 2 until deadline */
bool rl[N];       /* the removal request of W's exit did not reach m            */

#define W_START 0     /* its acquire is to come                                  */
#define W_WAIT  1     /* parked: refused, waiting                                */
#define W_HOLD  2
#define W_DONE  3
byte wph;
bool wexit;       /* W left its wait (or never waited)                           */
bool sb;          /* the short expiry has passed since W left                    */
bool dl;          /* W's deadline has passed                                     */
byte wtry;        /* W's acquires so far                                         */

byte RH;          /* readers holding: bit 0 R1, bit 1 R2                         */
byte rleft[2];    /* holds each reader has still to take                         */

/* scratch */
byte m; byte got; byte r; byte o;

#define POP(b) (((b) & 1) + (((b) >> 1) & 1) + (((b) >> 2) & 1))
#define RBIT(r) (1 << (r))

#ifdef OLD_MARKS
#define MARKKIND 2
#else
#define MARKKIND 1
#endif

/* a reader's acquire script on m: o = added */
inline r_script(m, r) {
  if
  :: !wk[m] && mark[m] == 0 -> rd[m] = rd[m] | RBIT(r); o = 1
  :: else ->
       if
       :: !wk[m] && mark[m] != 0 ->
            printf("MSC:   R%d refused on m%d by W's mark (%d)\n", r + 1, m, mark[m]);
            assert(P_no_reader_refused_by_a_stale_mark && !(wexit && sb));   /* (b) */
            /* (b) once W has left, only where its exit's removal was lost */
            assert(P_no_reader_refused_by_a_mark_its_writer_removed && (!wexit || rl[m]))
       :: else -> skip
       fi;
       o = 0
  fi
}

inline r_acquire(r) {
  printf("MSC: R%d acquire round\n", r + 1);
  got = 0;
  for (m : 0 .. N - 1) {
    if
    :: true -> r_script(m, r); if :: o -> got = got | (1 << m) :: else -> skip fi
    :: true -> r_script(m, r)                    /* applied, reply lost */
    :: true -> skip                              /* lost */
    fi
  };
  m = 0; o = 0;
  if
  :: POP(got) >= Q ->
       printf("MSC: R%d granted\n", r + 1);
       assert(P_no_reader_with_a_writer && wph != W_HOLD)    /* (a) */;
       RH = RH | RBIT(r)
  :: else -> printf("MSC: R%d refused\n", r + 1)   /* its entries expire */
  fi;
  got = 0
}

/* W leaves its wait: the exit's round removes its marks */
inline w_exit() {
  wexit = 1;
#ifndef OLD_MARKS
  for (m : 0 .. N - 1) {
    if :: mark[m] = 0 :: rl[m] = 1 fi;           /* removed, or the request lost */
    if :: mark[m] != 0 -> printf("MSC:   W's exit: the removal of its mark on m%d is lost\n", m)
       :: else -> skip fi
  };
  m = 0;
#endif
  /* (b) what is left goes at the short expiry */
#ifndef NO_EXIT_CHECK
  assert(P_no_mark_outlives_its_writer && mark[0] != 2 && mark[1] != 2 && mark[2] != 2)
#else
  skip
#endif
}

/* W's acquire script on m: o = set */
inline w_script(m) {
  if
  :: rd[m] == 0 ->                              /* free, or W's own key */
       wk[m] = 1; o = 1; printf("MSC:   m%d sets W's key\n", m);
#ifdef OLD_MARKS
       mark[m] = 0;                              /* a granting acquire removes it */
#endif
       skip
  :: else -> o = 0; mark[m] = MARKKIND;          /* refused: W will wait */
       printf("MSC:   m%d refuses W: W's mark written (%d)\n", m, MARKKIND)
  fi
}

inline w_acquire() {
  printf("MSC: W acquire round\n");
  wtry++;
  got = 0;
  for (m : 0 .. N - 1) {
    if
    :: true -> w_script(m); if :: o -> got = got | (1 << m) :: else -> skip fi
    :: true -> w_script(m)
    :: true -> skip
    fi
  };
  m = 0; o = 0;
  if
  :: POP(got) >= Q ->
       printf("MSC: W granted\n");
       assert(P_no_reader_with_a_writer && RH == 0);         /* (a) */
       wph = W_HOLD;
       if :: !wexit -> w_exit() :: else -> skip fi
  :: else ->
       printf("MSC: W refused: waits\n");
       /* its clean-up: the keys it set go (or expire) */
       for (m : 0 .. N - 1) { if :: wk[m] = 0 :: skip fi };
       m = 0;
       wph = W_WAIT
  fi;
  got = 0
}

/* reader r releases; hand: through the instance where W is parked (handoff) */
inline r_release(r, hand) {
  if :: hand -> printf("MSC: R%d releases (through W's instance: handoff)\n", r + 1)
     :: else -> printf("MSC: R%d releases\n", r + 1)
  fi;
  RH = RH & ~RBIT(r);
  got = 0;
  for (m : 0 .. N - 1) {
    if
    :: true ->
         rd[m] = rd[m] & ~RBIT(r);
         if
         :: hand && rd[m] == 0 ->
              wk[m] = 1;
#ifndef OLD_MARKS
              mark[m] = 0;
#endif
              if :: got = got | (1 << m) :: skip fi      /* counted, or reply lost */
         :: else -> skip
         fi
    :: true -> skip                                    /* lost: the entry expires */
    fi
  };
  m = 0;
  if
  :: hand && POP(got) >= Q ->
       printf("MSC: W granted by handoff\n");
       assert(P_no_reader_with_a_writer && RH == 0);         /* (a) */
       wph = W_HOLD;
       w_exit()
  :: hand && POP(got) < Q ->
       for (m : 0 .. N - 1) { if :: wk[m] = 0 :: skip fi };
       m = 0
  :: else -> skip
  fi;
  got = 0
}

#define EXPR(mm, rr) \
  :: atomic { (rd[mm] & RBIT(rr)) && !(RH & RBIT(rr)) -> rd[mm] = rd[mm] & ~RBIT(rr) }

init {
  rleft[0] = 2; rleft[1] = 1;
  do
  /* readers */
  :: atomic { !(RH & 1) && rleft[0] > 0 -> rleft[0]--; r_acquire(0) }
  :: atomic { !(RH & 2) && rleft[1] > 0 -> rleft[1]--; r_acquire(1) }
  :: atomic { (RH & 1) -> r_release(0, 0) }
  :: atomic { (RH & 2) -> r_release(1, 0) }
  :: atomic { (RH & 1) && wph == W_WAIT -> r_release(0, 1) }
  :: atomic { (RH & 2) && wph == W_WAIT -> r_release(1, 1) }
  /* the writer */
  :: atomic { wph == W_START -> w_acquire() }
  :: atomic { wph == W_WAIT && wtry < 2 -> w_acquire() }        /* woken: tries again */
  :: atomic { wph == W_WAIT -> printf("MSC: W gives up (its deadline)\n");
              wph = W_DONE; dl = 1;
              if :: mark[0] == 2 -> mark[0] = 0 :: else -> skip fi;
              if :: mark[1] == 2 -> mark[1] = 0 :: else -> skip fi;
              if :: mark[2] == 2 -> mark[2] = 0 :: else -> skip fi;
              w_exit() }
  :: atomic { wph == W_WAIT -> printf("MSC: W hangs up\n"); wph = W_DONE; w_exit() }
  :: atomic { wph == W_HOLD -> printf("MSC: W releases\n"); wph = W_DONE;
              for (m : 0 .. N - 1) { if :: wk[m] = 0 :: skip fi }; m = 0 }
  /* time */
  :: atomic { wexit && !sb -> printf("MSC: the short expiry passes\n"); sb = 1;
              if :: mark[0] == 1 -> mark[0] = 0 :: else -> skip fi;
              if :: mark[1] == 1 -> mark[1] = 0 :: else -> skip fi;
              if :: mark[2] == 1 -> mark[2] = 0 :: else -> skip fi }
  :: atomic { sb && !dl -> printf("MSC: W's deadline passes\n"); dl = 1;
              if :: mark[0] == 2 -> mark[0] = 0 :: else -> skip fi;
              if :: mark[1] == 2 -> mark[1] = 0 :: else -> skip fi;
              if :: mark[2] == 2 -> mark[2] = 0 :: else -> skip fi }
  :: atomic { mark[0] == 1 -> mark[0] = 0 }      /* a renewal lost */
  :: atomic { mark[1] == 1 -> mark[1] = 0 }
  :: atomic { mark[2] == 1 -> mark[2] = 0 }
  EXPR(0, 0) EXPR(1, 0) EXPR(2, 0) EXPR(0, 1) EXPR(1, 1) EXPR(2, 1)
  :: atomic { wph != W_HOLD && (wk[0] || wk[1] || wk[2]) ->
              if :: wk[0] = 0 :: wk[1] = 0 :: wk[2] = 0 fi }
  od
}
