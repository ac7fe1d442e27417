/* reentrant.pml -- reentrant holds (issue 22, findings 1 and 3): one name, N = 3
 * masters (quorum 2), a reentrant holder H and a competitor C, time in ticks.
 * Checked by tests/model/check.sh (`make test-model`); README.md says more.
 *
 * H makes its first acquire, then up to MAXRE nested ones (re-entries), each with
 * a ttl of 1 or 3 ticks, and releases them innermost first: its code holds the name
 * from its first grant until the release of its first hold, and each hold until its
 * own release.  A hold's validity is what its answer said.
 *
 * Properties:
 *   (a) one holder: when C is granted, H holds no hold within the validity it was
 *       told; and at every tick, while H holds a hold within its validity, at least
 *       Q masters keep H's key alive (a holder's key outlives the validity it was
 *       told);
 *   (b) a release that answers "released" leaves fewer than Q masters on which H's
 *       key is alive (a master that did not answer may still hold).
 *
 * Rules (the new ones by default):
 *   holds:     the value records each hold by its own tag (a set); a re-entry adds
 *              its tag where it finds H's lease holding (or sets the key with it
 *              where the key is free), a release removes its own tag and deletes
 *              the key when no tag is left.  OLD_REENTRY_COUNT: the value carries a
 *              count (today's `*<n>`): a re-entry adds 1, a release takes 1 off, so
 *              a release deletes the key on a master that missed the re-entry, the
 *              key the first hold relies on (found by this model).
 *   re-entry:  the key's expiry := max(its expiry, now + ttl); the answer's validity
 *              is the lock's own: the one a quorum of the granting masters' keys
 *              outlives.  OLD_REENTRY_TTL: expiry := now + ttl, validity from the
 *              re-entry's own ttl (finding 1).
 *   release:   "released" only when at least N - Q + 1 masters answered that the key
 *              is gone; a master that did not answer may still hold.
 *              OLD_RELEASE_EARLY: decided at the first Q answers, counting the
 *              answered masters only: released when fewer than Q of them still
 *              count a hold (finding 3).
 *
 * Time: a tick is the smallest unit; a round takes no time (its elapsed time and
 * the drift allowance are the one tick a validity is short of its keys' expiry).
 * A key is alive while now < its expiry.  Requests: applied with the reply counted,
 * applied with the reply lost, or lost; a release request that did not answer
 * before its round was decided may still be applied at any later moment, or never.
 */

#define N 3
#define Q 2
#ifndef TMAX
#define TMAX 4
#endif
#define TSHORT 1
#define TLONG 3
#ifndef MAXRE
#define MAXRE 1           /* re-entries by H */
#endif
#define NHOLD (MAXRE + 1)

/* the properties, named in the assertions (check.sh reads the name) */
bool P_one_holder = 1;
bool P_key_outlives_validity = 1;
bool P_released_means_free = 1;

byte now;
byte kv[N];       /* the lease whose key it is: 0 none, 1 H, 2 C                */
byte kt[N];       /* H's holds on that master: a set of tags (bit k: hold k), or  */
                  /* OLD_REENTRY_COUNT: a count                                   */
byte kx[N];       /* expiry: alive while now < kx                               */
byte lr[N];       /* H's release requests to m not yet applied: bit k = hold k  */
#define ALIVE(m)  (kv[m] != 0 && now < kx[m])
#define HKEY(m)   (ALIVE(m) && kv[m] == 1)
#define NH        (HKEY(0) + HKEY(1) + HKEY(2))

byte hn;          /* H's holds (depth); hold k = 0 .. hn - 1                    */
byte HV[NHOLD];   /* the validity each hold was told: it holds up to that tick  */
bool hfree;       /* H was told "released": it believes it holds nothing         */
bool hgo;         /* H's first acquire is still to come                         */
byte nre;         /* re-entries tried so far (at most MAXRE)                    */
bool cgo;         /* C's acquire is still to come                               */

