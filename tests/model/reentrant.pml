/* reentrant.pml -- reentrant holds (issue 22, findings 1 and 3, and the rule "a
 * re-entry never takes a free key" of 8f844cb, DESIGN.md section 12): one name, N = 3
 * masters (quorum 2), a reentrant holder H and a competitor C, time in ticks.
 * Checked by tests/model/check.sh (`make test-model`); README.md says more.
 *
 * H makes its first acquire, then up to MAXRE re-entries (each with a ttl of 1 or 3
 * ticks) and releases, in any order its code may nest them: a release lets go of the
 * innermost hold.  C tries once, at any moment.
 *
 * Two clients read H's answers:
 *   the nesting client believes it holds from its first grant until the release of
 *     its first hold (or until a release answers "released"), each hold up to the
 *     validity its grant told;
 *   the count client believes it holds while its code is in a section and the
 *     count the service last answered is at least 1 (a grant's holds, a release's
 *     holds left; a release answered 503 release_unconfirmed takes one off), up to
 *     the validity the latest grant told (a re-entry answers the lock's own).
 *     COUNT_ANYTIME: also after its code let go of its last hold, if the count says
 *     one is left.
 * Either client may re-enter at any time while its code is in a section
 * (REENTER_VALID: only while it believes it holds), and goes on after a 503 to a
 * release (UNCONFIRMED_LOST: it stops there and believes nothing, README
 * "Releases": "the caller stops using the resource").
 *
 * Properties:
 *   (a) one holder: when C is granted, the nesting client does not believe it holds;
 *       a holder's key outlives the validity it was told: at every tick, while the
 *       nesting client believes it holds, at least Q masters keep H's key alive;
 *   (b) released means free: a release answered "released" leaves fewer than Q
 *       masters on which H's key is alive (a master that did not answer may hold);
 *   (c) the count client never believes it holds when it does not: while it
 *       believes it holds, at every tick at least Q masters keep H's key alive, and C
 *       is not granted (not with TAGS, which answer no count).
 * NO_NEST_CHECK, NO_COUNT_CHECK leave out (a), (c).
 *
 * Rules (the service's by default: the hold count in the lock value, and a re-entry
 * never takes a free key):
 *   acquire:  a master where H's key is alive counts one hold more (the value is
 *             rewritten, marked adopted: no clean-up by exact value takes it) and
 *             keeps expiry := max(expiry, now + ttl); a free master gets H's key
 *             (count 1, the attempt's exact value).  The round waits for every
 *             master.  If some master answered that it added a hold, it is a
 *             re-entry: the free keys it set (those that answered) are deleted at
 *             once by their exact value and count for nothing; it is granted by a
 *             quorum of added holds, and otherwise answered 503, not retried, its
 *             increments left where they landed and its exact-value clean-up sent to
 *             the masters that did not answer.  Otherwise it is a first acquire
 *             (granted by Q free keys; else a clean-up by exact value).  A grant
 *             answers the count a quorum agrees on (the Q-th largest count among
 *             the granting masters) and the lock's own validity (the Q-th largest
 *             expiry, less the tick of elapsed time and drift).
 *   release:  one hold less where H's key is (deleted at 0), sent to every master.
 *             Each master answers the holds left (0: gone, or not H's); a master
 *             that did not answer may still hold any count.  Decided when the Q-th
 *             largest count is the same whether the silent masters count 0 or any
 *             number: "released" at 0, else "holds c"; otherwise 503
 *             release_unconfirmed.  (The purge by lease of stale counts after
 *             "released" is not modelled: it only removes keys of a lease whose
 *             holder believes nothing.)
 *   FINISHER: a release answered 503 also sends `<lease>*<t>` to the masters that
 *             did not answer: lower the holds to t (0: delete); t is the most that
 *             a master that had the key answered left, -1 when none did (then a key
 *             with one hold is deleted, more are left alone): finisher_start in
 *             service/lockop.c.  Off by default: it breaks (a) on its own
 *             (README: found-finisher).
 *   FIN_GEN (with FINISHER_WAIT: the service's finisher since a hostile tester's
 *             finding): the value carries a generation that each re-entry's added
 *             hold raises (a fresh key starts at 0); a release's answer says it; the
 *             finisher goes only when every master that answered with the key said the
 *             same generation g, and its `*t` (t >= 1) lowers the holds to t only where
 *             the key still has generation g (a re-entry since, granted or not, raised
 *             it: the hold it added is not the release's to take); elsewhere it does
 *             nothing.  Only a key that keeps holds answers its generation: a `*0`
 *             (every answer let the lease go) checks none, and a `*t` with none named
 *             is not sent.  (The service's generation is the attempt tag in the value,
 *             which each adoption rewrites: FN_RELEASE, release.c unconfirmed_finish.)
 *             Without it (old-finisher-reentry): a re-entry granted after a release
 *             answered 503, before its finisher landed, lost its hold to `*t`.
 *   FIN_LAST_ONLY (with FINISHER_WAIT): no finisher for a release whose answers kept
 *             holds (t >= 1): only a release that every answering master counted as
 *             the lease's last (`*0`) is finished; elsewhere the holds stay until the
 *             key's ttl ends.
 *   ONE_503:  after a release answered 503, every later release is answered in time
 *             by every master (one unconfirmed release: a smaller search).
 *   ACQ_RELIABLE: every acquire request is applied and answered in time (only the
 *             releases and what follows them go astray): a smaller search, the shape
 *             of the finding FIN_GEN answers.
 *   ALL_N_REENTRY (the service's rule; check.sh's reentrant variants): a re-entry
 *             is granted only when every master (all N) answered that it added a
 *             hold; otherwise 503, its holds taken back ("one less") on exactly the
 *             masters that confirmed adding one (requests applied later, or never),
 *             its exact-value clean-up sent to the masters that did not answer.
 *             Without it, a re-entry is granted by a quorum of added holds (the
 *             rule before it: found-two-reentries).
 *   FINISHER_WAIT (with FINISHER: the service's finisher since it waits): the
 *             finisher's `*t` goes to a master only once the release's own request
 *             there can no longer run (its clock window closed: the script refuses
 *             it); that request lands before, or never.
 *   OLD_REENTRY_COUNT: a re-entry is granted by Q masters that added a hold or
 *             took a free key (the count before 8f844cb).
 *   TAGS:     the value records each hold by its own tag (a set), the rule proposed
 *             before 8f844cb: a re-entry adds its tag where H's key is and sets the
 *             key with it where it is free, granted by Q of either; a release
 *             removes its own tag, deletes the key when none is left, and answers
 *             "released" only when N - Q + 1 masters answered the key gone.  No
 *             clean-ups.
 *   OLD_REENTRY_TTL: a re-entry sets expiry := now + ttl and answers a validity
 *             from its own ttl (finding 1).
 *   OLD_RELEASE_EARLY: a release decided at the first Q answers, counting the
 *             answered masters only (finding 3).
 *   EXTEND:   H's code may also extend once while nested (a streamed nested hold's
 *             keeper, or a PATCH by the lease, with the short ttl): on each master
 *             where H's key is, a key that counts more than one hold keeps
 *             expiry := max(expiry, now + ttl), one that counts one gets now + ttl;
 *             granted by Q such masters, it tells now + ttl - 1 (to the innermost hold,
 *             and to the count client as the latest answer).
 *             OLD_EXTEND_SETS: every key gets expiry := now + ttl (FN_EXTEND's
 *             PEXPIRE before it kept the later one; a hostile tester's finding).
 *
 * Requests: an acquire request is applied with its reply counted, applied with its
 * reply lost (a timeout), or lost.  A release request, a clean-up, a finisher's
 * request that did not answer before its round was decided may be applied at any
 * later moment, or never (two instances, a slow master: no order is kept between
 * connections).  A late acquire request is not modelled (its clean-up follows it on
 * the connection).
 *
 * Time: a tick is the smallest unit; a round takes no time (its elapsed time and
 * the drift allowance are the one tick a validity is short of its keys' expiry).
 * A key is alive while now < its expiry; an expired key is cleared at the tick.
 * TMAX: the last tick (4).
 */

