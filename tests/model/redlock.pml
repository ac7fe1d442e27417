/* redlock.pml -- a Promela model of redlockd's lock protocol: one name, N = 3
 * masters (quorum 2), two clients, each of whose first attempt may be retried once
 * with the same lease.  Checked exhaustively with spin by tests/model/check.sh
 * (`make test-model`); README.md in this folder says what is modelled, what is
 * abstracted away, and what each variant shows.
 *
 * Properties, asserted whenever an attempt's grant reaches its client:
 *   (a) no other client holds the name at that moment (a client holds from the
 *       grant until its validity ends or it releases);
 *   (b) the token is larger than every token delivered before.
 *
 * Rules: the NEW rules (/tmp/design-notes.md, issue 10) by default.  Amendments:
 *   ADOPT_FIX     a key adopted by a retry is marked as adopted; a failed
 *                 attempt's clean-up deletes only a key it set itself (its tag,
 *                 not adopted).  Without it: see README, "retry adoption".
 *   BOOT_FIX      an unmarked master joins without quarantine only while no master
 *                 carries a marker (a brand-new cluster); without it the rule is
 *                 "none shows floor > 0".  See README, "bootstrap".
 * Each switch below puts back one rule of today's service; -DOLD_RULES puts back
 * all of them:
 *   OLD_RESTART   a master that restarts with its marker is trusted at once (the
 *                 marker records no run id: no quarantine, no repair).
 *   OLD_WIPE      the marker is checked at (re)connect only, never by the scripts:
 *                 a FLUSHALL without a restart is not seen on a live connection.
 *   OLD_FRESH     bootstrap by time window: an unmarked master joins without
 *                 quarantine while another master still carries `#fresh`.
 *   OLD_REPAIR    the quarantine verdict lives in the instance, not on the master:
 *                 once `#quarantine` is gone, an instance that did not run the
 *                 repair (one started later) trusts the master, repaired or not.
 *   NO_TAGS       lock values carry the lease only: a failed attempt's clean-up
 *                 deletes the key wherever it holds the lease, also a key that a
 *                 retry with the same lease wrote or adopted.
 *   NO_FLOOR      no floor: a missing counter reads 0 (or base), and counters
 *                 expire (retention) as in the new rules.
 *   NO_CEXPIRE    counters never expire (today's service; with NO_FLOOR).
 *
 * Size knobs: MAXF faults per run (default 1), MAXZ freezes per run (default 1),
 * RETRY1 / RETRY2 (client 1 / client 2 may retry; neither by default), FINE (every
 * request a step of its own, see "Rounds").  ONLY_EXCL / ONLY_TOKENS check one
 * property only (to look for the other kind of counterexample).
 *
 * Faults, at most MAXF per run: a restart that loses everything, a restart that
 * keeps everything, a write that is acknowledged and then lost in a restart (the
 * AOF's last second), a wipe without restart (FLUSHALL).  Freezes, at most MAXZ:
 * a master takes an acquire but answers only later (the client counted it as
 * failed; the master applies it when it thaws, after other clients' requests, and
 * the attempt's clean-up request right after it).  Free of any budget: a request
 * may be lost, or applied with its reply lost; a client may stop holding at any
 * time; a retry may start whenever the first attempt has not answered.
 *
 * Time is abstract.  A lock key may expire at any moment at which no attempt that
 * wrote or refreshed it holds the lock through it (a holder's validity ends before
 * any key it wrote can expire); an attempt one of whose keys expired before it
 * decided is out of validity and fails.  A quarantine may end only once every key
 * written before the master forgot has expired on every master, every holder whose
 * attempt started before the forget has stopped, and every attempt started before it
 * is out of validity: the rule "delay >= max ttl".  Counters are not expired with
 * the floor in place: with one name that changes nothing (see ENV_CEXPIRE).
 *
 * Rounds: by default a round (the acquire, raise or clean-up requests of one
 * attempt to every master) is one atomic step, the outcome chosen per master; the
 * requests of a round reach the masters "together", and a freeze delays one of them
 * past other rounds.  -DFINE makes every request a step of its own, interleaved
 * with everything else (a larger search).
 *
 * Symmetries used to cut the search (both sound: the model treats masters alike,
 * and the clients alike when both or neither retry): the first fault hits m0, a
 * second one m0 or m1; when the clients are alike, C1 makes the first move.
 */

