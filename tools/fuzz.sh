#!/usr/bin/env bash
# tools/fuzz.sh — run one libFuzzer target for a while and keep what it found.
#
#   tools/fuzz.sh NAME SECONDS [JOBS]      NAME: nib or fuzz_nib, ... (see --list)
#   tools/fuzz.sh --list                   the targets (tests/fuzz/fuzz_*.c)
#
# 1. Builds build/fuzz/fuzz_NAME if needed (configuring build/fuzz with the dev
#    preset the first time: clang, ASan + UBSan, NIBBLE_FUZZ=ON).
# 2. Fuzzes a scratch copy of tests/fuzz/corpus/NAME (build/fuzz/fuzz-scratch/NAME)
#    for SECONDS: one process, or with JOBS > 1 libFuzzer's -fork=JOBS (which goes on
#    after a crash and collects them all). Each input may take 10 s (-timeout) and
#    4 GB (-rss_limit_mb); ASan reports leaks. The dictionary
#    tests/fuzz/dict/NAME.dict is used when there is one. The log goes to
#    build/fuzz/fuzz-logs/NAME.log.
# 3. Merges the new inputs back into tests/fuzz/corpus/NAME with -merge=1: only those
#    that reach code (edges) the committed seeds do not (-use_counters=0 in the merge:
#    a new hit count of a known edge, which the fuzzing itself keeps, is not enough
#    to be committed), and only inputs of at most CAP bytes
#    (4096; 8192 for gguf_tokenizer, whose seeds are 1-7 KB vocabularies that the
#    mutations start from). The corpus is committed and replayed by every ctest run
#    (the fuzz-smoke tests), so it stays a set of small files; a large input found
#    once is not worth its replay time. (During the run libFuzzer may still grow
#    inputs up to the largest seed, or 4096 bytes.) NIBBLE_FUZZ_CAP overrides CAP.
# 4. Prints one line: target, seconds, total execs, exec/s, final cov: and ft: (from
#    libFuzzer's last stats line), corpus files added, crashes found. Crash, leak,
#    timeout and out-of-memory inputs are kept in build/fuzz/fuzz-crashes/NAME/
#    (reproduce: build/fuzz/fuzz_NAME FILE); the script then exits 1.
#
# Environment: NIBBLE_FUZZ_BUILD (build folder, default build/fuzz),
# NIBBLE_FUZZ_BUILD_JOBS (parallel compile jobs, default: ninja's choice),
# NIBBLE_FUZZ_NO_BUILD=1 (use the binary as it is), NIBBLE_FUZZ_CAP (see 3).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
corpus_root=$root/tests/fuzz/corpus

