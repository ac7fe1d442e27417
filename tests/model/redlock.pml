/* redlock.pml -- a Promela model of redlockd's lock protocol and master trust: one
 * name, N = 3 masters (quorum 2), two service instances with their own view of each
 * master, two clients, each of whose first attempt may be retried once with the same
 * lease.  Checked exhaustively with spin by tests/model/check.sh (`make test-model`);
 * README.md in this folder says what is modelled, what is abstracted away, and what
 * each variant shows.  (reentrant.pml and shared.pml model the lock kinds of issue 22.)
 *
 * Properties, asserted whenever an attempt's grant reaches its client:
 *   (a) no other client holds the name at that moment (a client holds from the
 *       grant until its validity ends or it releases);
 *   (b) the token is larger than every token delivered before.
 *
 * Rules: the master-trust rules of issue 21 (R-proof, R-repair, R-fallback; notes
 * RULES21.md, docs/DESIGN.md section 4) on top of the rules of issue 10, by default.
 * Amendments of issue 10 that the service runs (`make test-model` passes both):
 *   ADOPT_FIX     a key adopted by a retry is marked as adopted; a failed
 *                 attempt's clean-up deletes only a key it set itself (its tag,
 *                 not adopted).  Without it: see README, "retry adoption".
 *   BOOT_FIX      an unmarked master joins without quarantine only while no master
 *                 carries a marker (a brand-new cluster); without it the rule is
 *                 "none shows a counter > 0".  See README, "bootstrap".
 * Each switch below puts back one rule of an earlier build.
 * The rules of the build before issue 21 (ed2a291), findings 1-3 of issue 21:
 *   OLD_PROOF_VIEW       the repair counts a peer from the repairing instance's own
 *                        view (ready), and reads its counter without checking `q`,
 *                        `lost` or the run id (finding 1).
 *   OLD_PROOF_INTEGRITY  the peer read checks that the record exists, not that it is
 *                        intact (HLEN >= nb + fixed fields): finding 2.
 *   OLD_GAP              the fallback fires when fewer than Q peers are ready in the
 *                        instance's view: base := max over the masters that answer +
 *                        OLDGAP (default 1; 2^20 in the service): finding 3.
 *   OLD_21               all three, with the gap of the service (BIG): ed2a291.
 * R-delay and R-late (-DRDELAY): while a master is quarantined, a proof round in
 * which a quorum of peers prove themselves lowers its quarantine to the life of
 * their P#expiry (a key every lock-key write keeps alive as long as the key); a reply
 * read after its round's deadline does not count.
 *   OLD_LATE             R-delay without R-late: a reply read after the round's
 *                        deadline still counts (with -DFINE).
 * The rules of the build before issue 10 (-DOLD_RULES: all of them):
 *   OLD_RESTART   a master that restarts with its marker is trusted at once (the
 *                 marker records no run id: no quarantine, no repair).
 *   OLD_WIPE      the marker is checked at (re)connect only, never by the scripts:
 *                 a FLUSHALL without a restart is not seen on a live connection.
 *   OLD_FRESH     bootstrap by time window: an unmarked master joins without
 *                 quarantine while another master still carries `#fresh`.
 *   OLD_REPAIR    the quarantine verdict lives in the instance, not on the master:
 *                 once `#quarantine` is gone, an instance trusts the master,
 *                 repaired or not.
 *   NO_TAGS       lock values carry the lease only: a failed attempt's clean-up
 *                 deletes the key wherever it holds the lease, also a key that a
 *                 retry with the same lease wrote or adopted.
 *   NO_FLOOR      counters expire (retention) and nothing keeps their value: an
 *                 expired counter reads 0 (or base).
 *   NO_CEXPIRE    counters never expire (with NO_FLOOR: the build before issue 10).
 *
 * Size knobs: MAXF faults per run (default 1), MAXZ freezes per run (default 1),
 * RETRY1 / RETRY2 (client 1 / client 2 may retry; neither by default), FINE (every
 * request a step of its own, see "Rounds"; FINE_ACQ: the acquire requests only), VIEW_DOWN (an instance may mark a
 * master down at any time: a request timed out; off by default, as the rules of
 * issue 21 never read the view to decide trust), VIEWS (the views kept, stale, but
 * never marked down), NO_DAMAGE (no deleted counters), FAULTS (the kinds of fault
 * a run may have, a mask: 1 a restart that loses everything, 2 a restart that keeps
 * it, 4 a wipe, 8 a deleted counter, 16 a lost write; default 31: all of them).
 * ONLY_EXCL / ONLY_TOKENS check one property only.
 *
 * Faults, at most MAXF per run: a restart that loses everything, a restart that
 * keeps everything, a write that is acknowledged and then lost in a restart (the
 * AOF's last second), a wipe without restart (FLUSHALL), a counter deleted by hand
 * (a damaged record).  Freezes, at most MAXZ: a master takes an acquire but answers
 * only later (the client counted it as failed; the master applies it when it thaws,
 * after other clients' requests, and the attempt's clean-up request right after it).
 * Free of any budget: a request may be lost, or applied with its reply lost (so a
 * master may be down for a while, or lag: miss grants and come back without a
 * restart, its counter behind); a client may stop holding at any time; a retry may
 * start whenever the first attempt has not answered.
 *
 * Instances: attempts 1 and 4 run on instance X, 2 and 3 on Y (so each client's
 * retry goes to the other instance).  Each instance has its own connection (the run
 * id it handshook with) and its own view of each master (ready or not); it learns
 * that a master changed only when it talks to it (a script refuses, a reconnect, a
 * poll of a master it holds quarantined), which it may do at any time or never.
 *
 * Time is abstract.  A lock key may expire at any moment at which no attempt that
 * wrote or refreshed it holds the lock through it (a holder's validity ends before
 * any key it wrote can expire); an attempt one of whose keys expired before it
 * decided is out of validity and fails.  A quarantine may end only once every key
 * written before the master forgot has expired on every master, every holder whose
 * attempt started before the forget has stopped, and every attempt started before it
 * is out of validity: the rule "delay >= max ttl".
 *
 * Rounds: by default a round (the acquire, raise or clean-up requests of one
 * attempt to every master) is one atomic step, the outcome chosen per master; the
 * requests of a round reach the masters "together", and a freeze delays one of them
 * past other rounds.  -DFINE makes every request a step of its own, interleaved
 * with everything else (a larger search).  A repair (its proof round and its write
 * on the master) is one atomic step.
 *
 * Symmetries used to cut the search (sound: the model treats masters alike, and the
 * clients alike, with their instances, when both or neither retry): the first fault
 * hits m0, a second one m0 or m1; when the clients are alike, C1 makes the first move.
 */