#define N 3
#define Q 2
#ifndef MAXF
#define MAXF 1
#endif
#ifndef MAXZ
#define MAXZ 1
#endif
#ifndef MAXT
#define MAXT 31           /* counters are bounded: an assertion guards it */
#endif
#define BIG 8             /* "+ 2^20": above every token the model can issue */

#ifdef OLD_RULES
#define OLD_RESTART
#define OLD_WIPE
#define OLD_FRESH
#define OLD_REPAIR
#define NO_TAGS
#define NO_FLOOR
#define NO_CEXPIRE
#endif

/* Attempts 1..4: 1 and 2 belong to client 1 (2 is its retry, same lease),
 * 3 and 4 to client 2.  The lease of an attempt is its client's number. */
#define NA 4
#define BIT(a)    (1 << ((a) - 1))
#define LEASE(a)  (((a) + 1) / 2)
#define OTHERS(a) (LEASE(a) == 1 -> 12 : 3)

/* ---- masters -------------------------------------------------------------- */
byte key[N];      /* lock key: 0 = none, else the attempt whose tag it carries     */
byte kw[N];       /* attempts (in flight or holding) that wrote/refreshed it      */
byte ke[N];       /* epoch of the key's last write                                */
bool ka[N];       /* ADOPT_FIX: the key was adopted by a retry                    */
byte F[N];        /* fencing counter of the name: 0 = missing                     */
byte flr[N];      /* P#master floor                                               */
byte base[N];     /* P#master base                                                */
bool mk[N];       /* marker present (P#master; #marker today)                     */
bool q[N];        /* P#master q: quarantined, repair pending                      */
byte mrun[N];     /* run id recorded in the marker                                */
byte rid[N];      /* the master process's current run id                          */
bool qt[N];       /* P#quarantine present                                         */
byte qep[N];      /* epoch of the forget that the quarantine covers               */
byte fep[N];      /* epoch of the master's last forget                            */
bool fresh[N];    /* OLD_FRESH: #fresh present                                    */

/* ---- the service's view of each master (the same for every instance) ------ */
byte conn[N];     /* run id the connection handshook with (!= rid: reconnect)     */
bool ok[N];       /* counted in quorums                                           */

/* ---- attempts ------------------------------------------------------------ */
#define P_IDLE   0    /* a retry not started                                      */
#define P_ROUND  1    /* started: its acquire round is to be sent                 */
#define P_RAISE  2    /* granted by a quorum with unequal E: raise round to send   */
#define P_HOLD   3    /* its client holds the name                                */
#define P_FAILED 4    /* failed: its clean-up round is to be sent                 */
#define P_DONE   5
#define P_R1     6    /* FINE: acquire round being sent                           */
#define P_R2     7    /* FINE: raise round being sent                             */
#define P_C      8    /* FINE: clean-up round being sent                          */
byte ph[NA + 1];      /* phase of each attempt                                    */
byte aT[NA + 1];      /* P_RAISE: the token                                       */
byte ahave[NA + 1];   /* P_RAISE: the masters known to hold E >= token            */
byte araise[NA + 1];  /* P_RAISE: the masters to raise                            */
#ifdef FINE
byte atodo[NA + 1];   /* FINE: the masters the current round has still to reach   */
byte agot[NA + 1];    /* FINE: round 1 so far: the granting masters               */
#endif
byte sep[NA + 1];     /* epoch at which the attempt started (while it matters)    */
byte HM;              /* attempts through which their client holds the name      */
byte IM;              /* attempts in flight (started, not decided)               */
byte DM;              /* attempts in flight that are out of validity             */
byte lis[3];          /* the attempt each client listens to                       */
bool delivered[NA + 1];
byte lastT;           /* the last token delivered to a client                     */
bool go2;             /* C1 has made its first step                               */

byte nf;          /* faults so far                                                */
byte epoch;       /* bumped at each forget                                        */

/* a frozen master holds one request (an acquire of attempt zA, and its clean-up if
 * zC) until it thaws; a restart (rid != zR) drops it */
byte zA; byte zM; byte zR; bool zC; byte nz;

/* scratch, always 0 between steps */
byte sk; byte skw; byte ske; bool ska; byte sF; byte sflr; byte sbase;
byte cur; byte cm; byte m; byte r; byte e; byte T; byte got; byte have; byte M; byte o;

