/* delay.pml -- the lock-delay's rest (DESIGN.md section 14, issue 28): one name,
 * N = 3 masters (quorum 2), a holder H whose hold may end without its word, a
 * competitor C, time in ticks.  Checked by tests/model/check.sh (`make test-model`);
 * README.md says more.
 *
 * H acquires once (ttl TTL, lock-delay D): a master where the name is free gets H's
 * key with expiry now + TTL + D; granted by Q answers, valid to now + TTL - 1 (the
 * tick a validity is short of its keys: the round's elapsed time and the drift).
 * Its hold ends:
 *   - by expiry: at the first tick past its validity (nothing is sent);
 *   - by a release with `~` (a streamed hold's hang-up, silence, bound; a one-way
 *     hold's end), sent at any tick while it holds: where the key is H's and does
 *     not rest, it becomes `#resting` with expiry min(its expiry, now + D);
 *   - by a clean DELETE (its word), sent while it holds: where the key is H's, it
 *     is deleted, or, while C waits parked, handed to C (the handoff script sets C's
 *     key where H's was or the name is free; C is granted by Q of them).
 * H may also send a DELETE after its hold ended (its code came back after the
 * expiry), which is no word: the hold had ended by expiry.  H sends one release at
 * most.  A release request is applied at once, lost, or applied at any later tick
 * (another connection, a slow master); a handoff's requests at once or lost.
 *
 * A key rests when it is `#resting`, or H's with no more than D left (its holder's
 * part over).  A resting key refuses every acquire; it is no longer H's (`ours()` in
 * FN_RELEASE, FN_HANDOFF): a DELETE by H, or its handoff, leaves it.
 * OLD_REST_MINE: the rule before (`mine()` only): a DELETE by H deletes, or hands
 * over, H's key whether it rests or not (the holder that came back after its expiry
 * and ended its own rest, test_delayfault.c).
 *
 * C acquires at any tick, as often as it likes (refused: it waits parked): granted
 * when Q masters have no key.
 *
 * Properties, asserted at C's grant:
 *   one holder: H does not hold (within its validity, not released by its word);
 *   the rest holds: if H's hold ended without its word at tick e, C's grant is at
 *     e + D or later.
 * Not modelled: the force (DELETE ?force=true), extensions (FN_EXTEND keeps D and
 * refuses a resting key), bounded holds, masters that forget (section 14's limit 2:
 * a quarantine), drift beyond the one tick.
 */

#define N 3
#define Q 2
#ifndef TTL
#define TTL 2
#endif
#ifndef D
#define D 2
#endif
#ifndef TMAX
#define TMAX 6
#endif
#define NONE 255

bool P_one_holder = 1;
bool P_rest_holds = 1;

byte now;
byte kv[N];        /* 0 no key, 1 H's, 2 #resting, 3 C's */
byte kx[N];        /* expiry: alive while now < kx */
byte lr[N];        /* H's release not yet applied on m: 0 none, 1 clean DELETE, 2 `~` */

bool hgo = 1;      /* H's acquire is still to come */
bool hheld;        /* H holds (granted, within its validity, not released) */
byte hV;           /* the last tick of H's validity */
byte hend = NONE;  /* the tick H's hold ended without its word */
bool hrel;         /* H sent its release */
bool cwait;        /* C was refused and waits parked */
bool cdone;        /* C was granted */

byte m; byte got; byte r;

#define POP(b) (((b) & 1) + (((b) >> 1) & 1) + (((b) >> 2) & 1))
#define RESTS(i) (kv[i] == 2 || (kv[i] == 1 && kx[i] - now <= D))
#ifdef OLD_REST_MINE
#define OURS(i) (kv[i] == 1)
#else
#define OURS(i) (kv[i] == 1 && !RESTS(i))
#endif
#define MIN2(x, y) ((x) < (y) -> (x) : (y))

inline c_granted() {
  printf("MSC: C granted at %d (H valid to %d, holds %d; its hold ended without its word at %d)\n",
         now, hV, hheld, hend);
  assert(P_one_holder && !hheld);
  assert(P_rest_holds && (hend == NONE || now >= hend + D));
  cdone = 1; cwait = 0
}