#define N 3
#define Q 2
#define NI 2              /* service instances: X (0) and Y (1)                    */
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
#ifdef FINE_ACQ
#ifndef FINE
#define FINE
#endif
#endif
#ifndef GAP
#define GAP MAXF          /* R-fallback's G: at least the bumps a run can lose (one
                             per fault: a lost write loses one script's write) */
#endif

#ifdef OLD_RULES
#define OLD_RESTART
#define OLD_WIPE
#define OLD_FRESH
#define OLD_REPAIR
#define NO_TAGS
#define NO_FLOOR
#define NO_CEXPIRE
#endif

#ifdef OLD_21
#define OLD_PROOF_VIEW
#define OLD_PROOF_INTEGRITY
#define OLD_GAP
#ifndef OLDGAP
#define OLDGAP BIG
#endif
#endif
#ifndef OLDGAP
#define OLDGAP 1
#endif

/* Attempts 1..4: 1 and 2 belong to client 1 (2 is its retry, same lease),
 * 3 and 4 to client 2.  The lease of an attempt is its client's number. */
#define NA 4
#define BIT(a)    (1 << ((a) - 1))
#define LEASE(a)  (((a) + 1) / 2)
#define OTHERS(a) (LEASE(a) == 1 -> 12 : 3)
#define INST(a)   ((a) == 1 || (a) == 4 -> 0 : 1)