#define N 3
#define Q 2
#ifdef TAGS
#define NO_COUNT_CHECK
#endif
#ifndef TMAX
#define TMAX 4
#endif
#define TSHORT 1
#define TLONG 3
#ifndef MAXRE
#define MAXRE 1           /* re-entries tried by H */
#endif
#define NA (MAXRE + 1)    /* H's acquire attempts: 0 its first, then re-entries */
#define INF 99

/* the properties, named in the assertions (check.sh reads the name) */
bool P_one_holder = 1;
bool P_key_outlives_validity = 1;
bool P_released_means_free = 1;
bool P_count_belief_true = 1;

byte now;
byte kv[N];       /* the lease whose key it is: 0 none, 1 H, 2 C                   */
byte kc[N];       /* H's holds there: a count, or with TAGS a set of tags (bit a)    */
byte kx[N];       /* expiry: alive while now < kx                                  */
byte ka[N];       /* 1 + the attempt whose exact value the key still has (set free, */
                  /* untouched since: a clean-up by that value deletes it), or 0   */
byte lr[N];       /* release requests not yet applied: a number (TAGS: bit a)      */
byte lc[N];       /* clean-ups by exact value not yet applied: bit a (attempt a)   */
byte lt[N];       /* finisher requests not yet applied: bit t + 1 (`*t`, t >= -1)  */
#ifdef FINISHER_WAIT
byte lf[N];       /* release k's request not yet applied: bit k                    */
byte lw[N];       /* release k's finisher waits for k's window to close: bit k     */
byte ft[NA];      /* release k's finisher target (t + 1)                           */
byte nrel;        /* releases so far                                               */
#endif
#ifdef ONE_503
bool nunc;        /* a release was answered 503: every later one is answered in time */
#endif
#ifdef FIN_GEN
byte kg[N];       /* the key's generation: raised by each re-entry's added hold    */
byte fg[NA];      /* release k's finisher's generation (GEN_NONE: no finisher)     */
byte lk[N];       /* release k's finisher `*t`, sent, not yet applied: bit k       */
byte gg;          /* scratch: the generation the release's answers agree on        */
#define GEN_UNSEEN 255
#define GEN_SPLIT 254
#endif
#define HKEY(m)   (kv[m] == 1)
#define NH        (HKEY(0) + HKEY(1) + HKEY(2))

