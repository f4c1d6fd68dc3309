#!/usr/bin/env bash
# nibble bench: llama-bench's JSON field names plus nibble's, every output format, the
# profile table, -d (tests on a filled context) and its records, and errors.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
"$bin" bench 2>"$tmp/err"; ok test $? -eq 1
"$bin" bench -m x -o xml 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "md, json, jsonl or csv" "$tmp/err"
# -d: a depth is a whole number >= 0, a list has no empty items, and a context too small
# for depth + the larger test is refused (naming the sizes) before any model is opened
for d in -1 abc 1,,2 64, 64x; do
  "$bin" bench -m x -d "$d" 2>"$tmp/err"; ok test $? -eq 1
  ok grep -q -- "-d: '" "$tmp/err"
done
"$bin" bench -m x --depth=-5 2>"$tmp/err"; ok test $? -eq 1
ok grep -q -- "--depth: '-5' is not a whole number" "$tmp/err"
"$bin" bench -m x -d 64 -p 8 -n 4 -c 32 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "context of 32 tokens (-c) is too small: depth 64 + 8 prompt tokens need 72" "$tmp/err"
"$bin" bench -m x -d 16,100 -p 4 -n 8 -c 100 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "depth 100 + 8 generated tokens need 108" "$tmp/err"
"$bin" bench --help >"$tmp/h"; ok grep -q -- "-d N\[,N...\]" "$tmp/h"
# a sliding-window model (spark-tiny, window 16) whose pp test (32 tokens, batches of 8)
# ran past the keys the depth needs: the tg test fills the context again, untimed
"$bin" synth --shape spark-tiny --dtype f32 -o "$tmp/spark.gguf" >/dev/null 2>&1; ok test $? -eq 0
"$bin" bench -m "$tmp/spark.gguf" --path source -d 64 -p 32 -b 8 -n 4 -r 1 -t 2 -o jsonl \
  >"$tmp/sw" 2>"$tmp/err"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])]; assert [x["test"] for x in d]==["pp32 @ d64", "tg4 @ d64"]' "$tmp/sw"
ok test "$(grep -c "filling the context with 64 tokens" "$tmp/err")" -eq 2
if [ ! -f "$gguf" ]; then echo "kjv-7m not found: skipped"; [ "${CI:-}" = "true" ] && exit 1; exit 0; fi
"$bin" bench -m "$gguf" --path source -p 16 -n 4 -r 2 -t 2 -o json >"$tmp/j" 2>/dev/null; ok test $? -eq 0
for f in model_filename n_prompt n_gen n_depth test n_threads avg_ts stddev_ts samples_ts samples_ns weight_path kernel bits_per_weight best_ts median_ts spread_pct; do
  ok grep -q "\"$f\"" "$tmp/j"
done
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==2 and d[0]["n_prompt"]==16 and d[1]["n_gen"]==4 and len(d[0]["samples_ts"])==2' "$tmp/j"
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [(x["n_depth"], x["test"]) for x in d]==[(0, "pp16"), (0, "tg4")]' "$tmp/j"
# -d 64: both tests on top of 64 filled tokens, named as llama-bench names them
"$bin" bench -m "$gguf" --path source -d 64 -p 8 -n 4 -r 1 -t 2 -o json >"$tmp/dj" 2>"$tmp/err"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [(x["n_depth"], x["test"], x["n_prompt"], x["n_gen"]) for x in d]==[(64, "pp8 @ d64", 8, 0), (64, "tg4 @ d64", 0, 4)]' "$tmp/dj"
ok test "$(grep -c "filling the context with 64 tokens" "$tmp/err")" -eq 1
# -p 0: the tg test alone, still on the filled context; --n-depth= spelling
"$bin" bench -m "$gguf" --path source --n-depth=64 -p 0 -n 4 -r 2 -t 2 -o jsonl >"$tmp/dl" 2>"$tmp/err"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])]; assert len(d)==1 and d[0]["n_depth"]==64 and d[0]["test"]=="tg4 @ d64" and len(d[0]["samples_ts"])==2' "$tmp/dl"
ok test "$(grep -c "filling the context with 64 tokens" "$tmp/err")" -eq 2
"$bin" bench -m "$gguf" --path source -d 64 -p 8 -n 4 -r 1 -t 2 >"$tmp/dm" 2>/dev/null; ok test $? -eq 0
ok grep -q "| pp8 @ d64 |" "$tmp/dm"
ok grep -q "| tg4 @ d64 |" "$tmp/dm"
# a list: each depth is its own pair of tests, in the order given, in CSV too; --record
# writes one record per depth, a depth's beside (not over) the depth-0 one
"$bin" bench -m "$gguf" --path w4a8 --priority speed --no-cache -d 0,64 -p 8 -n 4 -r 1 -t 2 -o csv \
  --record "$tmp/rec" >"$tmp/dc" 2>/dev/null; ok test $? -eq 0