/* H holds a hold within its validity */
#define HVALID (hn >= 1 && !hfree && (now <= HV[0] || (hn >= 2 && now <= HV[1])))

/* scratch */
byte m; byte o; byte got; byte V; byte c1; byte c2; byte gone; byte ans; byte k;

#define POP(b) (((b) & 1) + (((b) >> 1) & 1) + (((b) >> 2) & 1))

/* the Q-th largest (the 2nd) of the values v(m) over the masters in set b */
#define V0(b, v) ((b) & 1 -> v(0) : 0)
#define V1(b, v) ((b) & 2 -> v(1) : 0)
#define V2(b, v) ((b) & 4 -> v(2) : 0)
#define MAX2(a, b) ((a) > (b) -> (a) : (b))
#define MIN2(a, b) ((a) < (b) -> (a) : (b))
#define SECOND(b, v) MAX2(MAX2(MIN2(V0(b, v), V1(b, v)), MIN2(V0(b, v), V2(b, v))), \
                          MIN2(V1(b, v), V2(b, v)))
#define KX(m) kx[m]

#ifdef OLD_REENTRY_COUNT
#define ADDHOLD(m, k)  kt[m]++
#define DROPHOLD(m, k) kt[m]--
#define NEWHOLD(m, k)  kt[m] = 1
#define HOLDS(m)       kt[m]
#else
#define ADDHOLD(m, k)  kt[m] = kt[m] | (1 << (k))
#define DROPHOLD(m, k) kt[m] = kt[m] & ~(1 << (k))
#define NEWHOLD(m, k)  kt[m] = 1 << (k)
#define HOLDS(m)       POP(kt[m])
#endif

/* H's acquire script for hold k on master m with ttl t: o = granted */
inline h_script(m, k, t) {
  if
  :: !ALIVE(m) -> kv[m] = 1; NEWHOLD(m, k); kx[m] = now + t; o = 1
  :: HKEY(m) ->
#ifdef OLD_REENTRY_TTL
       kx[m] = now + t;
#else
       if :: kx[m] < now + t -> kx[m] = now + t :: else -> skip fi;
#endif
       ADDHOLD(m, k); o = 1
  :: else -> o = 0
  fi
}

/* H's acquire round for hold k (0: its first) with ttl t */
inline h_acquire(k, t) {
  got = 0;
  for (m : 0 .. N - 1) {
    if
    :: true -> h_script(m, k, t);                            /* counted */
       if :: o -> got = got | (1 << m);
                  printf("MSC:   m%d: holds %d, expires at %d\n", m, HOLDS(m), kx[m])
          :: else -> printf("MSC:   m%d: refused\n", m) fi
    :: true -> h_script(m, k, t);                            /* applied, reply lost */
       printf("MSC:   m%d: applied (holds %d, expires at %d), its reply lost\n", m, HOLDS(m), kx[m])
    :: true -> printf("MSC:   m%d: lost\n", m)               /* lost */
    fi
  };
  m = 0; o = 0;
  if
  :: POP(got) >= Q ->
#ifdef OLD_REENTRY_TTL
       V = now + t - 1;
#else
       V = SECOND(got, KX) - 1;        /* the lock's own validity */
#endif
       printf("MSC: H acquire %d (ttl %d) at %d: granted on %d, validity to %d\n",
              k, t, now, got, V);
       HV[k] = V; hn++
  :: else -> printf("MSC: H acquire %d (ttl %d) at %d: fails\n", k, t, now)
  fi;
  got = 0; V = 0
}

/* H's release script for hold k on master m: o = holds left (0: gone) */
inline h_rel_script(m, k) {
  if
  :: HKEY(m) ->
       DROPHOLD(m, k);
       if :: HOLDS(m) == 0 -> kv[m] = 0; kt[m] = 0; kx[m] = 0 :: else -> skip fi;
       o = HOLDS(m)
  :: else -> o = 0
  fi
}