/* ---- masters -------------------------------------------------------------- */
byte key[N];      /* lock key: 0 = none, else the attempt whose tag it carries     */
byte kw[N];       /* attempts (in flight or holding) that wrote/refreshed it      */
byte ke[N];       /* epoch of the key's last write                                */
bool ka[N];       /* ADOPT_FIX: the key was adopted by a retry                    */
byte F[N];        /* the name's bucket counter b<k> in P#master: 0 = missing       */
byte base[N];     /* P#master base                                                */
bool mk[N];       /* P#master present (the marker)                                */
bool q[N];        /* P#master q: quarantined, repair pending                      */
bool lost[N];     /* P#master lost: recreated after the master lost it (no history)*/
bool dmg[N];      /* P#master damaged: a counter deleted (HLEN < nb + fixed)      */
byte mrun[N];     /* run id recorded in P#master                                  */
byte rid[N];      /* the master process's current run id                          */
bool qt[N];       /* P#quarantine present                                         */
byte qep[N];      /* epoch of the forget that the quarantine covers               */
byte fep[N];      /* epoch of the master's last forget                            */
bool fresh[N];    /* OLD_FRESH: #fresh present                                    */
#ifdef RDELAY
byte pex[N];      /* P#expiry: the attempts whose key writes on m it outlives     */
bool qs[N];       /* a proof round lowered P#quarantine (R-delay) ...             */
byte qU[N];       /* ... to the life of P#expiry read then: these attempts' keys  */
byte LM;          /* R-late: attempts whose acquire replies no longer count        */
#endif

/* ---- each instance's view of each master: index IX(i, m) ------------------ */
#define IX(i, m) ((i) * N + (m))
byte conn[NI * N];  /* run id the connection handshook with (!= rid: reconnect)   */
/* The view (ready or not, down) is a state of the model only where a rule reads
 * it (VIEWS: the old rules, and -DVIEW_DOWN).  The rules of issue 21 never do: an
 * instance sends to every master it is connected to and the script decides (a
 * request a stale view withholds is a request lost, which the model has anyway). */
#if defined(OLD_WIPE) || defined(OLD_REPAIR) || defined(OLD_PROOF_VIEW) || \
    defined(OLD_GAP) || defined(VIEW_DOWN)
#ifndef VIEWS
#define VIEWS
#endif
#endif
#ifdef VIEWS
bool ok[NI * N];    /* counted in quorums (ready)                                 */
bool dn[NI * N];    /* VIEW_DOWN: marked down (a request timed out)               */
#define OK(i, m)       ok[IX(i, m)]
#define DN(i, m)       dn[IX(i, m)]
#define SETOK(i, m, v) ok[IX(i, m)] = (v)
#define SETDN(i, m, v) dn[IX(i, m)] = (v)
#else
#define OK(i, m)       (!q[m] && !qt[m])
#define DN(i, m)       0
#define SETOK(i, m, v) skip
#define SETDN(i, m, v) skip
#endif

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
byte sk; byte skw; byte ske; bool ska; byte sF; byte sbase;
byte cur; byte cm; byte ci; byte m; byte r; byte e; byte T; byte got; byte have;
byte M; byte o;

/* the effective counter E = max(b_k, base) */
#define EFF(m)  (F[m] > base[m] -> F[m] : base[m])

#define CONN(i, m)  (conn[IX(i, m)] == rid[m])
#ifdef OLD_WIPE
/* scripts do not read P#master */
#define SCRIPTOK(m) 1
#define USABLE(i, m) (CONN(i, m) && OK(i, m))
/* a master not ready is polled: an unmarked one is seen then, a trusted one too */
#define NEEDHS(i, m) (!CONN(i, m) || DN(i, m) || \
                      (!OK(i, m) && (!mk[m] || (!q[m] && !qt[m]))))
#else
/* every script reads P#master first: missing or damaged (UNMARKED) or `q`
 * (QUARANTINED) is an error, and the instance runs the marker check at once */
#define SCRIPTOK(m) (mk[m] && !q[m] && !dmg[m])
#define USABLE(i, m) (CONN(i, m) && OK(i, m) && SCRIPTOK(m))
/* the check runs at a reconnect, after a refusal, and when an instance polls a
 * master it holds out: whenever its view differs from what the check would say */