byte hn;          /* H's holds as its code nests them                             */
#ifdef TAGS
byte hs[NA];      /* hold i was granted to attempt hs[i]                           */
#endif
byte na;          /* H's acquire attempts so far                                   */
byte bc;          /* the count the service last answered (the count client)        */
byte HV[NA];      /* the validity the grant of the nesting client's hold i told    */
byte BV;          /* the validity the latest grant told                            */
bool hfree;       /* told "released": H believes it holds nothing                  */
bool hgo;         /* H's first acquire is still to come                            */
bool cgo;         /* C's acquire is still to come                                  */

/* the nesting client holds: a hold of its code within the validity its grant told */
#if MAXRE >= 2
#define HBD (!hfree && ((hn >= 1 && now <= HV[0]) || (hn >= 2 && now <= HV[1]) || \
                        (hn >= 3 && now <= HV[2])))
#else
#define HBD (!hfree && ((hn >= 1 && now <= HV[0]) || (hn >= 2 && now <= HV[1])))
#endif
/* the count client holds, while its code is in a section (COUNT_ANYTIME: also
 * after its code let go of its last hold, if the count says one is left) */
#ifdef COUNT_ANYTIME
#define HBK (bc >= 1 && !hfree && now <= BV)
#else
#define HBK (bc >= 1 && hn >= 1 && !hfree && now <= BV)
#endif

/* REENTER_VALID: the client re-enters only while it believes it holds */
#if defined(NO_NEST_CHECK)
#define HBSELF HBK
#elif defined(NO_COUNT_CHECK)
#define HBSELF HBD
#else
#define HBSELF (HBD && HBK)
#endif

/* scratch */
byte m; byte r; byte o; byte f; byte A; byte F; byte W; byte V; byte c; byte a; byte t;
byte lo0; byte lo1; byte lo2; byte hi0; byte hi1; byte hi2; byte ans; byte gone;

#define POP(b) (((b) & 1) + (((b) >> 1) & 1) + (((b) >> 2) & 1))
#define MAX2(x, y) ((x) > (y) -> (x) : (y))
#define MIN2(x, y) ((x) < (y) -> (x) : (y))
/* the second largest (the Q-th) of three values */
#define SEC3(x, y, z) MAX2(MAX2(MIN2(x, y), MIN2(x, z)), MIN2(y, z))
/* the Q-th largest of v(m) over the masters in set b (0 for a missing one) */
#define VB(b, i, v) ((b) & (1 << i) -> v[i] : 0)
#define SECOND(b, v) SEC3(VB(b, 0, v), VB(b, 1, v), VB(b, 2, v))

