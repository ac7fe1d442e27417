/* semcount.pml -- a semaphore's record, slots and count of held slots on ONE master
 * (DESIGN.md section 12, "The count of held slots", issue 23): may a release delete the
 * record from the count alone?  Checked by tests/model/check.sh (`make test-model`);
 * README.md says more.
 *
 * One master (a quorum's intersection is §1's argument, not this one's: a grant under
 * a number of permits n on a master requires the record there to be absent or n, so
 * "no master that granted a valid permit under n holds another record" is what
 * carries "every valid holder agrees on N" over to the quorum).  Slots 0 .. S-1; each
 * slot key: its holder, the number of permits its grant was made under, its life:
 *   1 valid   (its holder's validity runs),
 *   2 last    (its holder's validity is over -- ttl minus the drift and the round's
 *             time -- and the key may still be alive to a script: its last moments),
 *   0 gone    (expired, or deleted).
 * The record: absent, or (n, counted).  The count `#h`: a member per slot (its score
 * is >= its key's expiry: a member is stale only once its key is gone or in its last
 * moments).
 *
 * Clients, each with its own number of permits and build, one permit at a time:
 *   c0, c1: counting build, n = 2;  c2: counting build, n = 3;
 *   c3: a build before the count (OLD): n = 2, writes no member, never reads the count.
 * Each may acquire (any slot below its n; adopting its own slot), extend and release its
 * permit, as often as the budget allows, in any order, at any time; a release may come
 * after its validity ended (the code came back late).  Time: a valid slot's holder's
 * validity may end at any step (valid -> last), a last key may expire (-> gone), the
 * record may expire once no slot key is alive (its PX is kept >= every slot's).
 *
 * The scripts, each atomic:
 *   counting acquire: record (n', _) with n' != n: refused.  Slot free: granted, its
 *     member added; an absent record becomes (n, counted) -- or (n, legacy) with
 *     NAIVE; a record found is kept as it is.  Slot its own: adopted, member added.
 *     Slot another's: refused, and the members whose score is past are dropped: those
 *     of gone keys (with NO_MARGIN: of last keys too, the score being now).
 *   OLD acquire: the record compared as a string: (n, legacy) or absent, else refused;
 *     granted without a member; an absent record becomes (n, legacy).
 *   extend (counting): finds its slot below the record's n (none when absent; OLD: none
 *     under a counted record, tonumber("<n>c") = nil); slot alive -> valid again (a
 *     Redlock extension of a key still there), member added (OLD: none).
 *   release: finds its slot as extend does; deletes it (counting: its member too); then
 *     decides whether a slot is left: counting under a counted record: a member whose
 *     key is alive (EXISTS over the count's members); under a legacy record, and OLD:
 *     every slot key alive (the full scan); NAIVE: the count under every record.  None
 *     left: the record is deleted.
 *
 * Rules put back or rejected, each a counterexample (check.sh):
 *   NAIVE           a release trusts the count under every record (no marker);
 *   NO_MARGIN       a refusal drops the members whose score is now (ZREMRANGEBYSCORE
 *                   to now inclusive): the member of a key in its last moments;
 *   REMARK          a counting grant marks a record it found ("<N>" -> "<N>c");
 *   OLD_READS_MARK  a marker an old build reads as its own number (it would grant,
 *                   extend and release under "<N>c" as under "<N>").
 * NO_COUNTED_CHECK leaves P_counted out (those variants show P_one_number itself).
 *
 * Property (P_one_number): while a slot's holder is valid, the record on the master
 * is present and holds the number that slot was granted under.  (With it, a caller
 * with another number is refused there, and a grant of a slot i >= n is impossible
 * while n's holders are valid, so at most n of them.)  P_counted (checked only for
 * the marked rule): under a counted record every alive slot key has its member.
 */

#define S 3
#define NC 4
#ifndef BUDGET
#define BUDGET 2
#endif

bool P_one_number = 1;
bool P_counted = 1;

byte kv[S];        /* 0 free, else holder + 1 */
byte kl[S];        /* 0 gone, 1 valid, 2 last */
byte kn[S];        /* the number of permits the slot was granted under */
bool mem[S];       /* member of the count */
byte rn;           /* record: 0 absent, else its number */
bool rc;           /* record counted ("<n>c") */

byte cn[NC];       /* each client's number of permits */
bool cold[NC];     /* a build before the count */
byte cs[NC];       /* its slot + 1, 0 none */
byte budget[NC];

byte c; byte s; byte i; bool left; byte n;

inline check() {
  for (i : 0 .. S - 1) {
    if
    :: kl[i] == 1 -> assert(P_one_number && rn == kn[i])
    :: else -> skip
    fi;
#ifndef NO_COUNTED_CHECK
    if
    :: rn != 0 && rc && kl[i] != 0 -> assert(P_counted && mem[i])
    :: else -> skip
    fi
#endif
  };
  i = 0
}

/* the number of permits client c's build reads from the record (0: none) */
inline readn() {
  if
  :: rn == 0 -> n = 0
#ifndef OLD_READS_MARK
  :: rc && cold[c] -> n = 0
#endif
  :: else -> n = rn
  fi
}