#define CUR(m)  (F[m] != 0 -> F[m] : flr[m])
#define EFF(m)  (CUR(m) > base[m] -> CUR(m) : base[m])
#define CNT(m)  (EFF(m) > flr[m] -> EFF(m) : flr[m])

#ifdef OLD_WIPE
#define USABLE(m)  (conn[m] == rid[m] && ok[m])
/* a quarantined master is polled: an unmarked one is seen then */
#define NEEDHS(m)  (conn[m] != rid[m] || (!ok[m] && !mk[m]))
#else
/* every script reads P#master first: UNMARKED / QUARANTINED are errors, and the
 * instance runs the check at once */
#define USABLE(m)  (conn[m] == rid[m] && ok[m] && mk[m] && !q[m])
#define NEEDHS(m)  (conn[m] != rid[m] || !mk[m] || (ok[m] && q[m]))
#endif

/* a holder whose attempt started before epoch e */
#define OLDHOLD(e) (((HM & 1) && sep[1] < (e)) || ((HM & 2) && sep[2] < (e)) || \
                    ((HM & 4) && sep[3] < (e)) || ((HM & 8) && sep[4] < (e)))

/* The model is symmetric in the masters: the first fault may as well hit m0 and
 * a second one m0 or m1. */
#define FAULTOK(m) (nf < MAXF && (m) <= nf)

#define POP(x) (((x) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1))

/* ---- the scripts ------------------------------------------------------------ */

inline setF(m, v) {
  F[m] = v;
#ifndef NO_FLOOR
  if :: flr[m] < v -> flr[m] = v :: else -> skip fi;
#endif
  assert(v <= MAXT)
}

/* acquire on master m for attempt a: r = granted, e = E */
inline acquire(m, a) {
  if
  :: key[m] == 0 ->
       e = EFF(m) + 1; setF(m, e);
       key[m] = a; kw[m] = BIT(a) & (IM | HM); ke[m] = epoch; r = 1;
#ifdef ADOPT_FIX
       ka[m] = 0;
#endif
       skip
  :: key[m] != 0 && LEASE(key[m]) == LEASE(a) ->
       /* an idempotent retry (same lease): refresh the expiry, adopt the key */
#ifndef NO_TAGS
       key[m] = a;
#endif
       kw[m] = (kw[m] | BIT(a)) & (IM | HM); ke[m] = epoch; e = EFF(m); r = 1;
#ifdef ADOPT_FIX
       ka[m] = 1;
#endif
       skip
  :: else -> e = EFF(m); r = 0
  fi
}

inline raise(m, t) {
  if :: EFF(m) < t -> setF(m, t) :: else -> skip fi
}

/* the clean-up after a failed attempt (a release of what it wrote) */
inline cleanup(m, a) {
#ifdef NO_TAGS
  if :: key[m] != 0 && LEASE(key[m]) == LEASE(a) ->
#elif defined(ADOPT_FIX)
  if :: key[m] == a && !ka[m] ->
#else
  if :: key[m] == a ->
#endif
       printf("MSC:   clean-up of A%d deletes the key on m%d (tag A%d, lease C%d)\n",
              a, m, key[m], LEASE(key[m]));
       key[m] = 0; kw[m] = 0; ke[m] = 0; ka[m] = 0
     :: else -> skip
  fi
}

/* ---- faults ---------------------------------------------------------------- */

inline forget(m) {
  nf++; epoch++; fep[m] = epoch
}

inline erase(m) {
  key[m] = 0; kw[m] = 0; ke[m] = 0; ka[m] = 0; F[m] = 0; flr[m] = 0; base[m] = 0;
  mk[m] = 0; q[m] = 0; mrun[m] = 0; qt[m] = 0; fresh[m] = 0
}

/* a write that the master acknowledges and then loses: the state before the
 * script is put back after the reply, and the master restarts (marker kept) */
inline save(m) {
  sk = key[m]; skw = kw[m]; ske = ke[m]; ska = ka[m]; sF = F[m]; sflr = flr[m];
  sbase = base[m]
}
inline lose(m) {
  key[m] = sk; kw[m] = skw & (IM | HM); ke[m] = ske; ka[m] = ska; F[m] = sF; flr[m] = sflr;
  base[m] = sbase;
  forget(m); rid[m]++;
  printf("MSC:   FAULT m%d restarts and loses that write (the reply went out)\n", m)
}
inline unsave() {
  sk = 0; skw = 0; ske = 0; ska = 0; sF = 0; sflr = 0; sbase = 0
}