#ifdef TAGS
#define ADDHOLD(m, a)  kc[m] = kc[m] | (1 << (a))
#define NEWHOLD(m, a)  kc[m] = 1 << (a)
#define HOLDS(m)       POP(kc[m])
#else
#define ADDHOLD(m, a)  kc[m]++
#define NEWHOLD(m, a)  kc[m] = 1
#define HOLDS(m)       kc[m]
#endif
#ifdef FIN_GEN
#define DEL(m) kv[m] = 0; kc[m] = 0; kx[m] = 0; ka[m] = 0; kg[m] = 0
#define RAISEGEN(m) kg[m]++
#else
#define DEL(m) kv[m] = 0; kc[m] = 0; kx[m] = 0; ka[m] = 0
#define RAISEGEN(m) skip
#endif

/* H's acquire script for attempt a on master m with ttl t: r = 0 refused, 1 a free
 * key set, 2 a hold added to H's key */
inline h_script() {
  if
  :: kv[m] == 0 -> kv[m] = 1; NEWHOLD(m, a); kx[m] = now + t; ka[m] = a + 1; r = 1
  :: HKEY(m) ->
#ifdef OLD_REENTRY_TTL
       kx[m] = now + t;
#else
       if :: kx[m] < now + t -> kx[m] = now + t :: else -> skip fi;
#endif
       ADDHOLD(m, a); RAISEGEN(m); ka[m] = 0; r = 2
  :: else -> r = 0
  fi
}

/* a clean-up by attempt a's exact value, to the masters in set b (applied later, or
 * never) */
#define CLEANUP(b) \
  if :: (b) & 1 -> lc[0] = lc[0] | (1 << a) :: else -> skip fi; \
  if :: (b) & 2 -> lc[1] = lc[1] | (1 << a) :: else -> skip fi; \
  if :: (b) & 4 -> lc[2] = lc[2] | (1 << a) :: else -> skip fi

#ifdef EXTEND
byte nx;          /* extensions so far */
/* H's extension with the short ttl, by a nested hold's keeper */
inline h_extend() {
  c = 0;
  for (m : 0 .. N - 1) {
    if
    :: HKEY(m) ->
#ifdef OLD_EXTEND_SETS
       kx[m] = now + TSHORT;
#else
       if :: HOLDS(m) > 1 && kx[m] >= now + TSHORT -> skip
          :: else -> kx[m] = now + TSHORT fi;
#endif
       c++
    :: else -> skip
    fi
  };
  m = 0;
  printf("MSC: H extends (ttl %d) at %d: %d masters\n", TSHORT, now, c);
  /* its answer tells the innermost hold (and the count client: the latest answer) */
  if :: c >= Q -> HV[hn - 1] = now + TSHORT - 1; BV = now + TSHORT - 1 :: else -> skip fi;
  c = 0
}
#endif

/* H's acquire round, attempt a = na, with ttl t */
inline h_acquire() {
  a = na; na++;
  A = 0; F = 0; W = 0;
  for (m : 0 .. N - 1) {
    if
    :: true -> h_script();                                   /* counted */
       if :: r == 2 -> A = A | (1 << m) :: r == 1 -> F = F | (1 << m) :: else -> skip fi;
       if :: r == 2 -> printf("MSC:   m%d: a hold added (holds %d, expires at %d)\n", m, HOLDS(m), kx[m])
          :: r == 1 -> printf("MSC:   m%d: free: H's key set (holds %d, expires at %d)\n", m, HOLDS(m), kx[m])
          :: else -> printf("MSC:   m%d: refused\n", m) fi
#ifndef ACQ_RELIABLE
    :: true -> h_script();                                   /* applied, reply lost */
       if :: r != 0 -> W = W | (1 << m) :: else -> skip fi;
       printf("MSC:   m%d: applied (holds %d, expires at %d), its reply lost\n", m, HOLDS(m), kx[m])
    :: true -> printf("MSC:   m%d: lost\n", m)               /* lost */
#endif
    fi
  };
  m = 0; r = 0;
#if defined(TAGS) || defined(OLD_REENTRY_COUNT)
  /* granted by Q masters that added a hold or took a free key */
  A = A | F; F = 0;
  if :: !(POP(A) >= Q) -> CLEANUP(A | W) :: else -> skip fi;
#else
  if
  :: A != 0 ->
       /* a re-entry: the free keys it took go (their exact value), count for nothing */
       if :: F != 0 -> printf("MSC:   a re-entry: its free keys on %d deleted by their value\n", F)
          :: else -> skip fi;
       CLEANUP(F);
#ifdef ALL_N_REENTRY
       /* granted only when every master confirmed adding the hold; else 503, and the
        * hold it added is taken back ("one less") on exactly the masters that
        * confirmed adding it, never elsewhere (applied later, or never) */
       if
       :: POP(A) < N ->
            printf("MSC:   a re-entry confirmed on %d only, not all: one less sent there\n", A);
            if :: A & 1 -> lr[0]++ :: else -> skip fi;
            if :: A & 2 -> lr[1]++ :: else -> skip fi;
            if :: A & 4 -> lr[2]++ :: else -> skip fi;
            CLEANUP(W); A = 0
       :: else -> skip
       fi
#else
       if :: !(POP(A) >= Q) -> CLEANUP(W) :: else -> skip fi
#endif
  :: else ->
       A = F;                                  /* a first acquire */
       if :: !(POP(A) >= Q) -> CLEANUP(A | W) :: else -> skip fi
  fi;
  F = 0;
#endif
  if
  :: POP(A) >= Q ->
#ifdef OLD_REENTRY_TTL
       V = now + t - 1;
#else
       V = SECOND(A, kx) - 1;                  /* the lock's own validity */
#endif
#ifndef TAGS
       c = SECOND(A, kc);                      /* the count a quorum agrees on */
#else
       c = 0; hs[hn] = a;
#endif
       printf("MSC: H acquire %d (ttl %d) at %d: granted on %d, holds %d, validity to %d\n",
              a, t, now, A, c, V);
       HV[hn] = V; BV = V; bc = c; hn++
  :: else -> printf("MSC: H acquire %d (ttl %d) at %d: refused (503)\n", a, t, now)
  fi;
  A = 0; W = 0; V = 0; c = 0; a = 0; t = 0
}