/* client c's slot among those below n whose key is alive and its (find), or S */
inline find() {
  s = S;
  if
  :: cs[c] != 0 && cs[c] - 1 < n && kv[cs[c] - 1] == c + 1 && kl[cs[c] - 1] != 0 -> s = cs[c] - 1
  :: else -> skip
  fi
}

inline acquire() {
  if
#ifdef OLD_READS_MARK
  :: rn != 0 && rn != cn[c] ->
#else
  :: rn != 0 && (rn != cn[c] || (cold[c] && rc)) ->
#endif
     printf("MSC: c%d (n %d, old %d) refused: the record is %d (counted %d)\n", c, cn[c], cold[c], rn, rc)
  :: else ->
     if
     :: kl[s] == 0 ->
        kv[s] = c + 1; kl[s] = 1; kn[s] = cn[c]; cs[c] = s + 1;
        if :: !cold[c] -> mem[s] = 1 :: else -> skip fi;
        if
        :: rn == 0 -> rn = cn[c];
#ifdef NAIVE
           rc = 0
#else
           rc = !cold[c]
#endif
#ifdef REMARK
        :: rn != 0 && !cold[c] -> rc = 1
#endif
        :: else -> skip
        fi;
        printf("MSC: c%d (n %d, old %d) granted slot %d; the record is %d (counted %d)\n", c, cn[c], cold[c], s, rn, rc)
     :: kl[s] != 0 && kv[s] == c + 1 ->
        kl[s] = 1;
        if :: !cold[c] -> mem[s] = 1 :: else -> skip fi;
        printf("MSC: c%d adopts slot %d\n", c, s)
     :: else ->
        if
        :: !cold[c] ->
           for (i : 0 .. S - 1) {
             if
#ifdef NO_MARGIN
             :: mem[i] && kl[i] != 1 -> mem[i] = 0
#else
             :: mem[i] && kl[i] == 0 -> mem[i] = 0
#endif
             :: else -> skip
             fi
           };
           i = 0
        :: else -> skip
        fi;
        printf("MSC: c%d refused by slot %d (members past their score dropped)\n", c, s)
     fi
  fi
}

inline extend() {
  readn(); find();
  if
  :: s < S -> kl[s] = 1;
     if :: !cold[c] -> mem[s] = 1 :: else -> skip fi;
     printf("MSC: c%d extends slot %d (granted under %d; the record is %d, counted %d)\n", c, s, kn[s], rn, rc)
  :: else -> printf("MSC: c%d's extension finds nothing\n", c)
  fi
}

inline release() {
  readn(); find();
  if
  :: s < S ->
     kv[s] = 0; kl[s] = 0; cs[c] = 0;
     if :: !cold[c] -> mem[s] = 0 :: else -> skip fi;
     left = 0;
#ifdef NAIVE
     if :: !cold[c] ->
#else
     if :: !cold[c] && rc ->
#endif
          for (i : 0 .. S - 1) { if :: mem[i] && kl[i] != 0 -> left = 1 :: else -> skip fi }
     :: else ->
          for (i : 0 .. S - 1) { if :: kl[i] != 0 -> left = 1 :: else -> skip fi }
     fi;
     i = 0;
     if :: !left -> rn = 0; rc = 0 :: else -> skip fi;
     printf("MSC: c%d releases slot %d: a slot left %d (0: the record deleted)\n", c, s, left)
  :: else -> printf("MSC: c%d's release finds nothing\n", c)
  fi;
  cs[c] = 0
}

#define ACQ(C, SL) \
  :: atomic { budget[C] > 0 && cs[C] == 0 && SL < cn[C] -> \
       c = C; s = SL; budget[c]--; acquire(); c = 0; s = 0; n = 0; check() }
#define LETGO(C) \
  :: atomic { cs[C] != 0 -> c = C; \
       if :: left = 1 :: left = 0 fi; \
       if :: left -> extend() :: else -> release() fi; c = 0; s = 0; n = 0; left = 0; check() }
#define TIME(SL) \
  :: atomic { kl[SL] == 1 -> kl[SL] = 2; printf("MSC: slot %d's holder's validity ends\n", SL); check() } \
  :: atomic { kl[SL] == 2 -> kl[SL] = 0; kv[SL] = 0; printf("MSC: slot %d expires\n", SL); check() }

init {
  atomic {
    cn[0] = 2; cn[1] = 2; cn[2] = 3; cn[3] = 2; cold[3] = 1;
    budget[0] = BUDGET; budget[1] = BUDGET; budget[2] = BUDGET; budget[3] = BUDGET
  };
  do
  ACQ(0, 0) ACQ(0, 1) ACQ(1, 0) ACQ(1, 1) ACQ(2, 0) ACQ(2, 1) ACQ(2, 2) ACQ(3, 0) ACQ(3, 1)
  LETGO(0) LETGO(1) LETGO(2) LETGO(3)
  TIME(0) TIME(1) TIME(2)
  :: atomic { rn != 0 && kl[0] == 0 && kl[1] == 0 && kl[2] == 0 -> rn = 0; rc = 0;
       printf("MSC: the record expires\n"); check() }
  od
}
