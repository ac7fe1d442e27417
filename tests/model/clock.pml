/* clock.pml -- the watch on a master's clock (DESIGN.md section 4, Rule 7): one master m
 * of a holder's granting set whose wall clock may jump, the instances' samples of it, the
 * window every lock script carries and the time it answers; time in ticks.  Checked by
 * tests/model/check.sh (`make test-model`); README.md says more.
 *
 * Why one master: a holder H granted on exactly Q masters, a competitor C that needs one
 * of them (the others of its quorum are free); the honest masters of H's set refuse C
 * (their keys outlive H's validity), so C's grant hinges on the one whose clock moves.
 *
 * The clock reads real time + off; off starts at 0 and may jump, by any amount within
 * JMAX either way, at any tick (at most JUMPS times).  Drift is not modelled: the honest
 * rate is exact, and the slack the checks allow for drift and for the samples' own
 * uncertainty is TOL.  The instances sample the clock every SAMPLE ticks (tick 0 too):
 * a sample whose offset moved by more than TOL from the baseline is a jump (m is out:
 * no script is sent to it, and, with the new rule, no reply read after counts); else
 * it is the new baseline (base).
 *
 * H's round starts at tick 0: its script on m runs at some tick tH <= NT (the node
 * timeout), by m's clock at MH = tH + off, and counts if inside its window [base - TOL,
 * NT + base + TOL] (sent at 0): H's key on m then lives while m's clock reads less than
 * MH + TTL.  H's validity ends at TTL - RES (RES: what validity keeps beyond the drift
 * allowance, 2 ms in the service; the allowance itself is not modelled, as drift is not).
 * C sends once, at any tick after tH while m is in; its script runs at tB within NT of
 * its send, by m's clock at MB, inside its window [sB + base - TOL, sB + NT + base + TOL]
 * (base as at the send), and sets C's key if H's is gone (MB >= MH + TTL); C reads the
 * answer at rB, tB <= rB <= sB + NT (R-late), and counts the vote:
 *   new rule: only if m is not out and MB <= rB + base + TOL (base as at the read): the
 *             time a script answers agrees with the clock as measured when it is read;
 *   OLD_CLOCK: whatever (the window was the only check).
 * Property, at C's vote: C is not granted through m while H is valid (rB < TTL - RES).
 * What slips through with the new rule (DESIGN): a gain of the clock beyond what the
 * checks see, U = TOL at H's script + TOL at C's + TOL per sample between (here one: C
 * reads before TTL - RES = 5, samples at 0 and 3), so U = 3 <= RES: no overlap (clock,
 * and clock-3jumps with a third jump); with RES = 2 < U three jumps within TOL find one
 * (clock-residual: the limit DESIGN states, not closed); the window alone lets a jump
 * forward of up to NT + TOL through (old-clock).
 */

#ifndef NT
#define NT 5
#endif
#ifndef TOL
#define TOL 1
#endif
#ifndef TTL
#define TTL 8
#endif
#ifndef RES
#define RES 3
#endif
#ifndef SAMPLE
#define SAMPLE 3
#endif
#ifndef JMAX
#define JMAX 5
#endif
#ifndef JUMPS
#define JUMPS 2
#endif

bool P_one_holder = 1;

int t;          /* real time */
int off;        /* m's clock - real time */
int base;       /* the offset as last sampled */
byte jumps;
bool out;       /* a sample, or a reply judged, took m out */
bool hran;      /* H's script ran and counts */
int MH, baseH;
int sB = -1, baseS, tB = -1, MB;
bool cset;      /* C's script ran inside its window and set its key */

active proctype world()
{
    int j;
    do
    :: t <= TTL - RES + NT ->
        /* a sample */
        if
        :: t % SAMPLE == 0 ->
            if
            :: off - base > TOL || base - off > TOL -> out = 1
            :: else -> base = off
            fi
        :: else -> skip
        fi;
        /* the clock may jump */
        if
        :: jumps < JUMPS -> select(j : 0 .. 2 * JMAX); off = off + j - JMAX; j = 0; jumps++
        :: true -> skip
        fi;
        /* H sends at tick 0 (after its sample), while m is in */
        if
        :: t == 0 && out -> goto done
        :: t == 0 && !out -> baseH = base
        :: else -> skip
        fi;
        /* H's script runs within NT of its send */
        if
        :: !hran && t <= NT ->
            if
            :: t + off >= baseH - TOL && t + off <= NT + baseH + TOL -> MH = t + off; hran = 1
            :: else -> goto done   /* refused: H does not count m, nothing to check */
            fi
        :: !hran && t < NT -> skip /* later */
        :: hran -> skip
        fi;
        /* C sends, once, while m is in */
        if
        :: hran && sB < 0 && !out && t < TTL - RES -> sB = t; baseS = base
        :: true -> skip
        fi;
        /* C's script runs within NT of its send */
        if
        :: sB >= 0 && tB < 0 && t <= sB + NT ->
            if
            :: MB = t + off; tB = t;
               cset = (MB >= sB + baseS - TOL && MB <= sB + NT + baseS + TOL && MB >= MH + TTL)
            :: t < sB + NT -> skip
            fi
        :: else -> skip
        fi;
        /* C reads the answer (the same tick it ran, or later, within NT of its send) */
        if
        :: tB >= 0 && t <= sB + NT ->
#ifdef OLD_CLOCK
            if :: cset -> P_one_holder = (t >= TTL - RES) :: else -> skip fi;
#else
            if :: cset && !out && MB <= t + base + TOL -> P_one_holder = (t >= TTL - RES) :: else -> skip fi;
#endif
            assert(P_one_holder);
            goto done
        :: tB >= 0 && t < sB + NT -> skip
        :: tB < 0 || t > sB + NT -> skip
        fi;
        t++
    :: else -> break
    od;
done:
    skip
}