ok python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1], newline=""))); assert [(x["n_depth"], x["test"]) for x in r]==[("0", "pp8"), ("0", "tg4"), ("64", "pp8 @ d64"), ("64", "tg4 @ d64")]' "$tmp/dc"
ok test "$(ls "$tmp/rec" | wc -l)" -eq 2
ok python3 -c 'import glob,json,sys; f=glob.glob(sys.argv[1]+"/*-w4a8-t2-d64.json"); assert len(f)==1; r=json.load(open(f[0])); assert r["n_depth"]==64 and r["pp"]["n_prompt"]==8 and r["tg"]["n_gen"]==4' "$tmp/rec"
ok python3 -c 'import glob,json,sys; f=glob.glob(sys.argv[1]+"/*-w4a8-t2.json"); assert len(f)==1; assert json.load(open(f[0]))["n_depth"]==0' "$tmp/rec"
# each record carries its key: this CPU's key, the path, the kernel that ran, its features
ok python3 -c 'import glob,json,sys; r=json.load(open(glob.glob(sys.argv[1]+"/*-w4a8-t2.json")[0])); k=r["cpu"]["cpu_key"]; assert r["record_key"].startswith(k+"/w4a8/"+r["kernel"].split()[0]+"/"), r' "$tmp/rec"
"$bin" bench -m "$gguf" --path source -p 8 -n 2 -r 1 -t 2 -o csv >"$tmp/c" 2>/dev/null; ok test "$(wc -l < "$tmp/c")" -eq 3
"$bin" bench -m "$gguf" --path source -p 8 -n 2 -r 1 -t 2 -o jsonl >"$tmp/l" 2>/dev/null; ok test "$(wc -l < "$tmp/l")" -eq 2
# any file name gives valid JSON and CSV: quotes, backslashes, a newline, non-ASCII
weird=$(printf "$tmp/we\"ird\\\\na\nme-\303\251\346\226\207.gguf")
cp "$gguf" "$weird"
"$bin" bench -m "$weird" --path source -p 8 -n 2 -r 1 -t 2 -o json >"$tmp/wj" 2>/dev/null; ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==2 and all(x["model_filename"]==sys.argv[2] for x in d)' "$tmp/wj" "$weird"
"$bin" bench -m "$weird" --path source -p 8 -n 2 -r 1 -t 2 -o jsonl >"$tmp/wl" 2>/dev/null; ok test $? -eq 0
ok python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])]; assert len(d)==2 and all(x["model_filename"]==sys.argv[2] for x in d)' "$tmp/wl" "$weird"
"$bin" bench -m "$weird" --path source -p 8 -n 2 -r 1 -t 2 -o csv >"$tmp/wc" 2>/dev/null; ok test $? -eq 0
ok python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1], newline=""))); assert len(r)==2 and all(x["model_filename"]==sys.argv[2] for x in r)' "$tmp/wc" "$weird"
# the shared model and context options: --model=, --threads=, -c/--ctx-size, -b, and -m
# given twice compares two models
"$bin" bench --model="$gguf" -m "$gguf" --path=source -p 8 -n 2 -r 1 --threads=2 -c 32 -b 4 \
  -o jsonl >"$tmp/two" 2>/dev/null; ok test $? -eq 0
ok test "$(wc -l < "$tmp/two")" -eq 4
ok python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])]; assert all(x["n_threads"]==2 for x in d)' "$tmp/two"
"$bin" bench -m "$gguf" --path source -p 32 -n 8 -r 1 -t 2 --ctx-size 16 >/dev/null 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "context" "$tmp/err"
"$bin" bench -m "$gguf" --path source -p 8 -n 4 -r 1 -t 2 --profile >"$tmp/p" 2>/dev/null; ok test $? -eq 0
ok grep -q "gemm qkv" "$tmp/p"
ok grep -q "prompt processing" "$tmp/p"
if command -v gnuplot >/dev/null; then
  "$bin" bench -m "$gguf" --path source -p 8 -n 2 -r 1 -t 2 --plot "$tmp/b.png" >/dev/null 2>&1; ok test -s "$tmp/b.png"
fi
echo "cli bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