/* H's release script on master m (one hold less; TAGS: tag a off): o = holds left,
 * f = it had H's key */
inline h_rel_script() {
  if
  :: HKEY(m) -> f = 1;
#ifdef TAGS
       kc[m] = kc[m] & ~(1 << a);
       if :: kc[m] == 0 -> DEL(m) :: else -> ka[m] = 0 fi;
#else
       if :: kc[m] > 1 -> kc[m]-- :: else -> DEL(m) fi;
#endif
       o = HOLDS(m)
  :: else -> f = 0; o = 0
  fi
}

/* the release's verdict from its answers (lo*, hi*: the holds left, a silent master
 * counting 0 or any number) */
inline h_judge() {
#ifdef TAGS
  if
  :: gone >= N - Q + 1 ->
       printf("MSC: H release at %d: %d masters answered the key gone: released\n", now, gone);
       assert(P_released_means_free && NH < Q);   /* (b) */
       hfree = 1
  :: else -> printf("MSC: H release at %d: not released (%d answered gone)\n", now, gone)
  fi;
#else
  if
  :: SEC3(lo0, lo1, lo2) == SEC3(hi0, hi1, hi2) && SEC3(lo0, lo1, lo2) == 0 ->
       printf("MSC: H release at %d: released (answered %d)\n", now, ans);
       assert(P_released_means_free && NH < Q);   /* (b) */
       hfree = 1; bc = 0
  :: SEC3(lo0, lo1, lo2) == SEC3(hi0, hi1, hi2) && SEC3(lo0, lo1, lo2) > 0 ->
       bc = SEC3(lo0, lo1, lo2);
       printf("MSC: H release at %d: released false, holds %d\n", now, bc)
  :: else ->
#ifdef UNCONFIRMED_LOST
       hfree = 1; bc = 0;                     /* the client stops: it believes nothing */
#else
       if :: bc > 0 -> bc-- :: else -> skip fi;
#endif
       printf("MSC: H release at %d: 503 release_unconfirmed (answered %d)\n", now, ans);
#ifdef ONE_503
       nunc = 1;
#endif
#if defined(FINISHER) && defined(FINISHER_WAIT)
       /* the finisher goes once the release's window has closed (FIRE) */
       printf("MSC:   the finisher of release %d (*%d) waits for its window\n", nrel, t - 1);
       ft[nrel] = t;
#ifdef FIN_NO_NONE
       if :: t == 0 -> ans = 7 :: else -> skip fi;   /* no finisher after no answer */
#endif
#ifdef FIN_LAST_ONLY
       if :: t >= 2 -> ans = 7 :: else -> skip fi;   /* holds kept: no finisher */
#endif
#ifdef FIN_GEN
       fg[nrel] = gg;
       /* no finisher where the answers name different generations, or none while
        * holds are to be kept (t - 1 > 0); a `*0` (the lease let go) checks none */
       if :: gg == GEN_SPLIT || (gg == GEN_UNSEEN && t >= 2) -> ans = 7
          :: else -> skip fi;
#endif
       if :: !(ans & 1) -> lw[0] = lw[0] | (1 << nrel) :: else -> skip fi;
       if :: !(ans & 2) -> lw[1] = lw[1] | (1 << nrel) :: else -> skip fi;
       if :: !(ans & 4) -> lw[2] = lw[2] | (1 << nrel) :: else -> skip fi;
#elif defined(FINISHER)
       /* `<lease>*<t>` to the masters that did not answer; t + 1 in bits, 0: t = -1 */
       printf("MSC:   the finisher sends *%d to the masters that did not answer\n", t - 1);
       if :: !(ans & 1) -> lt[0] = lt[0] | (1 << t) :: else -> skip fi;
       if :: !(ans & 2) -> lt[1] = lt[1] | (1 << t) :: else -> skip fi;
       if :: !(ans & 4) -> lt[2] = lt[2] | (1 << t) :: else -> skip fi;
#endif
       skip
  fi;
#endif
}