/* ---- lock keys expire ------------------------------------------------------
 * Lazily: a key that may have expired (none of its writers holds the lock through
 * it) may be found expired by the next request that reaches its master; that is
 * the only moment its presence matters.  Its writers still in flight are out of
 * validity from then on. */
#define EXPIRABLE(m) (key[m] != 0 && (kw[m] & HM) == 0)

inline expire_key(m) {
  printf("MSC: key on m%d (A%d) expires\n", m, key[m]);
  DM = DM | (kw[m] & IM);
  key[m] = 0; kw[m] = 0; ke[m] = 0; ka[m] = 0
}

inline maybe_expire(m) {
  if :: EXPIRABLE(m) -> expire_key(m) :: skip fi
}

/* ---- an attempt ------------------------------------------------------------ */

/* an attempt no longer in flight nor holding: forget it in the keys' masks */
inline retire(a) {
  kw[0] = kw[0] & ~BIT(a); kw[1] = kw[1] & ~BIT(a); kw[2] = kw[2] & ~BIT(a);
  sep[a] = 0; IM = IM & ~BIT(a); DM = DM & ~BIT(a)
}

/* the acquire of attempt a would be granted on master m (else it changes nothing) */
#define FREE(m, a) (key[m] == 0 || LEASE(key[m]) == LEASE(a))

/* the acquire request of attempt a to master m */
/* Outcome of one request: O_LOST (not applied, or no answer), O_OK (applied,
 * reply counted), O_NOREPLY (applied, reply lost), O_LOSTWRITE (applied, reply
 * counted, then the master restarts and loses the write: a fault), O_FROZEN (the
 * master holds it and applies it when it thaws: a freeze).  The choice is made
 * first; the effect is one deterministic step. */
#define O_LOST      0
#define O_OK        1
#define O_NOREPLY   2
#define O_LOSTWRITE 3
#define O_FROZEN    4

/* the acquire of attempt a would be granted on master m (else it changes nothing) */
#define FREE(m, a) (key[m] == 0 || LEASE(key[m]) == LEASE(a))

/* the acquire request of attempt a to master m */
inline req_acquire(m, a) {
  maybe_expire(m);
  if
  :: USABLE(m) -> o = O_OK
  :: USABLE(m) && FREE(m, a) -> o = O_NOREPLY
  :: USABLE(m) && FREE(m, a) && FAULTOK(m) -> o = O_LOSTWRITE
  :: USABLE(m) && zA == 0 && nz < MAXZ -> o = O_FROZEN
  :: !USABLE(m) || FREE(m, a) -> o = O_LOST
  fi;
  d_step {
    if
    :: o == O_OK || o == O_NOREPLY || o == O_LOSTWRITE ->
         save(m);
         acquire(m, a);
         if
         :: r && sk == 0 -> printf("MSC:   A%d acquire m%d: granted, E %d\n", a, m, e)
         :: r && sk != 0 ->
              printf("MSC:   A%d acquire m%d: granted, E %d: same lease, adopts the key of A%d\n",
                     a, m, e, sk)
         :: else -> printf("MSC:   A%d acquire m%d: taken by A%d, E %d\n", a, m, key[m], e)
         fi;
         if :: o == O_LOSTWRITE -> lose(m) :: else -> skip fi;
         unsave();
         if
         :: r && o != O_NOREPLY ->
              got = got | (1 << m);
              if
              :: e > T -> T = e; have = 1 << m
              :: e == T -> have = have | (1 << m)
              :: else -> skip
              fi
         :: r && o == O_NOREPLY -> printf("MSC:   (its reply is lost: counted as failed)\n")
         :: else -> skip
         fi
    :: o == O_FROZEN ->
         printf("MSC:   A%d acquire m%d: m%d is frozen, holds the request\n", a, m, m);
         nz++; zA = a; zM = m; zR = rid[m]
    :: else -> printf("MSC:   A%d acquire m%d: lost / no answer\n", a, m)
    fi;
    r = 0; e = 0; o = 0
  }
}

