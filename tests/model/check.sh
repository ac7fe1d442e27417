#!/bin/sh
# tests/model/check.sh -- check tests/model/redlock.pml with spin, every variant:
# the new rules must show no counterexample, each old rule must show one.
# Called by `make test-model` (tests/model/model.mk); usage: check.sh OUTDIR [NAME...]
#
# Environment: SPIN (spin), MODEL_CC (cc), JOBS (2: variants checked at once),
# NEW_FLAGS (extra -D flags for the new rules, e.g. "-DADOPT_FIX -DBOOT_FIX").
set -u

out=${1:?usage: check.sh OUTDIR [NAME...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
model=$here/redlock.pml
SPIN=${SPIN:-spin}
MODEL_CC=${MODEL_CC:-cc}
JOBS=${JOBS:-2}
NEW_FLAGS=${NEW_FLAGS:-}

# name | expect (pass: no counterexample; fail: one) | spin flags | what it is.
# The new-rule checks are sized to finish in well under a minute each; the old rules
# are the new ones with one rule of today's service put back (-DOLD_RULES: all).
variants() {
  cat <<EOF
new-faults|pass|$NEW_FLAGS -DRETRY1 -DMAXF=1 -DMAXZ=1|new rules: a retry, 1 fault, 1 freeze
new-retries|pass|$NEW_FLAGS -DRETRY1 -DRETRY2 -DMAXF=0 -DMAXZ=0|new rules: both clients retry, no faults
new-2faults|pass|$NEW_FLAGS -DMAXF=2 -DMAXZ=1|new rules: 2 faults, 1 freeze
new-fine|pass|$NEW_FLAGS -DFINE -DMAXF=1 -DMAXZ=0|new rules: every request its own step, 1 fault
old-all|fail|-DOLD_RULES -DRETRY1 -DMAXF=1 -DMAXZ=0|old rules (all of today's rules)
old-restart|fail|$NEW_FLAGS -DOLD_RESTART -DMAXF=1 -DMAXZ=0|old rules (restart with marker trusted at once)
old-wipe|fail|$NEW_FLAGS -DOLD_WIPE -DMAXF=1 -DMAXZ=0|old rules (marker checked at connect only)
old-fresh|fail|$NEW_FLAGS -DOLD_FRESH -DMAXF=1 -DMAXZ=0|old rules (#fresh bootstrap window)
old-repair|fail|$NEW_FLAGS -DOLD_REPAIR -DMAXF=1 -DMAXZ=0|old rules (repair remembered by one instance)
old-cleanup|fail|$NEW_FLAGS -DNO_TAGS -DRETRY1 -DMAXF=0 -DMAXZ=0|old rules (clean-up releases by lease)
old-nofloor|fail|$NEW_FLAGS -DNO_FLOOR -DMAXF=0 -DMAXZ=0|without the floor (counters that expire read 0)
draft-adopt|fail|-DBOOT_FIX -DRETRY1 -DMAXF=0 -DMAXZ=1|first draft (a clean-up could take an adopted key)
draft-boot|fail|-DADOPT_FIX -DFINE -DMAXF=1 -DMAXZ=0|first draft (a bare master joined while no counter showed a grant)
EOF
}

command -v "$SPIN" >/dev/null 2>&1 || {
  echo "model: '$SPIN' not found (Debian: apt-get install spin)"; exit 2; }

# check one variant: writes OUTDIR/NAME/result (one line: pass|fail|error TEXT)
check_one() {
  name=$1 expect=$2 flags=$3
  d=$out/$name
  rm -rf "$d" && mkdir -p "$d" || return 1
  cp "$model" "$d/redlock.pml"
  (
    cd "$d" || exit 1
    # shellcheck disable=SC2086
    "$SPIN" $flags -a redlock.pml > spin.log 2>&1 || { echo "error spin -a failed (see $d/spin.log)"; exit 0; }
    # Counterexamples are found within a few thousand states: a quick build will do.
    if [ "$expect" = pass ]; then opt="-O2 -DMEMLIM=4096"; hash=-w26; else opt="-O0 -DMEMLIM=1024"; hash=-w20; fi
    # shellcheck disable=SC2086
    "$MODEL_CC" -w $opt -DSAFETY -DNOFAIR -o pan pan.c > cc.log 2>&1 || { echo "error cc failed (see $d/cc.log)"; exit 0; }
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
      case $what in
        *HM*) kind="two holders at once" ;;
        *lastT*) kind="a token not larger than the one before" ;;
        *) kind="assertion $what (a model bound, not a property)" ;;
      esac
      case $what in *HM*|*lastT*) ok=cex ;; *) ok=error ;; esac
      echo "$ok $states ${secs:-?} $kind"
    else
      echo "error no verdict (see $d/pan.out)"
    fi
  ) > "$d/result"
}

if [ "${1:-}" = --one ]; then          # internal: check one variant (run by xargs)
  line=$(variants | grep "^$2|")
  IFS='|' read -r n e f w <<EOF2
$line
EOF2
  check_one "$n" "$e" "$f"
  exit 0
fi

names=$*
start=$(date +%s)
list=$(variants)
if [ -n "$names" ]; then
  list=$(echo "$list" | while IFS='|' read -r n rest; do
    for w in $names; do [ "$w" = "$n" ] && echo "$n|$rest"; done; done)
fi
[ -n "$list" ] || { echo "model: no such variant: $names"; exit 2; }

# JOBS variants at a time, the longest first
echo "$list" | cut -d'|' -f1 | xargs -P "$JOBS" -I{} sh "$0" "$out" --one {}

passed=0 failed=0
echo "$list" > "$out/variants"
while IFS='|' read -r n e f w; do
  set -- $(cat "$out/$n/result" 2>/dev/null || echo "error no result")
  verdict=$1; shift
  if [ "$verdict" = clean ] && [ "$e" = pass ]; then
    echo "model: $w: no counterexample in $1 states (${2}s)"
    passed=$((passed + 1))
  elif [ "$verdict" = cex ] && [ "$e" = fail ]; then
    states=$1 secs=$2; shift 2
    echo "model: $w: counterexample found, as expected ($*; $states states)"
    passed=$((passed + 1))
  elif [ "$verdict" = clean ]; then
    echo "model: FAIL $w: no counterexample in $1 states, one was expected"
    failed=$((failed + 1))
  elif [ "$verdict" = cex ]; then
    states=$1 secs=$2; shift 2
    echo "model: FAIL $w: COUNTEREXAMPLE ($*); the trail:"
    (cd "$out/$n" && "$SPIN" -t $f redlock.pml 2>&1 | sed -n 's/^ *MSC: /    /p')
    echo "    (replay it: cd $out/$n && $SPIN -t -p $f redlock.pml)"
    failed=$((failed + 1))
  else
    echo "model: FAIL $w: $*"
    failed=$((failed + 1))
  fi
done <<EOF
$list
EOF
echo "model: $(($(date +%s) - start))s in all"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