#ifdef VIEWS
#define NEEDHS(i, m) (!CONN(i, m) || DN(i, m) || !mk[m] || dmg[m] || \
                      OK(i, m) != (!q[m] && !qt[m]))
#else
#define NEEDHS(i, m) (!CONN(i, m) || !mk[m] || dmg[m])
#endif
#endif

/* a holder whose attempt started before epoch e */
#define OLDHOLD(e) (((HM & 1) && sep[1] < (e)) || ((HM & 2) && sep[2] < (e)) || \
                    ((HM & 4) && sep[3] < (e)) || ((HM & 8) && sep[4] < (e)))

/* The model is symmetric in the masters: the first fault may as well hit m0 and
 * a second one m0 or m1. */
#define FAULTOK(m) (nf < MAXF && (m) <= nf)
#ifndef FAULTS
#define FAULTS 31
#endif
#define FK(k) ((FAULTS & (k)) != 0)

#define POP(x) (((x) & 1) + (((x) >> 1) & 1) + (((x) >> 2) & 1))
#define P1(m) (((m) + 1) % N)     /* the two peers of m */
#define P2(m) (((m) + 2) % N)

/* ---- the scripts ------------------------------------------------------------ */

inline setF(m, v) {
  F[m] = v;
  assert(v <= MAXT)
}

#ifdef RDELAY
/* R-delay: every script that writes a lock key keeps P#expiry alive as long */
#define PEXW(m, a) pex[m] = (pex[m] | BIT(a)) & (IM | HM)
#else
#define PEXW(m, a) skip
#endif

/* acquire on master m for attempt a: r = granted, e = E */
inline acquire(m, a) {
  if
  :: key[m] == 0 ->
       e = EFF(m) + 1; setF(m, e);
       key[m] = a; kw[m] = BIT(a) & (IM | HM); ke[m] = epoch; r = 1;
       PEXW(m, a);
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
       PEXW(m, a);
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
#ifdef RDELAY
  pex[m] = 0; qs[m] = 0; qU[m] = 0;
#endif
  key[m] = 0; kw[m] = 0; ke[m] = 0; ka[m] = 0; F[m] = 0; base[m] = 0;
  mk[m] = 0; q[m] = 0; lost[m] = 0; dmg[m] = 0; mrun[m] = 0; qt[m] = 0; fresh[m] = 0
}

/* a write that the master acknowledges and then loses: the state before the
 * script is put back after the reply, and the master restarts (marker kept) */
#ifdef RDELAY
byte spex;
#define SAVEPEX(m) spex = pex[m]
#define LOSEPEX(m) pex[m] = spex & (IM | HM)
#define UNSAVEPEX  spex = 0
#else
#define SAVEPEX(m) skip
#define LOSEPEX(m) skip
#define UNSAVEPEX  skip
#endif
inline save(m) {
  SAVEPEX(m);
  sk = key[m]; skw = kw[m]; ske = ke[m]; ska = ka[m]; sF = F[m]; sbase = base[m]
}
inline lose(m) {
  key[m] = sk; kw[m] = skw & (IM | HM); ke[m] = ske; ka[m] = ska; F[m] = sF;
  base[m] = sbase; LOSEPEX(m);
  forget(m); rid[m]++;
  printf("MSC:   FAULT m%d restarts and loses that write (the reply went out)\n", m)
}
inline unsave() {
  UNSAVEPEX;
  sk = 0; skw = 0; ske = 0; ska = 0; sF = 0; sbase = 0
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
#ifdef RDELAY
  pex[0] = pex[0] & ~BIT(a); pex[1] = pex[1] & ~BIT(a); pex[2] = pex[2] & ~BIT(a);
  qU[0] = qU[0] & ~BIT(a); qU[1] = qU[1] & ~BIT(a); qU[2] = qU[2] & ~BIT(a);
  LM = LM & ~BIT(a);
#endif
  sep[a] = 0; IM = IM & ~BIT(a); DM = DM & ~BIT(a)
}

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
#ifdef RDELAY
#define LATE(a) (LM & BIT(a))
#else
#define LATE(a) 0
#endif