/* H releases its innermost hold */
inline h_release() {
  k = hn - 1;
  ans = 0; gone = 0; c1 = 0; c2 = 0;
  for (m : 0 .. N - 1) {
    if
    :: true -> h_rel_script(m, k); ans = ans | (1 << m);     /* answered in time */
       printf("MSC:   m%d: answered, holds %d left\n", m, o);
       if :: o == 0 -> gone++ :: else -> skip fi;
       /* c1 >= c2: the two largest counts answered */
       if :: o > c1 -> c2 = c1; c1 = o :: o > c2 && o <= c1 -> c2 = o :: else -> skip fi
    :: true -> lr[m] = lr[m] | (1 << k);                     /* not (yet) answered */
       printf("MSC:   m%d: no answer (yet)\n", m)
    fi
  };
  m = 0; o = 0;
  hn--; HV[hn] = 0;
#ifdef OLD_RELEASE_EARLY
  /* decided at the first Q answers: the others came later (or never) */
  if
  :: POP(ans) == Q && c2 == 0 ->
       printf("MSC: H release %d at %d: the first two answers count %d and %d: released\n",
              k, now, c1, c2);
       assert(P_released_means_free && NH < Q);   /* (b) */
       hfree = 1
  :: else -> printf("MSC: H release %d at %d: holds left (answered: %d)\n", k, now, ans)
  fi;
#else
  if
  :: gone >= N - Q + 1 ->
       printf("MSC: H release %d at %d: %d masters answered the key gone: released\n",
              k, now, gone);
       assert(P_released_means_free && NH < Q);   /* (b) */
       hfree = 1
  :: else -> printf("MSC: H release %d at %d: not released (%d answered gone)\n", k, now, gone)
  fi;
#endif
  ans = 0; gone = 0; c1 = 0; c2 = 0; k = 0
}

/* C's acquire round (ttl TLONG) */
inline c_acquire() {
  got = 0;
  for (m : 0 .. N - 1) {
    if
    :: !ALIVE(m) -> kv[m] = 2; kt[m] = 0; kx[m] = now + TLONG; got = got | (1 << m);
       printf("MSC:   m%d: C's key set\n", m)
    :: else -> skip
    fi
  };
  m = 0;
  if
  :: POP(got) >= Q ->
       printf("MSC: C granted at %d (H holds %d, told up to %d and %d)\n",
              now, hn, HV[0], HV[1]);
       assert(P_one_holder && !HVALID)      /* (a) */
  :: else -> skip
  fi;
  got = 0
}

/* a release request of hold k to m that had not answered is applied now */
#define LATE(mm, kk) \
  :: atomic { lr[mm] & (1 << kk) -> lr[mm] = lr[mm] & ~(1 << kk); \
              printf("MSC: a late release of hold %d reaches m%d\n", kk, mm); \
              h_rel_script(mm, kk); \
              printf("MSC:   m%d: holds %d left\n", mm, o); o = 0 }

init {
  hgo = 1; cgo = 1;
  do
  /* H: its first acquire, re-entries, releases (innermost first) */
  :: atomic { hgo -> hgo = 0;
       if :: h_acquire(0, TSHORT) :: h_acquire(0, TLONG) fi;
       if :: hn == 0 -> hfree = 1 :: else -> skip fi }
  :: atomic { hn >= 1 && hn < NHOLD && !hfree && nre < MAXRE -> nre++;
       if :: h_acquire(hn, TSHORT) :: h_acquire(hn, TLONG) fi }
  :: atomic { hn >= 1 && !hfree -> h_release() }
  /* C */
  :: atomic { cgo -> cgo = 0; c_acquire() }
  LATE(0, 0) LATE(1, 0) LATE(2, 0)
  LATE(0, 1) LATE(1, 1) LATE(2, 1)
  /* time passes */
  :: atomic { now < TMAX -> now++; printf("MSC: tick %d\n", now);
       assert(P_key_outlives_validity && (!HVALID || NH >= Q)) }   /* (a) */
  od
}