inline req_raise(m, a) {
  if
  :: (araise[a] & (1 << m)) && USABLE(m) -> o = O_OK
  :: (araise[a] & (1 << m)) && USABLE(m) -> o = O_NOREPLY
  :: (araise[a] & (1 << m)) && USABLE(m) && FAULTOK(m) && EFF(m) < aT[a] -> o = O_LOSTWRITE
  :: o = O_LOST
  fi;
  d_step {
    if
    :: o != O_LOST ->
         save(m);
         raise(m, aT[a]);
         printf("MSC:   A%d raise m%d to %d\n", a, m, aT[a]);
         if :: o == O_LOSTWRITE -> lose(m) :: else -> skip fi;
         unsave();
         if :: o != O_NOREPLY -> ahave[a] = ahave[a] | (1 << m)
            :: else -> printf("MSC:   (its reply is lost)\n")
         fi
    :: else -> skip
    fi;
    o = 0
  }
}

#ifdef NO_TAGS
#define MINE(m, a) (key[m] != 0 && LEASE(key[m]) == LEASE(a))
#elif defined(ADOPT_FIX)
#define MINE(m, a) (key[m] == a && !ka[m])
#else
#define MINE(m, a) (key[m] == a)
#endif

inline req_cleanup(m, a) {
  if
  :: zA == a && zM == m -> zC = 1       /* queued behind its frozen acquire */
  :: else ->
       if :: USABLE(m) -> o = O_OK :: USABLE(m) && MINE(m, a) -> o = O_LOST
          :: !USABLE(m) -> o = O_LOST fi;
       d_step { if :: o == O_OK -> cleanup(m, a) :: else -> skip fi; o = 0 }
  fi
}

inline grant(a, t) {
  if
  :: lis[LEASE(a)] == a ->
       printf("MSC: A%d GRANTED to client C%d, token %d\n", a, LEASE(a), t);
#ifndef ONLY_TOKENS
       assert((HM & OTHERS(a)) == 0);   /* (a) one holder at a time */
#endif
#ifndef ONLY_EXCL
       assert(t > lastT);               /* (b) tokens strictly increase */
#endif
       lastT = t;
       delivered[a] = 1;
       HM = HM | BIT(a); IM = IM & ~BIT(a); DM = DM & ~BIT(a);
       ph[a] = P_HOLD
  :: else ->
       printf("MSC: A%d granted, token %d, but C%d went on to its retry\n", a, t, LEASE(a));
       retire(a); ph[a] = P_DONE
  fi
}

inline fail(a) {
  printf("MSC: A%d fails\n", a);
  retire(a); ph[a] = P_FAILED
}

inline begin1(a) {
  printf("MSC: A%d acquire round (client C%d)\n", a, LEASE(a));
  sep[a] = epoch; IM = IM | BIT(a)
}

inline end1(a) {
  if
  :: POP(got) < Q || (DM & BIT(a)) -> fail(a)
  :: POP(got) >= Q && !(DM & BIT(a)) ->
       if
       :: POP(have) >= Q -> grant(a, T)
       :: else -> ph[a] = P_RAISE; aT[a] = T; ahave[a] = have; araise[a] = got & ~have
       fi
  fi;
  got = 0; have = 0; T = 0
}

inline end2(a) {
  if
  :: POP(ahave[a]) >= Q && !(DM & BIT(a)) -> grant(a, aT[a])
  :: else -> fail(a)
  fi;
  aT[a] = 0; ahave[a] = 0; araise[a] = 0
}

inline round1(a) {
  begin1(a);
  m = 0;
  do :: m < N -> req_acquire(m, a); m++ :: else -> break od;
  m = 0;
  end1(a)
}

inline round2(a) {
  printf("MSC: A%d raise round to %d\n", a, aT[a]);
  m = 0;
  do :: m < N -> req_raise(m, a); m++ :: else -> break od;
  m = 0;
  end2(a)
}

inline round3(a) {
  printf("MSC: A%d clean-up round\n", a);
  m = 0;
  do :: m < N -> req_cleanup(m, a); m++ :: else -> break od;
  m = 0;
  ph[a] = P_DONE
}

inline start(a) {
  printf("MSC: C%d retries with the same lease: A%d\n", LEASE(a), a);
  lis[LEASE(a)] = a; ph[a] = P_ROUND
}

/* the client stops holding: its validity ends, or it releases (a release deletes
 * keys that could as well expire from now on: expiry covers it) */
inline unhold(a) {
  printf("MSC: C%d stops holding (validity over, or released)\n", LEASE(a));
  HM = HM & ~BIT(a); retire(a); ph[a] = P_DONE
}