inline req_acquire(m, a) {
  maybe_expire(m);
  if
  :: USABLE(INST(a), m) && !LATE(a) -> o = O_OK
  :: USABLE(INST(a), m) && FREE(m, a) -> o = O_NOREPLY
  :: USABLE(INST(a), m) && FREE(m, a) && FK(16) && FAULTOK(m) && !LATE(a) -> o = O_LOSTWRITE
  :: USABLE(INST(a), m) && zA == 0 && nz < MAXZ -> o = O_FROZEN
  :: !USABLE(INST(a), m) || FREE(m, a) -> o = O_LOST
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
         :: r && o == O_NOREPLY && !LATE(a) -> printf("MSC:   (its reply is lost: counted as failed)\n")
         :: r && o == O_NOREPLY && LATE(a) -> printf("MSC:   (its reply comes after the round's deadline: not counted)\n")
         :: else -> skip
         fi
    :: o == O_FROZEN ->
         printf("MSC:   A%d acquire m%d: m%d is frozen, holds the request\n", a, m, m);
         nz++; zA = a; zM = m; zR = rid[m]
    :: else -> printf("MSC:   A%d acquire m%d: lost / no answer / refused\n", a, m)
    fi;
    r = 0; e = 0; o = 0
  }
}

inline req_raise(m, a) {
  if
  :: (araise[a] & (1 << m)) && USABLE(INST(a), m) -> o = O_OK
  :: (araise[a] & (1 << m)) && USABLE(INST(a), m) -> o = O_NOREPLY
  :: (araise[a] & (1 << m)) && USABLE(INST(a), m) && FK(16) && FAULTOK(m) && EFF(m) < aT[a] ->
       o = O_LOSTWRITE
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
       if :: USABLE(INST(a), m) -> o = O_OK
          :: USABLE(INST(a), m) && MINE(m, a) -> o = O_LOST
          :: !USABLE(INST(a), m) -> o = O_LOST fi;
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
  printf("MSC: A%d acquire round (client C%d, through instance %c)\n", a, LEASE(a),
         88 + INST(a));
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
  ATTEMPTS_23
#ifdef FINE_ACQ
/* only the acquire requests are steps of their own; raise and clean-up rounds are
 * atomic as by default */
#define ATTEMPTS_23 \
  STEP(C_RAISE, round2(cur)) \
  STEP(C_HOLD, unhold(cur)) \
  STEP(C_FAILED, round3(cur))
#else
#define ATTEMPTS_23 \
  STEP(C_RAISE, printf("MSC: A%d raise round to %d\n", cur, aT[cur]); \
                atodo[cur] = araise[cur]; ph[cur] = P_R2) \
  STEP(C_R2, pickm(atodo[cur]); req_raise(m, cur); m = 0) \
  STEP(C_R2END, end2(cur)) \
  STEP(C_HOLD, unhold(cur)) \
  STEP(C_FAILED, printf("MSC: A%d clean-up round\n", cur); atodo[cur] = 7; ph[cur] = P_C) \
  STEP(C_C, pickm(atodo[cur]); req_cleanup(m, cur); m = 0) \
  STEP(C_CEND, ph[cur] = P_DONE)
#endif
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
  qep[m] = 0;
#ifdef RDELAY
  qs[m] = 0; qU[m] = 0;
#endif
  skip
}

#ifdef RDELAY
/* R-delay: once an instance has seen m quarantined for node_timeout (1 + drift) + a
 * margin, a proof round in which both peers prove themselves lowers m's
 * P#quarantine to the largest PTTL of their P#expiry: the quarantine may then end
 * as soon as every attempt whose key P#expiry covered then is over (no longer
 * holding; out of validity if still in flight).  R-late: by then every round that
 * started before m forgot is past its deadline: a reply it reads from now on does
 * not count (OLD_LATE: it still does).  One such proof per quarantine: a later one
 * reads P#expiry no shorter (its keys outlive the first one's). */
#define C_DELAY(i, m) (mk[m] && q[m] && qt[m] && !qs[m] && !dmg[m] && CONN(i, m) && \
                       PROVEN(P1(m)) && PROVEN(P2(m)))