/* H's release script on master m: r = 1 clean DELETE, 2 `~` */
inline rel_script() {
  if
  :: OURS(m) && r == 1 -> kv[m] = 0; kx[m] = 0;
     printf("MSC:   m%d: H's key deleted\n", m)
  :: OURS(m) && r == 2 -> kv[m] = 2; kx[m] = MIN2(kx[m], now + D);
     printf("MSC:   m%d: #resting to %d\n", m, kx[m])
  :: else -> printf("MSC:   m%d: not H's: left\n", m)
  fi
}

/* H's release round, r = 1 clean DELETE, 2 `~` */
inline h_release() {
  hrel = 1;
  if
  :: hheld && r == 1 -> hheld = 0; printf("MSC: H DELETE at %d (its word)\n", now)
  :: hheld && r == 2 -> hheld = 0; hend = now; printf("MSC: H lets go with ~ at %d\n", now)
  :: !hheld && r == 1 -> printf("MSC: H (its hold over) sends DELETE at %d\n", now)
  :: !hheld && r == 2 -> printf("MSC: H (its hold over) sends ~ at %d\n", now)
  fi;
  if
  :: r == 1 && cwait ->                       /* the handoff to the parked C */
       got = 0;
       for (m : 0 .. N - 1) {
         if
         :: OURS(m) || kv[m] == 0 -> kv[m] = 3; kx[m] = now + TTL + D; got = got | (1 << m);
            printf("MSC:   m%d: handed to C\n", m)
         :: true -> printf("MSC:   m%d: lost\n", m)
         :: else -> printf("MSC:   m%d: refused\n", m)
         fi
       };
       m = 0;
       if :: POP(got) >= Q -> c_granted() :: else -> skip fi;
       got = 0
  :: else ->
       for (m : 0 .. N - 1) {
         if
         :: true -> rel_script()
         :: true -> lr[m] = r; printf("MSC:   m%d: no answer (yet)\n", m)
         :: true -> printf("MSC:   m%d: lost\n", m)
         fi
       };
       m = 0
  fi;
  r = 0
}

#define LATE(mm) \
  :: atomic { lr[mm] != 0 -> m = mm; r = lr[mm]; lr[mm] = 0; \
              printf("MSC: H's late release (1 DELETE, 2 ~: %d) reaches m%d at %d\n", r, mm, now); \
              rel_script(); m = 0; r = 0 }

#define EXPIRE(i) if :: kv[i] != 0 && kx[i] <= now -> kv[i] = 0; kx[i] = 0 :: else -> skip fi

init {
  do
  /* H acquires */
  :: atomic { hgo -> hgo = 0; got = 0;
       for (m : 0 .. N - 1) {
         if
         :: kv[m] == 0 -> kv[m] = 1; kx[m] = now + TTL + D;
            if :: got = got | (1 << m); printf("MSC:   m%d: H's key to %d\n", m, kx[m])
               :: printf("MSC:   m%d: H's key to %d, its reply lost\n", m, kx[m]) fi
         :: true -> printf("MSC:   m%d: lost\n", m)
         :: else -> printf("MSC:   m%d: refused\n", m)
         fi
       };
       m = 0;
       if
       :: POP(got) >= Q -> hheld = 1; hV = now + TTL - 1;
          printf("MSC: H granted at %d, valid to %d\n", now, hV)
       :: else -> hrel = 1; printf("MSC: H refused at %d\n", now)
       fi;
       got = 0 }
  /* H's one release: clean or `~`, while it holds or after */
  :: atomic { !hgo && !hrel -> if :: r = 1 :: r = 2 fi; h_release() }
  LATE(0) LATE(1) LATE(2)
  /* C acquires */
  :: atomic { !cdone -> got = 0;
       for (m : 0 .. N - 1) { if :: kv[m] == 0 -> got = got | (1 << m) :: else -> skip fi };
       m = 0;
       if
       :: POP(got) >= Q ->
          for (m : 0 .. N - 1) {
            if :: got & (1 << m) -> kv[m] = 3; kx[m] = now + TTL + D :: else -> skip fi };
          m = 0; c_granted()
       :: else -> cwait = 1; printf("MSC: C refused at %d: it waits\n", now)
       fi;
       got = 0 }
  /* time passes */
  :: atomic { now < TMAX -> now++; printf("MSC: tick %d\n", now);
       EXPIRE(0); EXPIRE(1); EXPIRE(2);
       if
       :: hheld && now > hV -> hheld = 0; hend = now;
          printf("MSC: H's hold ends by expiry at %d\n", now)
       :: else -> skip
       fi }
  od
}