/* The two clients are symmetric when both may retry or neither may: the first
 * client to act may as well be C1, so C2 waits for C1's first step (go2). */
#if defined(RETRY1) == defined(RETRY2)
#define MAYGO(a) (LEASE(a) == 1 || go2)
#else
#define MAYGO(a) 1
#endif

/* One step of some attempt whose state satisfies C: the model's code exists once
 * (cur = the attempt), not once per attempt. */
#define ANY(C)  (C(1) || C(2) || C(3) || C(4))
#define PICK(C) if :: C(1) -> cur = 1 :: C(2) -> cur = 2 :: C(3) -> cur = 3 \
                   :: C(4) -> cur = 4 fi
#define STEP(C, body) :: atomic { ANY(C) -> PICK(C); body; cur = 0 }

#define C_ROUND(a)  (ph[a] == P_ROUND && MAYGO(a))
#define C_RAISE(a)  (ph[a] == P_RAISE)
#define C_HOLD(a)   (ph[a] == P_HOLD)
#define C_FAILED(a) (ph[a] == P_FAILED)

#ifndef FINE
#define ATTEMPTS \
  STEP(C_ROUND, go2 = 1; round1(cur)) \
  STEP(C_RAISE, round2(cur)) \
  STEP(C_HOLD, unhold(cur)) \
  STEP(C_FAILED, round3(cur))
#else
/* every request a step of its own: atodo = the masters still to send to, in any
 * order; round 1 accumulates into agot / ahave / aT */
inline pickm(t) {
  if :: (t & 1) -> m = 0 :: (t & 2) -> m = 1 :: (t & 4) -> m = 2 fi;
  t = t & ~(1 << m)
}
#define C_R1(a)     (ph[a] == P_R1 && atodo[a] != 0)
#define C_R1END(a)  (ph[a] == P_R1 && atodo[a] == 0)
#define C_R2(a)     (ph[a] == P_R2 && atodo[a] != 0)
#define C_R2END(a)  (ph[a] == P_R2 && atodo[a] == 0)
#define C_C(a)      (ph[a] == P_C && atodo[a] != 0)
#define C_CEND(a)   (ph[a] == P_C && atodo[a] == 0)
#define ATTEMPTS \
  STEP(C_ROUND, go2 = 1; begin1(cur); atodo[cur] = 7; ph[cur] = P_R1) \
  STEP(C_R1, pickm(atodo[cur]); got = agot[cur]; have = ahave[cur]; T = aT[cur]; \
             req_acquire(m, cur); agot[cur] = got; ahave[cur] = have; aT[cur] = T; \
             got = 0; have = 0; T = 0; m = 0) \
  STEP(C_R1END, got = agot[cur]; have = ahave[cur]; T = aT[cur]; \
                agot[cur] = 0; ahave[cur] = 0; aT[cur] = 0; end1(cur)) \
  STEP(C_RAISE, printf("MSC: A%d raise round to %d\n", cur, aT[cur]); \
                atodo[cur] = araise[cur]; ph[cur] = P_R2) \
  STEP(C_R2, pickm(atodo[cur]); req_raise(m, cur); m = 0) \
  STEP(C_R2END, end2(cur)) \
  STEP(C_HOLD, unhold(cur)) \
  STEP(C_FAILED, printf("MSC: A%d clean-up round\n", cur); atodo[cur] = 7; ph[cur] = P_C) \
  STEP(C_C, pickm(atodo[cur]); req_cleanup(m, cur); m = 0) \
  STEP(C_CEND, ph[cur] = P_DONE)
#endif

#define RETRY(a) \
  :: atomic { ph[a] == P_IDLE && !delivered[a - 1] && MAYGO(a) -> go2 = 1; start(a) }

/* ---- the environment: expiry, timers, faults, handshakes, repair ----------- */