/* H lets go of its innermost hold */
inline h_release() {
#ifdef TAGS
  a = hs[hn - 1]; hs[hn - 1] = 0;
#endif
  ans = 0; gone = 0; c = 0; t = 0;
#ifdef FIN_GEN
  gg = GEN_UNSEEN;
#endif
  lo0 = 0; lo1 = 0; lo2 = 0; hi0 = INF; hi1 = INF; hi2 = INF;
  for (m : 0 .. N - 1) {
    if
    :: true -> h_rel_script(); ans = ans | (1 << m);         /* answered in time */
       printf("MSC:   m%d: answered, holds %d left\n", m, o);
       if :: o == 0 -> gone++ :: else -> skip fi;
       /* t: 1 + the most a master that had the key answered left */
       if :: f && o + 1 > t -> t = o + 1 :: else -> skip fi;
#ifdef FIN_GEN
       /* a key that keeps holds answers its generation (the service: its attempt tag) */
       if :: f && o > 0 && gg == GEN_UNSEEN -> gg = kg[m]
          :: f && o > 0 && gg != GEN_UNSEEN && gg != kg[m] -> gg = GEN_SPLIT
          :: else -> skip fi;
#endif
       if :: m == 0 -> lo0 = o; hi0 = o :: m == 1 -> lo1 = o; hi1 = o :: else -> lo2 = o; hi2 = o fi
#ifdef ONE_503
    :: nunc == 0 ->                                          /* not (yet) answered */
#else
    :: true ->                                               /* not (yet) answered */
#endif
#ifdef TAGS
       lr[m] = lr[m] | (1 << a);
#elif defined(FINISHER_WAIT)
       lf[m] = lf[m] | (1 << nrel);
#else
       lr[m]++;
#endif
       printf("MSC:   m%d: no answer (yet)\n", m)
    fi
  };
  m = 0; o = 0; f = 0;
  hn--; HV[hn] = 0;
#ifdef OLD_RELEASE_EARLY
  /* decided at the first Q answers, the others came later (or never): released when
   * fewer than Q of those count a hold */
  if
  :: POP(ans) == Q && SEC3(lo0, lo1, lo2) == 0 ->
       printf("MSC: H release at %d: the first two answers count no quorum: released\n", now);
       assert(P_released_means_free && NH < Q);   /* (b) */
       hfree = 1; bc = 0
  :: else -> h_judge()
  fi;
#else
  h_judge();
#endif
#ifdef FINISHER_WAIT
  nrel++;
#endif
  ans = 0; gone = 0; c = 0; t = 0; a = 0;
#ifdef FIN_GEN
  gg = 0;
#endif
  lo0 = 0; lo1 = 0; lo2 = 0; hi0 = 0; hi1 = 0; hi2 = 0
}

/* C's acquire round (ttl TLONG) */
inline c_acquire() {
  A = 0;
  for (m : 0 .. N - 1) {
    if
    :: kv[m] == 0 -> kv[m] = 2; kc[m] = 0; ka[m] = 0; kx[m] = now + TLONG; A = A | (1 << m);
       printf("MSC:   m%d: C's key set\n", m)
    :: else -> skip
    fi
  };
  m = 0;
  if
  :: POP(A) >= Q ->
       printf("MSC: C granted at %d (H's code nests %d holds, the count says %d, validity to %d)\n",
              now, hn, bc, BV);
#ifndef NO_NEST_CHECK
       assert(P_one_holder && !HBD);        /* (a) */
#endif
#ifndef NO_COUNT_CHECK
       assert(P_count_belief_true && !HBK); /* (c) */
#endif
       skip
  :: else -> skip
  fi;
  A = 0
}