#define LATEBIT(a, m) ((IM & BIT(a)) && sep[a] < qep[m] && ph[a] == P_R1 -> BIT(a) : 0)
inline delay_proof(i, m) {
  qs[m] = 1; qU[m] = (pex[P1(m)] | pex[P2(m)]) & (IM | HM);
  printf("MSC: %c: m%d's peers proven: its quarantine is lowered to their P#expiry (attempts %d)\n",
         88 + i, m, qU[m]);
#ifndef OLD_LATE
  LM = LM | LATEBIT(1, m) | LATEBIT(2, m) | LATEBIT(3, m) | LATEBIT(4, m);
#endif
  skip
}
#define C_QSHORT(m) (qt[m] && qs[m] && (qU[m] & HM) == 0)
inline quarantine_short_end(m) {
  printf("MSC: lowered quarantine of m%d ends (the attempts P#expiry covered are over)\n", m);
  qt[m] = 0; DM = DM | (qU[m] & IM); qs[m] = 0; qU[m] = 0; qep[m] = 0
}
#define ENV_DELAY \
  ISTEP(C_DELAY, delay_proof(ci, cm)) \
  MSTEP(C_QSHORT, quarantine_short_end(cm))
#else
#define ENV_DELAY
#endif

/* Rule 3: a master without its record (wiped, restarted empty) or with a damaged
 * one, while another master carries a record: the record is written anew with `q`
 * and `lost` (no history: its counters are gone), and the quarantine starts */
inline quarantine_unmarked(i, m) {
  if :: mk[m] -> printf("MSC: %c: m%d's record is damaged: written anew, quarantined (lost)\n", 88 + i, m)
     :: else -> printf("MSC: %c: m%d unmarked: quarantined (lost)\n", 88 + i, m)
  fi;
  mk[m] = 1; mrun[m] = rid[m]; q[m] = 1; lost[m] = 1; dmg[m] = 0; F[m] = 0; base[m] = 0;
  if :: !qt[m] -> qt[m] = 1; qep[m] = fep[m] :: else -> skip fi;
  SETOK(i, m, 0)
}

inline join_new(i, m) {
  mk[m] = 1; mrun[m] = rid[m]; q[m] = 0; lost[m] = 0; dmg[m] = 0; SETOK(i, m, 1)
}

/* the marker check of instance i on master m: at every (re)connect, after a script
 * answered UNMARKED / QUARANTINED, and when it polls a master it holds out */
inline handshake(i, m) {
  conn[IX(i, m)] = rid[m]; SETDN(i, m, 0);
  if
  :: mk[m] && !dmg[m] ->
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
       SETOK(i, m, !q[m] && !qt[m]);
       if :: !q[m] && !qt[m] -> printf("MSC: %c: m%d checked: ready\n", 88 + i, m)
          :: else -> printf("MSC: %c: m%d checked: quarantined\n", 88 + i, m)
       fi
  :: else ->
#ifdef OLD_FRESH
       if
       :: fresh[(m + 1) % N] || fresh[(m + 2) % N] ->
            printf("MSC: %c: m%d unmarked, another master is #fresh: joins as new\n", 88 + i, m);
            join_new(i, m); fresh[m] = 1
       :: else -> quarantine_unmarked(i, m)
       fi
#else
       /* a new cluster: every master answered, none ever granted (BOOT_FIX: none
        * carries a record) */
       if
#ifdef BOOT_FIX
       :: !mk[0] && !mk[1] && !mk[2] ->
#else
       :: EFF(0) == 0 && EFF(1) == 0 && EFF(2) == 0 ->
#endif
            printf("MSC: %c: m%d unmarked, no master ever granted: joins as new\n", 88 + i, m);
            join_new(i, m)
       :: else -> quarantine_unmarked(i, m)
       fi
#endif
  fi
}

/* ---- the repair (R-proof, R-repair, R-fallback) ------------------------------
 * SCRIPT_PROOF on a peer p, atomically on p: proven iff the record is present,
 * intact, carries neither `q` nor `lost`, and records the run id p reports now.
 * HIST(p): an intact record with history (proven, or quarantined without `lost`). */
#define PROVEN(p) (mk[p] && !dmg[p] && !q[p] && !lost[p] && mrun[p] == rid[p])
#define HIST(p)   (mk[p] && !dmg[p] && !lost[p])