inline quarantine_end(m) {
  printf("MSC: quarantine of m%d ends (every older key has expired)\n", m);
  qt[m] = 0;
  /* every key written before the master forgot is gone from every master */
  if :: key[0] != 0 && ke[0] < qep[m] -> expire_key(0) :: else -> skip fi;
  if :: key[1] != 0 && ke[1] < qep[m] -> expire_key(1) :: else -> skip fi;
  if :: key[2] != 0 && ke[2] < qep[m] -> expire_key(2) :: else -> skip fi;
  /* and every attempt started before it is out of validity */
  if :: (IM & 1) && sep[1] < qep[m] -> DM = DM | 1 :: else -> skip fi;
  if :: (IM & 2) && sep[2] < qep[m] -> DM = DM | 2 :: else -> skip fi;
  if :: (IM & 4) && sep[3] < qep[m] -> DM = DM | 4 :: else -> skip fi;
  if :: (IM & 8) && sep[4] < qep[m] -> DM = DM | 8 :: else -> skip fi;
  qep[m] = 0
}

inline quarantine_unmarked(m) {
  printf("MSC: m%d unmarked: quarantined\n", m);
  mk[m] = 1; mrun[m] = rid[m]; q[m] = 1;
  if :: !qt[m] -> qt[m] = 1; qep[m] = fep[m] :: else -> skip fi;
  ok[m] = 0
}

/* the marker check at (re)connect, or when a script answered UNMARKED/QUARANTINED */
inline handshake(m) {
  conn[m] = rid[m];
  if
  :: mk[m] ->
#ifdef OLD_RESTART
       mrun[m] = rid[m];        /* trusted at once */
#else
       if
       :: mrun[m] != rid[m] ->  /* restarted: may have lost acknowledged writes */
            q[m] = 1;
            if :: !qt[m] -> qt[m] = 1; qep[m] = fep[m] :: else -> skip fi
       :: else -> skip
       fi;
#endif
       ok[m] = !q[m] && !qt[m];
       printf("MSC: m%d handshake: marker present\n", m);
       if :: ok[m] -> printf("MSC:   ready\n") :: else -> printf("MSC:   quarantined\n") fi
  :: else ->
#ifdef OLD_FRESH
       if
       :: fresh[(m + 1) % N] || fresh[(m + 2) % N] ->
            printf("MSC: m%d unmarked, another master is #fresh: joins as new\n", m);
            mk[m] = 1; mrun[m] = rid[m]; q[m] = 0; fresh[m] = 1; ok[m] = 1
       :: else -> quarantine_unmarked(m)
       fi
#else
       /* a new cluster: every master answered, none ever granted (BOOT_FIX: none
        * carries a marker) */
       if
#ifdef BOOT_FIX
       :: !mk[0] && !mk[1] && !mk[2] ->
#else
       :: CNT(0) == 0 && CNT(1) == 0 && CNT(2) == 0 ->
#endif
            printf("MSC: m%d unmarked, no master ever granted: joins as new\n", m);
            mk[m] = 1; mrun[m] = rid[m]; q[m] = 0; ok[m] = 1
       :: else -> quarantine_unmarked(m)
       fi
#endif
  fi
}

/* the repair, once P#quarantine is gone: the floors of a quorum of ready peers
 * (with N = 3, both peers) */
inline repair(m, p1, p2) {
  M = (CNT(p1) > CNT(p2) -> CNT(p1) : CNT(p2));
  printf("MSC: m%d repaired from its peers: base %d\n", m, M);
  if :: base[m] < M -> base[m] = M :: else -> skip fi;
#ifndef NO_FLOOR
  if :: flr[m] < M -> flr[m] = M :: else -> skip fi;
#endif
  mrun[m] = rid[m]; q[m] = 0; ok[m] = 1;
  M = 0
}

inline thaw() {
  maybe_expire(zM);
  if
  :: rid[zM] == zR && USABLE(zM) ->
       printf("MSC: m%d thaws: applies A%d's acquire now\n", zM, zA);
       acquire(zM, zA);                      /* the reply goes nowhere */
       r = 0; e = 0;
       if :: zC -> cleanup(zM, zA) :: else -> skip fi
  :: else -> printf("MSC: m%d thaws: the request is dropped\n", zM)
  fi;
  zA = 0; zM = 0; zR = 0; zC = 0
}

#define CAN_REPAIR(m, p1, p2) \
  (mk[m] && q[m] && !qt[m] && conn[m] == rid[m] && USABLE(p1) && USABLE(p2))

/* fewer than a quorum of peers ready (for one more quarantine period): repair from
 * the one that is, base := its floor + 2^20 */
#define CAN_REPAIR1(m, p1, p2) \
  (mk[m] && q[m] && !qt[m] && conn[m] == rid[m] && (USABLE(p1) != USABLE(p2)))