/* a release request to mm that had not answered is applied now */
#ifdef TAGS
#define LATE(mm, aa) \
  :: atomic { lr[mm] & (1 << aa) -> lr[mm] = lr[mm] & ~(1 << aa); \
              printf("MSC: a late release (of attempt %d's hold) reaches m%d\n", aa, mm); \
              m = mm; a = aa; h_rel_script(); \
              printf("MSC:   m%d: holds %d left\n", mm, o); m = 0; a = 0; o = 0; f = 0 }
#else
#define LATE(mm) \
  :: atomic { lr[mm] > 0 -> lr[mm]--; \
              printf("MSC: a late release reaches m%d\n", mm); \
              m = mm; h_rel_script(); \
              printf("MSC:   m%d: holds %d left\n", mm, o); m = 0; o = 0; f = 0 }
#endif

/* attempt aa's clean-up by its exact value reaches mm */
#define LATECLEAN(mm, aa) \
  :: atomic { lc[mm] & (1 << aa) -> lc[mm] = lc[mm] & ~(1 << aa); \
              if \
              :: HKEY(mm) && ka[mm] == aa + 1 -> DEL(mm); \
                 printf("MSC: attempt %d's clean-up reaches m%d: its key deleted\n", aa, mm) \
              :: else -> printf("MSC: attempt %d's clean-up reaches m%d: not its value\n", aa, mm) \
              fi }

/* a finisher's `*t` (bit tt = t + 1) reaches mm: the holds lowered to t, at 0 the key
 * deleted; t = -1: a single hold (count 1) deleted, more left alone */
#define LATEFIN(mm, tt) \
  :: atomic { lt[mm] & (1 << tt) -> lt[mm] = lt[mm] & ~(1 << tt); \
              printf("MSC: the finisher's *%d reaches m%d\n", tt - 1, mm); \
              if \
              :: HKEY(mm) && tt == 0 && kc[mm] == 1 -> DEL(mm) \
              :: HKEY(mm) && tt == 1 -> DEL(mm) \
              :: HKEY(mm) && tt >= 2 && kc[mm] > tt - 1 -> kc[mm] = tt - 1 \
              :: else -> skip \
              fi; \
              printf("MSC:   m%d: holds %d left\n", mm, kc[mm]) }

#ifdef FINISHER_WAIT
/* release kk's request to mm, not yet applied, is applied now (within its window) */
#define LATEK(mm, kk) \
  :: atomic { lf[mm] & (1 << kk) -> lf[mm] = lf[mm] & ~(1 << kk); \
              printf("MSC: release %d's late request reaches m%d\n", kk, mm); \
              m = mm; h_rel_script(); \
              printf("MSC:   m%d: holds %d left\n", mm, o); m = 0; o = 0; f = 0 }
/* release kk's window has closed on mm (its request there can no longer run: the
 * script's PRELUDE refuses it), and only then its finisher's `*t` goes */
#ifdef FIN_GEN
/* (the releases of one lease are sent one after the other, so an earlier one's window
 * closes first: its request can no longer run either) */
#define FIRE(mm, kk) \
  :: atomic { lw[mm] & (1 << kk) -> lw[mm] = lw[mm] & ~(1 << kk); \
              lf[mm] = lf[mm] & ~((2 << kk) - 1); lk[mm] = lk[mm] | (1 << kk); \
              printf("MSC: release %d's window closed on m%d: its finisher sends *%d (generation %d)\n", kk, mm, ft[kk] - 1, fg[kk]) }
/* release kk's finisher reaches mm: as LATEFIN, only where the key is still of its
 * generation */
#define LATEFING(mm, kk) \
  :: atomic { lk[mm] & (1 << kk) -> lk[mm] = lk[mm] & ~(1 << kk); \
              printf("MSC: release %d's finisher *%d reaches m%d (generation %d there)\n", kk, ft[kk] - 1, mm, kg[mm]); \
              if \
              :: HKEY(mm) && ft[kk] == 0 && kc[mm] == 1 -> DEL(mm) \
              :: HKEY(mm) && ft[kk] == 1 -> DEL(mm) \
              :: HKEY(mm) && kg[mm] == fg[kk] && ft[kk] >= 2 && kc[mm] > ft[kk] - 1 -> kc[mm] = ft[kk] - 1 \
              :: else -> skip \
              fi; \
              printf("MSC:   m%d: holds %d left\n", mm, kc[mm]) }
