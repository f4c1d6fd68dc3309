#!/usr/bin/env bash
# tools/make_calib.sh — the calibration and held-out texts of data/calib/, written by
# kjv-7m itself: samples from BOS at temperature 0.9 (min-p 0.05), one seed each, until
# the file reaches the size asked for. Self-generated text is in the model's own
# distribution (what fidelity is measured against) and shares nothing with the test
# prompts of ../shared/models/kjv-7m/reference.json by construction of the seeds.
#   tools/make_calib.sh NIBBLE MODEL OUT BYTES FIRST_SEED
# data/calib/kjv-7m-calib.txt: 102400 bytes from seed 1; kjv-7m-heldout.txt: 20480 from
# seed 100001 (see docs/quantization.md "GPTQ").
set -euo pipefail
nibble=${1:?usage: make_calib.sh NIBBLE MODEL OUT BYTES FIRST_SEED}
model=$2 out=$3 bytes=$4 seed=$5
tmp="$out.tmp.$$"
: > "$tmp"
while [ "$(stat -c %s "$tmp")" -lt "$bytes" ]; do
    "$nibble" run -m "$model" --path source -p "" -n 255 --temp 0.9 -s "$seed" -t 1 \
        2>/dev/null >> "$tmp"
    printf '\n' >> "$tmp"
    seed=$((seed + 1))
done
head -c "$bytes" "$tmp" > "$out"
rm -f "$tmp"
echo "$out: $(stat -c %s "$out") bytes, seeds $5..$((seed - 1))"