inline repair1(m, p1, p2) {
  M = (USABLE(p1) -> CNT(p1) : CNT(p2)) + BIG;
  printf("MSC: m%d repaired from one peer: base %d\n", m, M);
  if :: base[m] < M -> base[m] = M :: else -> skip fi;
#ifndef NO_FLOOR
  if :: flr[m] < M -> flr[m] = M :: else -> skip fi;
#endif
  mrun[m] = rid[m]; q[m] = 0; ok[m] = 1;
  M = 0
}

/* One step of the environment on some master satisfying C (cm = the master). */
#define ANYM(C)  (C(0) || C(1) || C(2))
#define PICKM(C) if :: C(0) -> cm = 0 :: C(1) -> cm = 1 :: C(2) -> cm = 2 fi
#define MSTEP(C, body) :: atomic { ANYM(C) -> PICKM(C); body; cm = 0 }
#define P1(m) (((m) + 1) % N)
#define P2(m) (((m) + 2) % N)

#define C_FAULT(m)  FAULTOK(m)
#define C_KEEP(m)   (FAULTOK(m) && mk[m])
#define C_HS(m)     NEEDHS(m)
#define C_QEND(m)   (qt[m] && !OLDHOLD(qep[m]))
#define C_REP(m)    CAN_REPAIR(m, P1(m), P2(m))
#define C_REP1(m)   CAN_REPAIR1(m, P1(m), P2(m))

#ifdef OLD_REPAIR
#define C_OREP(m)   (mk[m] && q[m] && !qt[m] && conn[m] == rid[m])
#define ENV_OLD_REPAIR \
  MSTEP(C_OREP, printf("MSC: m%d: #quarantine gone, an instance trusts it unrepaired\n", cm); \
                mrun[cm] = rid[cm]; q[cm] = 0; ok[cm] = 1)
#else
#define ENV_OLD_REPAIR
#endif

/* With one name, an expired counter reads as the floor, which equals it (the floor
 * is raised with every write of the counter): the expiry changes nothing, unless
 * there is no floor. */
#if defined(NO_FLOOR) && !defined(NO_CEXPIRE)
#define C_CEXP(m)   (F[m] != 0)
#define ENV_CEXPIRE \
  MSTEP(C_CEXP, printf("MSC: counter on m%d expires\n", cm); F[cm] = 0)
#else
#define ENV_CEXPIRE
#endif

#ifdef OLD_FRESH
#define C_FRESH(m)  (fresh[m])
#define ENV_FRESH \
  MSTEP(C_FRESH, printf("MSC: #fresh on m%d expires\n", cm); fresh[cm] = 0)
#else
#define ENV_FRESH
#endif

#define ENV \
  ENV_CEXPIRE \
  MSTEP(C_FAULT, forget(cm); rid[cm]++; erase(cm); \
                 printf("MSC: FAULT m%d restarts empty\n", cm)) \
  MSTEP(C_KEEP, forget(cm); rid[cm]++; \
                printf("MSC: FAULT m%d restarts, data kept\n", cm)) \
  MSTEP(C_FAULT, forget(cm); erase(cm); \
                 printf("MSC: FAULT m%d wiped (FLUSHALL), no restart\n", cm)) \
  MSTEP(C_HS, handshake(cm)) \
  MSTEP(C_QEND, quarantine_end(cm)) \
  MSTEP(C_REP, repair(cm, P1(cm), P2(cm))) \
  MSTEP(C_REP1, repair1(cm, P1(cm), P2(cm))) \
  ENV_OLD_REPAIR \
  ENV_FRESH

init {
  atomic {
    for (m : 0 .. N - 1) {
      mk[m] = 1; rid[m] = 1; mrun[m] = 1; conn[m] = 1; ok[m] = 1;
#ifdef OLD_FRESH
      fresh[m] = 1;
#endif
    }
    m = 0;
    lis[1] = 1; lis[2] = 3;
    ph[1] = P_ROUND; ph[3] = P_ROUND;
    ph[2] = P_IDLE; ph[4] = P_IDLE;
#ifndef RETRY1
    ph[2] = P_DONE;
#endif
#ifndef RETRY2
    ph[4] = P_DONE;
#endif
    skip
  };
end:
  do
  ATTEMPTS
  RETRY(2)
  RETRY(4)
  :: atomic { zA != 0 -> thaw() }
  ENV
  od
}
