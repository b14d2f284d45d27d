#!/usr/bin/env bash
# kernels_test.sh: HG_KERNELS as a user sets it.  For each path (portable,
# avx2, avx512bf16): where this CPU has it (its /proc/cpuinfo flags), every
# scene's golden check passes with the path forced, for run and compare, and
# the JSON report's "kernels" field names it; where the CPU lacks it, the
# test says "skipped: CPU lacks <path>" and checks that run and compare
# refuse it as a usage error (exit 2) naming the value and the missing cpuid
# feature.  An unknown value is a usage error naming it, never a fallback.
. "$(dirname "$0")/lib.sh" "$@"

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do case "$flags" in *" $f "*) ;; *) echo "$f"; return 1 ;; esac; done; }
scenes="vector_add bgemm paged_attention qwen3_decode"

for path in portable avx2 avx512bf16; do
    case $path in
    portable) missing= ;;
    avx2) missing=$(has avx2 fma f16c) ;;
    avx512bf16) missing=$(has avx512f avx512bw avx512vl avx512dq fma avx512_bf16) ;;
    esac
    if [ -n "$missing" ]; then
        echo "     skipped: CPU lacks $path (cpuid $missing): checking that it is refused"
        for cmd in run compare; do
            HG_KERNELS=$path expect_rc "$cmd HG_KERNELS=$path: usage error" 2 $cmd vector_add \
                --param n=100 --rounds 2
            check "$cmd HG_KERNELS=$path: names the value and $missing" \
                grep -q "HG_KERNELS=$path.*$missing" "$TMP/err"
        done
        continue
    fi
    for s in $scenes; do
        HG_KERNELS=$path expect_rc "run $s, HG_KERNELS=$path: golden passes" 0 run "$s" \
            --rounds 2 --json "$TMP/$s.json"
        check "run $s, HG_KERNELS=$path: report says kernels $path" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["kernels"] == sys.argv[2], r["kernels"]' \
            "$TMP/$s.json" "$path"
    done
    HG_KERNELS=$path expect_rc "compare paged_attention, HG_KERNELS=$path: golden passes" 0 \
        compare paged_attention --rounds 2 --repeat 1 --json "$TMP/cmp.json"
    check "compare, HG_KERNELS=$path: report says kernels $path" python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); assert r["kernels"] == sys.argv[2], r["kernels"]' \
        "$TMP/cmp.json" "$path"
done

for cmd in run compare; do
    HG_KERNELS=avx9000 expect_rc "$cmd HG_KERNELS=avx9000: usage error" 2 $cmd vector_add \
        --param n=100 --rounds 2
    check "$cmd HG_KERNELS=avx9000: names the value and the choices" \
        grep -q "HG_KERNELS='avx9000': want portable, avx2 or avx512bf16" "$TMP/err"
done

finish
