#!/bin/sh
# tests/model/check.sh -- check the Promela models of tests/model with spin, every
# variant: the new rules must show no counterexample, each old rule must show one.
# Called by `make test-model` and `make test-model-full` (tests/model/model.mk);
# usage: check.sh OUTDIR [NAME...]
#
# Environment: SPIN (spin), MODEL_CC (cc), CC0 (the compiler of -O0 builds: clang if
# there is one, else MODEL_CC), JOBS (2: variants checked at once),
# NEW_FLAGS (extra -D flags for the new rules of redlock.pml, e.g. "-DADOPT_FIX
# -DBOOT_FIX"), SET (test: the variants of `make test-model`; full: every variant).
set -u

out=${1:?usage: check.sh OUTDIR [NAME...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
SPIN=${SPIN:-spin}
MODEL_CC=${MODEL_CC:-cc}
JOBS=${JOBS:-2}
NEW_FLAGS=${NEW_FLAGS:-}
SET=${SET:-test}
# the compiler for -O0 builds: clang compiles a pan.c three times as fast as gcc -O0
CC0=${CC0:-$(command -v clang >/dev/null 2>&1 && echo clang || echo "$MODEL_CC")}
# the variants of `make test-model` whose search is large enough for -O1 to pay
O1="new-late new-retry-freeze new-views reentrant-2-small reentrant-finisher clock"

# name | set | expect | model | spin flags | what it is.
# set: test (`make test-model`, part of `make test-all`: small configurations, one for each
# rule, about 75 CPU-seconds) or full (`make test-model-full` adds them: the large
# configurations, about 12 CPU-minutes).
# expect: pass (no counterexample: the new rules), fail (one: an old rule, which is
# the new ones with one rule of an earlier build put back), found (one: a defect of
# the service as it runs today, found by this model; README.md has its trail).
# Listed longest first (JOBS at a time, in this order).
variants() {
  cat <<EOF
new-faults|full|pass|redlock|$NEW_FLAGS -DRETRY1 -DMAXF=1 -DMAXZ=1|new rules: a retry, 1 fault of any kind, 1 freeze
new-fine|full|pass|redlock|$NEW_FLAGS -DFINE_ACQ -DRDELAY -DMAXF=1 -DMAXZ=0|new rules: every acquire request its own step, 1 fault of any kind, lowered quarantine (R-delay, R-late)
new-2faults|full|pass|redlock|$NEW_FLAGS -DRDELAY -DMAXF=2 -DMAXZ=1|new rules: 2 faults of any kind, 1 freeze, lowered quarantine (R-delay)
new-retries|full|pass|redlock|$NEW_FLAGS -DRETRY1 -DRETRY2 -DMAXF=0 -DMAXZ=0|new rules: both clients retry, no faults
new-retry-fault|full|pass|redlock|$NEW_FLAGS -DRETRY1 -DMAXF=1 -DMAXZ=0|new rules: a retry, 1 fault of any kind
new-views-all|full|pass|redlock|$NEW_FLAGS -DVIEW_DOWN -DMAXF=1 -DMAXZ=0|new rules: 1 fault of any kind, instances' own views that go stale and down
new-stale-all|full|pass|redlock|$NEW_FLAGS -DVIEWS -DMAXF=2 -DMAXZ=0|new rules: 2 faults of any kind, instances' own views that go stale
draft-boot|full|fail|redlock|-DADOPT_FIX -DFINE -DMAXF=1 -DMAXZ=0|first draft (a bare master joined while no counter showed a grant), every request its own step
reentrant-tags-2|full|pass|reentrant|-DTAGS -DMAXRE=2|reentrant holds by per-hold tags (the alternative): two re-entries
reentrant-stop|full|pass|reentrant|-DFINISHER -DUNCONFIRMED_LOST|reentrant holds, the count with the service's finisher, a client that stops at a 503 to a release
new-late|test|pass|redlock|$NEW_FLAGS -DFINE_ACQ -DRDELAY -DNO_DAMAGE -DFAULTS=1 -DMAXF=1 -DMAXZ=0|new rules: every acquire request its own step, a restart that loses everything, lowered quarantine (R-delay, R-late)
new-retry-freeze|test|pass|redlock|$NEW_FLAGS -DRETRY1 -DMAXF=0 -DMAXZ=1|new rules: a retry (through the other instance), 1 freeze (adopted keys)
new-views|test|pass|redlock|$NEW_FLAGS -DVIEW_DOWN -DFAULTS=1 -DMAXF=1 -DMAXZ=0|new rules: a restart that loses everything, instances' own views that go stale and down
new-stale|test|pass|redlock|$NEW_FLAGS -DVIEWS -DFAULTS=5 -DMAXF=2 -DMAXZ=0|new rules: 2 restarts or wipes, instances' own views that go stale
new-damage|test|pass|redlock|$NEW_FLAGS -DRDELAY -DFAULTS=9 -DMAXF=2 -DMAXZ=0|new rules: 2 faults, restarts or deleted counters (R-proof's intact record), lowered quarantine (R-delay)
new-wipes|test|pass|redlock|$NEW_FLAGS -DRDELAY -DFAULTS=5 -DMAXF=2 -DMAXZ=0|new rules: 2 faults, restarts or wipes (R-repair, R-fallback, a new cluster), lowered quarantine (R-delay)
new-freeze|test|pass|redlock|$NEW_FLAGS -DMAXF=1 -DMAXZ=1|new rules: 1 fault of any kind (a lost write too), 1 freeze
old-late|test|fail|redlock|$NEW_FLAGS -DRDELAY -DOLD_LATE -DFINE_ACQ -DNO_DAMAGE -DFAULTS=1 -DMAXF=1 -DMAXZ=0|old rules (a reply read after the round's deadline counts; R-delay)
old-gap|test|fail|redlock|$NEW_FLAGS -DOLD_GAP -DVIEW_DOWN -DRETRY1 -DFAULTS=1 -DMAXF=1 -DMAXZ=0|old rules (fallback: max of those that answer + a fixed gap, issue 21 finding 3)
draft-boot-acq|test|fail|redlock|-DADOPT_FIX -DFINE_ACQ -DFAULTS=4 -DMAXF=1 -DMAXZ=0|first draft (a bare master joined while no counter showed a grant)
old-21|test|fail|redlock|$NEW_FLAGS -DOLD_21 -DNO_DAMAGE -DFAULTS=5 -DMAXF=2 -DMAXZ=0|old rules (the repair of ed2a291: findings 1-3 together)
old-proof-view|test|fail|redlock|$NEW_FLAGS -DOLD_PROOF_VIEW -DMAXF=2 -DMAXZ=0|old rules (a peer trusted from the instance's view, q not read: issue 21 finding 1)
old-proof-integrity|test|fail|redlock|$NEW_FLAGS -DOLD_PROOF_INTEGRITY -DMAXF=2 -DMAXZ=0|old rules (a peer's record not checked intact: issue 21 finding 2)
old-all|test|fail|redlock|-DOLD_RULES -DRETRY1 -DMAXF=1 -DMAXZ=0|old rules (all of the rules before issue 10)
old-restart|test|fail|redlock|$NEW_FLAGS -DOLD_RESTART -DMAXF=1 -DMAXZ=0|old rules (restart with marker trusted at once)
old-wipe|test|fail|redlock|$NEW_FLAGS -DOLD_WIPE -DMAXF=1 -DMAXZ=0|old rules (marker checked at connect only)
old-fresh|test|fail|redlock|$NEW_FLAGS -DOLD_FRESH -DMAXF=1 -DMAXZ=0|old rules (#fresh bootstrap window)
old-repair|test|fail|redlock|$NEW_FLAGS -DOLD_REPAIR -DMAXF=1 -DMAXZ=0|old rules (repair remembered by one instance)
old-cleanup|test|fail|redlock|$NEW_FLAGS -DNO_TAGS -DRETRY1 -DMAXF=0 -DMAXZ=0|old rules (clean-up releases by lease)
old-nofloor|test|fail|redlock|$NEW_FLAGS -DNO_FLOOR -DMAXF=0 -DMAXZ=0|without the floor (counters that expire read 0)
draft-adopt|test|fail|redlock|-DBOOT_FIX -DRETRY1 -DMAXF=0 -DMAXZ=1|first draft (a clean-up could take an adopted key)
reentrant|test|pass|reentrant|-DALL_N_REENTRY|reentrant holds, the count (a re-entry never takes a free key, granted only by all N masters), one re-entry: both clients
reentrant-2|full|pass|reentrant|-DALL_N_REENTRY -DMAXRE=2 -DREENTER_VALID|the count, a re-entry granted only by all N masters, two re-entries while the client believes it holds: both clients
reentrant-2-lost|full|pass|reentrant|-DALL_N_REENTRY -DMAXRE=2 -DREENTER_VALID -DUNCONFIRMED_LOST -DNO_NEST_CHECK|the count, a re-entry granted only by all N masters: found-two-reentries' configuration
reentrant-2-small|test|pass|reentrant|-DALL_N_REENTRY -DMAXRE=2 -DREENTER_VALID -DUNCONFIRMED_LOST -DNO_NEST_CHECK -DTMAX=2|the count, a re-entry granted only by all N masters: found-two-reentries' configuration, to tick 2
reentrant-finisher|test|pass|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_LAST_ONLY|the count with the service's finisher: it waits until the release's window has closed, and finishes only a release every answer counted as the lease's last (none after no answer, none that keeps holds): found-finisher's configuration
reentrant-finisher-last|test|pass|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_LAST_ONLY -DMAXRE=2 -DACQ_RELIABLE -DTMAX=0|the same with two re-entries, the client going on after a 503 to a release, every acquire request answered: old-finisher-reentry's configuration
reentrant-finisher-last-t|test|pass|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_LAST_ONLY -DMAXRE=2 -DACQ_RELIABLE -DONE_503 -DREENTER_VALID -DTMAX=1|the same with keys expiring, one release answered 503, re-entering while it believes it holds
reentrant-finisher-last-full|full|pass|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_LAST_ONLY -DMAXRE=2 -DONE_503 -DREENTER_VALID -DTMAX=2|the same with acquire requests lost or late too (failed re-entries and their clean-ups), to tick 2
found-late-release-fresh|test|found|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_LAST_ONLY -DMAXRE=2 -DACQ_RELIABLE -DONE_503 -DTMAX=2|the service's rules, a client that re-enters after its outer validity ran out: a nested release answered 503 lands late, within its window, on the fresh keys that re-entry set (the lease's new grant)
old-finisher-reentry|test|fail|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DMAXRE=2 -DACQ_RELIABLE -DTMAX=0|old rules (the finisher lowers a nested release's count to t): a re-entry granted after the unconfirmed release, before the finisher lands, loses its hold to it (a hostile tester's finding)
rejected-finisher-gen|test|fail|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT -DFIN_NO_NONE -DFIN_GEN -DMAXRE=2 -DONE_503 -DTMAX=1|rejected rule (the finisher lowers only a key of the generation its release's answers named): a failed re-entry's late one-less and the finisher's absolute target take two holds for one
old-finisher-none|test|fail|reentrant|-DALL_N_REENTRY -DFINISHER -DFINISHER_WAIT|old rules (the finisher sent after a release no master answered, found-finisher-none before): its *-1 after a release no master answered deletes the outer hold where the release landed
reentrant-tags|test|pass|reentrant|-DTAGS|reentrant holds by per-hold tags (the alternative): one re-entry
found-two-reentries|test|fail|reentrant|-DMAXRE=2 -DREENTER_VALID -DUNCONFIRMED_LOST -DNO_NEST_CHECK|old rules (a re-entry granted by a quorum of added holds): two re-entries in turn, a release takes the outer hold's count where its re-entry had missed
found-finisher|test|fail|reentrant|-DFINISHER|old rules (the finisher sent before the release's window closed): its *t and the late release it finishes both land, two holds taken for one
found-phantom|test|found|reentrant|-DCOUNT_ANYTIME|the count: a release answered after a 503 counts the holds the 503'd release is still taking
old-reentry-count|test|fail|reentrant|-DOLD_REENTRY_COUNT|old rules (a re-entry takes free keys: its release takes a hold the master never counted)
reentrant-extend|test|pass|reentrant|-DALL_N_REENTRY -DEXTEND|the count, and an extension with a shorter ttl while nested: a key of more than one hold keeps the later expiry
old-extend-sets|test|fail|reentrant|-DALL_N_REENTRY -DEXTEND -DOLD_EXTEND_SETS|old rules (an extension sets the key's expiry to its own ttl, whatever holds it counts: a streamed re-entry's keeper cut the outer hold)
old-reentry-ttl|test|fail|reentrant|-DOLD_REENTRY_TTL|old rules (a re-entry sets the key's expiry to its own ttl: issue 22 finding 1)
old-release-early|test|fail|reentrant|-DOLD_RELEASE_EARLY|old rules (a release decided at the first Q answers: issue 22 finding 3)
delay|test|pass|delay||the lock-delay's rest: a hold that ends without its holder's word rests D, a resting key is no longer its lease's
old-rest-mine|test|fail|delay|-DOLD_REST_MINE|old rules (a DELETE by the lease took its key while it rested: section 14, test_delayfault.c)
shared|test|pass|shared||readers and a waiting writer: marks removed at every exit, short expiry
old-marks|test|fail|shared|-DOLD_MARKS|old rules (a mark lives until the writer's deadline: issue 22 finding 2)
old-marks-reader|test|fail|shared|-DOLD_MARKS -DNO_EXIT_CHECK|old rules (the same, seen by a reader refused after its writer left)
clock|test|pass|clock||the time a script ran at, checked when its answer is read: two jumps either way, the reserve covers U (a tolerance at each script and per sample)
clock-3jumps|full|pass|clock|-DJUMPS=3|the same with three jumps
old-clock|test|fail|clock|-DOLD_CLOCK|old rules (the window alone: a jump forward smaller than the node timeout, clock_small_jump.py)
clock-residual|test|found|clock|-DRES=2 -DJUMPS=3|what slips through: a reserve below U, three moves within the tolerance (DESIGN section 4, Rule 7)
semcount|test|pass|semcount||a semaphore's record on one master: "<N>c" made where none was, kept as found, the count trusted under "<N>c" only, old builds beside (2 grants each)
semcount-3|full|pass|semcount|-DBUDGET=3|the same, 3 grants each
old-sem-naive|test|fail|semcount|-DNAIVE -DNO_COUNTED_CHECK|naive rule (a release trusts the count under every record): a build before the count's slot is missed, its record deleted
rejected-sem-nomargin|test|fail|semcount|-DNO_MARGIN -DNO_COUNTED_CHECK|rejected rule (a refusal drops members whose score is now): a key in its last moments uncounted, its record replaced, then extended
rejected-sem-remark|test|fail|semcount|-DREMARK -DNO_COUNTED_CHECK|rejected rule (a grant marks a record it found): "<N>" turned "<N>c" over a slot the count does not name
rejected-sem-oldreads|test|fail|semcount|-DOLD_READS_MARK -DNO_COUNTED_CHECK|rejected marker (one a build before it reads as its own number): an old build grants under "<N>c"
EOF
}

command -v "$SPIN" >/dev/null 2>&1 || {
  echo "model: '$SPIN' not found (Debian: apt-get install spin)"; exit 2; }

# check one variant: writes OUTDIR/NAME/result (one line: clean|cex|error ...)
check_one() {
  name=$1 expect=$2 model=$3 flags=$4 set=$5
  d=$out/$name
  # a verifier built before from the same pan.c with the same options is kept
  mkdir -p "$d" && (cd "$d" && rm -f -- *.pml *.trail pan.out result spin.log cc.log flags) || return 1
  cp "$here/$model.pml" "$d/$model.pml"
  echo "$model.pml $flags" > "$d/flags"
  (
    cd "$d" || exit 1
    # shellcheck disable=SC2086
    "$SPIN" $flags -a "$model.pml" > spin.log 2>&1 || { echo "error spin -a failed (see $d/spin.log)"; exit 0; }
    # Compiling redlock.pml's pan.c costs more CPU than most searches here (gcc -O2
    # 8 s, -O1 4 s, -O0 1.5 s; clang -O0 0.5 s); a state costs about 5 us at -O1 or
    # -O2, 9 us at -O0.  So: -O0 (CC0) for a counterexample (it comes within a few
    # hundred thousand states) and for a small search, -O1 for the larger searches
    # of `make test-model` (O1 below), -O2 with COLLAPSE (a third of the memory) for
    # the large ones of test-model-full (new-faults: about 4 GB).
    cc=$MODEL_CC
    if [ "$expect" = pass ] && [ "$set" = full ]; then opt="-O2 -DMEMLIM=4608 -DCOLLAPSE"; hash=-w25
    elif [ "$expect" = pass ] && echo " $O1 " | grep -q " $name "; then opt="-O1 -DMEMLIM=2048"; hash=-w24
    else cc=$CC0 opt="-O0 -DMEMLIM=2048"; hash=-w24; fi
    { echo "$cc -w $opt -DSAFETY -DNOFAIR"; cat pan.[bchmpt]; } > pan.src
    if [ -x pan ] && cmp -s pan.src pan.src.built; then :; else
      rm -f pan pan.src.built
      # shellcheck disable=SC2086
      "$cc" -w $opt -DSAFETY -DNOFAIR -o pan pan.c > cc.log 2>&1 || { echo "error cc failed (see $d/cc.log)"; exit 0; }
      mv pan.src pan.src.built
    fi
    ./pan -m1000000 -E $hash > pan.out 2>&1
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1)
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' pan.out | head -1)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
    what=$(sed -n 's/^pan:1: assertion violated \(.*\) (at depth.*/\1/p' pan.out | head -1)
    if [ "${errors:-x}" = 0 ]; then
      # a clean verdict only from a complete search
      if grep -qE 'max search depth too small|Search not completed|out of memory|MEMLIM' pan.out; then
        echo "error incomplete search after $states states (see $d/pan.out)"
      else
        echo "clean $states ${secs:-?}"
      fi
    elif [ -n "$what" ]; then
      # the property: redlock.pml's two by their variables, the others by name (P_...)
      prop=$(echo "$what" | sed -n 's/.*P_\([a-z_]*\).*/\1/p' | tr _ ' ')
      case $what in
        *P_*) kind=$prop ;;
        *HM*) kind="two holders at once" ;;
        *lastT*) kind="a token not larger than the one before" ;;
        *) kind="assertion $what (a model bound, not a property)" ;;
      esac
      case $what in *P_*|*HM*|*lastT*) ok=cex ;; *) ok=error ;; esac
      echo "$ok $states ${secs:-?} $kind"
    else
      echo "error no verdict (see $d/pan.out)"
    fi
  ) > "$d/result"
}

if [ "${1:-}" = --one ]; then          # internal: check one variant (run by xargs)
  line=$(variants | grep "^$2|")
  IFS='|' read -r n s e mo f w <<EOF2
$line
EOF2
  check_one "$n" "$e" "$mo" "$f" "$s"
  exit 0
fi

trail() {   # the counterexample of variant $1 (model $2, flags $3), one event a line
  (cd "$out/$1" && "$SPIN" -t $3 "$2.pml" 2>&1 | sed -n 's/^ *MSC: /    /p')
  echo "    (replay it: cd $out/$1 && $SPIN -t -p $3 $2.pml)"
}

names=$*
start=$(date +%s)
list=$(variants)
if [ -n "$names" ]; then
  list=$(echo "$list" | while IFS='|' read -r n rest; do
    for w in $names; do [ "$w" = "$n" ] && echo "$n|$rest"; done; done)
elif [ "$SET" != full ]; then
  list=$(echo "$list" | grep "^[^|]*|$SET|")
fi
[ -n "$list" ] || { echo "model: no such variant: $names"; exit 2; }

echo "$list" | cut -d'|' -f1 | xargs -P "$JOBS" -I{} sh "$0" "$out" --one {}

passed=0 failed=0 found=0
echo "$list" > "$out/variants"
while IFS='|' read -r n s e mo f w; do
  set -- $(cat "$out/$n/result" 2>/dev/null || echo "error no result")
  verdict=$1; shift
  if [ "$verdict" = clean ] && [ "$e" = pass ]; then
    echo "model: $n: $w: no counterexample in $1 states (${2}s)"
    passed=$((passed + 1))
  elif [ "$verdict" = cex ] && [ "$e" = fail ]; then
    states=$1 secs=$2; shift 2
    echo "model: $n: $w: counterexample found, as expected ($*; $states states)"
    passed=$((passed + 1))
  elif [ "$verdict" = cex ] && [ "$e" = found ]; then
    states=$1 secs=$2; shift 2
    echo "model: $n: $w: counterexample found ($*; $states states): a defect of the service today (README, \"Found\"; the trail: cd $out/$n && $SPIN -t $f $mo.pml)"
    passed=$((passed + 1)) found=$((found + 1))
  elif [ "$verdict" = clean ]; then
    echo "model: FAIL $n: $w: no counterexample in $1 states, one was expected"
    failed=$((failed + 1))
  elif [ "$verdict" = cex ]; then
    states=$1 secs=$2; shift 2
    echo "model: FAIL $n: $w: COUNTEREXAMPLE ($*); the trail:"
    trail "$n" "$mo" "$f"
    failed=$((failed + 1))
  else
    echo "model: FAIL $n: $w: $*"
    failed=$((failed + 1))
  fi
done <<EOF
$list
EOF
echo "model: $(($(date +%s) - start))s in all"
echo "$passed passed ($found of them defects of today's service, found: README), $failed failed"
[ "$failed" -eq 0 ]