#else
#define FIRE(mm, kk) \
  :: atomic { lw[mm] & (1 << kk) -> lw[mm] = lw[mm] & ~(1 << kk); \
              lf[mm] = lf[mm] & ~(1 << kk); lt[mm] = lt[mm] | (1 << ft[kk]); \
              printf("MSC: release %d's window closed on m%d: its finisher sends *%d\n", kk, mm, ft[kk] - 1) }
#endif
#endif

/* an expired key is cleared */
#define EXPIRE(mm) if :: kv[mm] != 0 && kx[mm] <= now -> DEL(mm) :: else -> skip fi

init {
  hgo = 1; cgo = 1;
  do
  /* H: its first acquire, re-entries, releases (innermost first) */
  :: atomic { hgo -> hgo = 0;
       if :: t = TSHORT :: t = TLONG fi;
       h_acquire();
       if :: hn == 0 -> hfree = 1 :: else -> skip fi }
#ifdef REENTER_VALID
  :: atomic { HBSELF && na <= MAXRE ->       /* only while it believes it holds */
#else
  :: atomic { hn >= 1 && !hfree && na <= MAXRE ->
#endif
       if :: t = TSHORT :: t = TLONG fi;
       h_acquire() }
  :: atomic { hn >= 1 && !hfree -> h_release() }
#ifdef EXTEND
  :: atomic { hn >= 2 && !hfree && nx == 0 -> nx = 1; h_extend() }
#endif
  /* C */
  :: atomic { cgo -> cgo = 0; c_acquire() }
  /* requests that come late */
#ifdef TAGS
  LATE(0, 0) LATE(1, 0) LATE(2, 0)
  LATE(0, 1) LATE(1, 1) LATE(2, 1)
#if MAXRE >= 2
  LATE(0, 2) LATE(1, 2) LATE(2, 2)
#endif
#else
  LATE(0) LATE(1) LATE(2)
  LATECLEAN(0, 0) LATECLEAN(1, 0) LATECLEAN(2, 0)
  LATECLEAN(0, 1) LATECLEAN(1, 1) LATECLEAN(2, 1)
#if MAXRE >= 2
  LATECLEAN(0, 2) LATECLEAN(1, 2) LATECLEAN(2, 2)
#endif
#ifdef FINISHER_WAIT
  LATEK(0, 0) LATEK(1, 0) LATEK(2, 0)
  LATEK(0, 1) LATEK(1, 1) LATEK(2, 1)
  FIRE(0, 0) FIRE(1, 0) FIRE(2, 0)
  FIRE(0, 1) FIRE(1, 1) FIRE(2, 1)
#if MAXRE >= 2
  LATEK(0, 2) LATEK(1, 2) LATEK(2, 2)
  FIRE(0, 2) FIRE(1, 2) FIRE(2, 2)
#endif
#endif
#if defined(FINISHER) && defined(FIN_GEN)
  LATEFING(0, 0) LATEFING(1, 0) LATEFING(2, 0)
  LATEFING(0, 1) LATEFING(1, 1) LATEFING(2, 1)
#if MAXRE >= 2
  LATEFING(0, 2) LATEFING(1, 2) LATEFING(2, 2)
#endif
#elif defined(FINISHER)
  LATEFIN(0, 0) LATEFIN(1, 0) LATEFIN(2, 0)
  LATEFIN(0, 1) LATEFIN(1, 1) LATEFIN(2, 1)
  LATEFIN(0, 2) LATEFIN(1, 2) LATEFIN(2, 2)
  LATEFIN(0, 3) LATEFIN(1, 3) LATEFIN(2, 3)
#if MAXRE >= 2
  LATEFIN(0, 4) LATEFIN(1, 4) LATEFIN(2, 4)
#endif
#endif
#endif
  /* time passes */
  :: atomic { now < TMAX -> now++; printf("MSC: tick %d\n", now);
       EXPIRE(0); EXPIRE(1); EXPIRE(2);
#ifndef NO_NEST_CHECK
       assert(P_key_outlives_validity && (!HBD || NH >= Q));   /* (a) */
#endif
#ifndef NO_COUNT_CHECK
       assert(P_count_belief_true && (!HBK || NH >= Q));       /* (c) */
#endif
       skip }
  od
}