/* the peers a repair by instance i counts */
#if defined(OLD_PROOF_VIEW) && defined(OLD_PROOF_INTEGRITY)
#define PEER(i, p) (OK(i, p) && CONN(i, p) && mk[p])
#elif defined(OLD_PROOF_VIEW)
#define PEER(i, p) (OK(i, p) && CONN(i, p) && mk[p] && !dmg[p])
#elif defined(OLD_PROOF_INTEGRITY)
#define PEER(i, p) (mk[p] && !q[p] && !lost[p] && mrun[p] == rid[p])
#else
#define PEER(i, p) PROVEN(p)
#endif

/* instance i may repair m: m's record (present, intact) carries `q`, its quarantine
 * is over, and i's connection to m is to the current process */
#define REPAIRABLE(i, m) (mk[m] && q[m] && !qt[m] && !dmg[m] && CONN(i, m))

/* R-repair: with N = 3 a quorum of peers is both peers */
#define C_REP(i, m) (REPAIRABLE(i, m) && PEER(i, P1(m)) && PEER(i, P2(m)))

/* the write on m, atomically: base := max(base, M), `q` and `lost` removed, run
 * recorded */
inline rejoin(i, m) {
  assert(M <= MAXT);
  if :: base[m] < M -> base[m] = M :: else -> skip fi;
  mrun[m] = rid[m]; q[m] = 0; lost[m] = 0; SETOK(i, m, 1); SETDN(i, m, 0);
  M = 0
}

inline repair(i, m) {
  M = (EFF(P1(m)) > EFF(P2(m)) -> EFF(P1(m)) : EFF(P2(m)));
  printf("MSC: %c repairs m%d from both peers (m%d: E %d, m%d: E %d): base %d\n",
         88 + i, m, P1(m), EFF(P1(m)), P2(m), EFF(P2(m)), M);
  rejoin(i, m)
}

#ifdef OLD_GAP
/* ed2a291: fewer than Q peers ready in the instance's view: base := max over the
 * masters that answer (m itself, and the peers the instance does not hold down) +
 * a fixed gap */
#define READY(i, p) (OK(i, p) && CONN(i, p))
#define C_FB(i, m) (REPAIRABLE(i, m) && !(READY(i, P1(m)) && READY(i, P2(m))))
inline fallback(i, m) {
  /* a master answers unless the instance holds it down */
  M = EFF(m);
  if :: !DN(i, P1(m)) && EFF(P1(m)) > M -> M = EFF(P1(m)) :: else -> skip fi;
  if :: !DN(i, P2(m)) && EFF(P2(m)) > M -> M = EFF(P2(m)) :: else -> skip fi;
  M = M + OLDGAP;
  printf("MSC: %c: fewer than a quorum of m%d's peers ready: base := max of those that answer (m%d: %d, m%d: %d) + %d = %d\n",
         88 + i, m, P1(m), EFF(P1(m)), P2(m), EFF(P2(m)), OLDGAP, M);
  rejoin(i, m)
}
#else
/* R-fallback: every master (m included) answered with an intact record with
 * history, and fewer than Q peers proved themselves: base := max over all + G */
#define C_FB(i, m) (REPAIRABLE(i, m) && HIST(0) && HIST(1) && HIST(2) && \
                    !(PROVEN(P1(m)) && PROVEN(P2(m))))
inline fallback(i, m) {
  M = EFF(0);
  if :: EFF(1) > M -> M = EFF(1) :: else -> skip fi;
  if :: EFF(2) > M -> M = EFF(2) :: else -> skip fi;
  M = M + GAP;
  printf("MSC: %c: every master has history, fewer than a quorum of m%d's peers proven: base := max of all + %d = %d\n",
         88 + i, m, GAP, M);
  rejoin(i, m)
}
#endif

inline thaw() {
  maybe_expire(zM);
  if
  :: rid[zM] == zR && SCRIPTOK(zM) ->
       printf("MSC: m%d thaws: applies A%d's acquire now\n", zM, zA);
       acquire(zM, zA);                      /* the reply goes nowhere */
       r = 0; e = 0;
       if :: zC -> cleanup(zM, zA) :: else -> skip fi
  :: else -> printf("MSC: m%d thaws: the request is dropped\n", zM)
  fi;
  zA = 0; zM = 0; zR = 0; zC = 0
}