list_targets() {
    local f
    for f in "$root"/tests/fuzz/fuzz_*.c; do
        f=${f##*/}
        echo "${f%.c}"
    done
}

usage() {
    echo "usage: $0 NAME SECONDS [JOBS]    (NAME from: $0 --list)" >&2
    exit 2
}

if [[ ${1:-} == --list ]]; then
    list_targets
    exit 0
fi
[[ $# -ge 2 && $# -le 3 ]] || usage
name=${1#fuzz_}
seconds=$2
jobs=${3:-1}
[[ $seconds =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] || usage
target=fuzz_$name
if [[ ! -f $root/tests/fuzz/$target.c ]]; then
    echo "$0: no target '$1'; the targets are:" >&2
    list_targets >&2
    exit 2
fi
seeds=$corpus_root/$name
mkdir -p "$seeds"

case $name in
gguf_tokenizer) cap=8192 ;;
*) cap=4096 ;;
esac
cap=${NIBBLE_FUZZ_CAP:-$cap}

build=${NIBBLE_FUZZ_BUILD:-$root/build/fuzz}
[[ $build == /* ]] || build=$root/$build

# ---- build
if [[ ${NIBBLE_FUZZ_NO_BUILD:-0} != 1 ]]; then
    if [[ ! -f $build/CMakeCache.txt ]]; then
        (cd "$root" && cmake --preset dev -B "$build" >/dev/null)
    fi
    cmake --build "$build" --target "$target" ${NIBBLE_FUZZ_BUILD_JOBS:+-j "$NIBBLE_FUZZ_BUILD_JOBS"} \
        >"$build/fuzz-build-$name.log" 2>&1 || {
        tail -30 "$build/fuzz-build-$name.log" >&2
        echo "$0: building $target failed (log: $build/fuzz-build-$name.log)" >&2
        exit 2
    }
fi
fuzzer=$build/$target
[[ -x $fuzzer ]] || {
    echo "$0: $fuzzer is missing (is $build configured with NIBBLE_FUZZ=ON and clang?)" >&2
    exit 2
}

# ---- fuzz a scratch copy of the corpus
scratch=$build/fuzz-scratch/$name
crashes=$build/fuzz-crashes/$name
logs=$build/fuzz-logs
rm -rf "$scratch" "$scratch.new"
mkdir -p "$scratch" "$scratch.new" "$crashes" "$logs"
cp -pr "$seeds"/. "$scratch"/
log=$logs/$name.log

# -max_len: the largest seed, at least 4096 (libFuzzer's own default), so no seed is cut
max_len=4096
for f in "$seeds"/*; do
    [[ -f $f ]] || continue
    s=$(stat -c %s "$f")
    if ((s > max_len)); then max_len=$s; fi
done

opts=(-timeout=10 -rss_limit_mb=4096 -max_len="$max_len" -artifact_prefix="$crashes/")
dict=$root/tests/fuzz/dict/$name.dict
if [[ -f $dict ]]; then opts+=(-dict="$dict"); fi
if ((jobs > 1)); then
    opts+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

crash_list() { find "$crashes" -maxdepth 1 -type f | sort; }
crashes_before=$(crash_list)
echo "$target: fuzzing for $seconds s with $jobs job(s) (log: $log)" >&2
t0=$(date +%s)
rc=0
"$fuzzer" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 "$scratch" \
    >"$log" 2>&1 || rc=$?
t1=$(date +%s)

# ---- the numbers: the last "#N ... cov: C ft: F" line, and the final stats if printed
last=$(grep -E '^#[0-9]+:?[[:space:]].*cov: [0-9]+' "$log" | tail -1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
[[ -n $execs ]] || execs=$(sed -E -n 's/^#([0-9]+).*/\1/p' <<<"$last")
execs=${execs:-0}
eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
# (fork mode prints no final stats, and a run that stops at a crash may print 0)
[[ -n $eps && $eps != 0 ]] || eps=$((execs / (t1 - t0 > 0 ? t1 - t0 : 1)))
cov=$(sed -E -n 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
ft=$(sed -E -n 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")

# ---- merge the new small inputs into the committed corpus
for f in "$scratch"/*; do
    [[ -f $f ]] || continue
    b=${f##*/}
    [[ -e $seeds/$b ]] && continue
    if (($(stat -c %s "$f") <= cap)); then cp -p "$f" "$scratch.new/"; fi
done
n_before=$(find "$seeds" -maxdepth 1 -type f | wc -l)
if [[ -n $(ls -A "$scratch.new") ]]; then
    "$fuzzer" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
        -artifact_prefix="$crashes/" "$seeds" "$scratch.new" >>"$log" 2>&1 ||
        echo "$target: the merge failed (see $log)" >&2
fi
n_after=$(find "$seeds" -maxdepth 1 -type f | wc -l)
new_crashes=$(comm -13 <(echo "$crashes_before") <(crash_list) | sed '/^$/d')
n_crash=$(sed '/^$/d' <<<"$new_crashes" | wc -l)
# a run that died without leaving an input behind still counts as a failure
if ((rc != 0 && n_crash == 0)); then
    n_crash=1
    echo "$target: the fuzzer exited with $rc (see $log)" >&2
fi

printf '%s: %s s, %s execs, %s exec/s, cov: %s ft: %s, %d corpus files added, %d crashes\n' \
    "$target" "$seconds" "$execs" "$eps" "${cov:-?}" "${ft:-?}" $((n_after - n_before)) "$n_crash"
if ((n_crash > 0)); then
    if [[ -n $new_crashes ]]; then sed 's/^/  /' <<<"$new_crashes" >&2; fi
    echo "$target: reproduce with $fuzzer FILE (inputs in $crashes/)" >&2
    exit 1
fi