/* One step of the environment on some master satisfying C (cm = the master), or on
 * some instance and master satisfying C (ci, cm). */
#define ANYM(C)  (C(0) || C(1) || C(2))
#define PICKM(C) if :: C(0) -> cm = 0 :: C(1) -> cm = 1 :: C(2) -> cm = 2 fi
#define MSTEP(C, body) :: atomic { ANYM(C) -> PICKM(C); body; cm = 0 }
#define ANYIM(C)  (C(0, 0) || C(0, 1) || C(0, 2) || C(1, 0) || C(1, 1) || C(1, 2))
#define PICKIM(C) if :: C(0, 0) -> ci = 0; cm = 0 :: C(0, 1) -> ci = 0; cm = 1 \
                     :: C(0, 2) -> ci = 0; cm = 2 :: C(1, 0) -> ci = 1; cm = 0 \
                     :: C(1, 1) -> ci = 1; cm = 1 :: C(1, 2) -> ci = 1; cm = 2 fi
#define ISTEP(C, body) :: atomic { ANYIM(C) -> PICKIM(C); body; ci = 0; cm = 0 }

#define C_FAULT(m)  (FK(1) && FAULTOK(m))
#define C_KEEP(m)   (FK(2) && FAULTOK(m) && mk[m])
#define C_WIPE(m)   (FK(4) && FAULTOK(m))
#define C_HS(i, m)  NEEDHS(i, m)
#define C_QEND(m)   (qt[m] && !OLDHOLD(qep[m]))

#ifdef NO_DAMAGE
#define ENV_DAMAGE
#else
/* HDEL P#master b<k>: the counter goes, the record's HLEN falls below nb */
#define C_DMG(m)    (FK(8) && FAULTOK(m) && mk[m] && !dmg[m] && F[m] != 0)
#define ENV_DAMAGE \
  MSTEP(C_DMG, forget(cm); F[cm] = 0; dmg[cm] = 1; \
               printf("MSC: FAULT m%d: its counter is deleted by hand (HDEL)\n", cm))
#endif

#ifdef OLD_REPAIR
#define C_OREP(i, m) (mk[m] && q[m] && !qt[m] && CONN(i, m))
#define ENV_OLD_REPAIR \
  ISTEP(C_OREP, printf("MSC: %c: #quarantine of m%d gone: trusts it unrepaired\n", 88 + ci, cm); \
                mrun[cm] = rid[cm]; q[cm] = 0; lost[cm] = 0; SETOK(ci, cm, 1))
#else
#define ENV_OLD_REPAIR
#endif

#ifdef VIEW_DOWN
#define C_DOWN(i, m) (OK(i, m))
#define ENV_DOWN \
  ISTEP(C_DOWN, printf("MSC: %c marks m%d down (a request timed out)\n", 88 + ci, cm); \
                SETOK(ci, cm, 0); SETDN(ci, cm, 1))
#else
#define ENV_DOWN
#endif

/* Counters expire only without the floor of issue 10 (NO_FLOOR): the service keeps
 * them (buckets), and so does the model by default. */
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
  MSTEP(C_WIPE, forget(cm); erase(cm); \
                 printf("MSC: FAULT m%d wiped (FLUSHALL), no restart\n", cm)) \
  ENV_DAMAGE \
  ISTEP(C_HS, handshake(ci, cm)) \
  MSTEP(C_QEND, quarantine_end(cm)) \
  ISTEP(C_REP, repair(ci, cm)) \
  ISTEP(C_FB, fallback(ci, cm)) \
  ENV_OLD_REPAIR \
  ENV_DOWN \
  ENV_DELAY \
  ENV_FRESH

init {
  atomic {
    for (m : 0 .. N - 1) {
      mk[m] = 1; rid[m] = 1; mrun[m] = 1;
      conn[IX(0, m)] = 1; conn[IX(1, m)] = 1; SETOK(0, m, 1); SETOK(1, m, 1);
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
