#!/usr/bin/env bash
# bench/pareto.sh — issue 33's ladder: llama.cpp's quantizations of a model (plain and with
# an importance matrix from the same calibration text) beside nibble's builds of it, each
# measured for bytes, held-out KL against the float model and greedy reproduction of the
# float model's continuations; one table (markdown, stdout), one JSONL (OUT/pareto.jsonl)
# and one PNG (KL against bytes, OUT/pareto.png; gnuplot-nox).
#
#   bench/pareto.sh MODEL-f32.gguf CALIB.txt HELDOUT.txt REFERENCE.json [OUT]
#
# REFERENCE.json: {"cases": [{"text": ..., "prompt": [ids with BOS]}, ...]} as
# ../shared/models/kjv-7m/reference.json (greedy: -n N tokens of each prompt).
# How each side is measured:
#   KL      chunks of 256 tokens, BOS first, the second half scored, each side on its own
#           engine: llama-perplexity --kl-divergence for llama.cpp's files, `nibble eval
#           --ppl-chunks 256` for nibble's
#   greedy  every file's continuations against one float continuation, token for token:
#           `nibble eval` against the f32 model runs nibble's builds and llama.cpp's GGUF
#           files alike (its k-quant kernels; their KL there is llama-perplexity's to ~1%),
#           with the reference's log-probability gap where each continuation left it
#           ("gaps": 0.001 is a near-tie the file broke the other way, 1 a real error)
#   greedy, own f32: llama.cpp's files also as llama-completion runs them, text against
#           its own f32 run's text (bench/llamacpp_greedy.py): each side against a
#           different float continuation, whose near-ties the CPU's kernels break
# env: LLAMA_BIN (folder with llama-quantize, llama-imatrix, llama-perplexity and
#      llama-completion, built outside the repository: docs/benchmarks.md; without it only
#      nibble's rows), NIBBLE_BIN (build/release/nibble), THREADS (2), N (48 greedy tokens),
#      RUNGS (Q3_K_M Q4_0 Q4_K_M Q5_K_M Q6_K Q8_0),
#      BUILDS (nibble's builds, `name=quantize options` separated by ';'; default below),
#      SPEED (a folder as bench/sidebyside.sh's DIR: qwen3-1.7b-q3_k_m.gguf ... -q8_0.gguf from
#      llama-quantize and qwen3-1.7b-q3.nib ... -q8.nib from `nibble quantize --recipe qN`:
#      each row's decode tok/s, tg128 best of SPEED_PASSES (2) interleaved passes on that
#      shape, goes in the table and colours its point; a tiny model's own decode speed
#      measures per-token overhead, not its format)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/pareto.sh MODEL-f32.gguf CALIB.txt HELDOUT.txt REFERENCE.json [OUT]}
calib=${2:?calibration text}
heldout=${3:?held-out text}
ref=${4:?reference.json}
out=${5:-/tmp/pareto}
bin=${NIBBLE_BIN:-build/release/nibble}
lb=${LLAMA_BIN:-}
t=${THREADS:-2}
n=${N:-48}
rungs=${RUNGS:-Q3_K_M Q4_0 Q4_K_M Q5_K_M Q6_K Q8_0}
g="--calib $calib --gptq --act-order"
builds=${BUILDS:-"q3 (speed)=--path w4a8 --recipe q3 $g;q4 (balanced, the default)=--path w4a8 --recipe q4 $g;q5=--path w4a8 --recipe q5 $g;q6=--path w4a8 --recipe q6 $g;q8=--path w4a8 --recipe q8 $g;w8a16=--path w8a16"}
mkdir -p "$out"
res="$out/pareto.jsonl"
: >"$res"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print('\n'.join('ids: ' + ','.join(map(str, c['prompt'])) for c in r['cases']))" "$ref" \
  >"$out/prompts.txt"

# nibble's builds: bytes, KL, greedy from one `nibble eval`
IFS=';' read -r -a blist <<<"$builds"
for b in "${blist[@]}"; do
  name=${b%%=*}
  opts=${b#*=}
  f="$out/nibble-$(echo "$name" | tr -c 'A-Za-z0-9.\n' '_').nib"
  # shellcheck disable=SC2086
  "$bin" quantize -m "$model" $opts -q -t "$t" -o "$f" >/dev/null 2>"$out/err" ||
    { echo "pareto: nibble quantize $opts failed: $(tail -1 "$out/err")" >&2; continue; }
  "$bin" eval --ref "$model" --test "$f" --prompts "$out/prompts.txt" -n "$n" \
    --text "$heldout" --ppl-chunks 256 -t "$t" -o json 2>/dev/null >"$out/eval.json"
  python3 - "$name" "$f" "$out/eval.json" >>"$res" <<'PY'
import json, os, sys
name, f, ev = sys.argv[1:4]
e = json.load(open(ev))
print(json.dumps({"side": "nibble", "build": name, "bytes": os.path.getsize(f),
                  "kl": e["ppl_chunks"]["mean_kl"], "same_top1": e["ppl_chunks"]["same_top1"],
                  "ppl": e["ppl_chunks"]["ppl_test"], "greedy": e["reproduced"],
                  "prompts": e["prompts"],
                  "gaps": sorted(c["ref_gap"] for c in e["cases"] if c["ref_gap"] is not None)}))
PY
done

# llama.cpp's ladder, plain and imatrix
if [ -n "$lb" ]; then
  "$lb/llama-imatrix" -m "$model" -f "$calib" -o "$out/imatrix.gguf" -c 256 -t "$t" \
    >"$out/imatrix.log" 2>&1 || { echo "pareto: llama-imatrix failed (see $out/imatrix.log)" >&2; exit 1; }
  "$lb/llama-perplexity" -m "$model" -f "$heldout" -c 256 -t "$t" \
    --kl-divergence-base "$out/base.kld" >"$out/base.log" 2>&1
  : >"$out/llama.jsonl"
  for r in $rungs; do
    for kind in plain imatrix; do
      f="$out/llama-$r-$kind.gguf"
      im=()
      [ "$kind" = imatrix ] && im=(--imatrix "$out/imatrix.gguf")
      "$lb/llama-quantize" "${im[@]}" "$model" "$f" "$r" "$t" >"$out/q.log" 2>&1 ||
        { echo "pareto: llama-quantize $r $kind failed" >&2; continue; }
      "$lb/llama-perplexity" -m "$f" -c 256 -t "$t" --kl-divergence \
        --kl-divergence-base "$out/base.kld" >"$out/kl-$r-$kind.log" 2>&1 ||
        echo "pareto: llama-perplexity on $f failed (see $out/kl-$r-$kind.log)" >&2
      python3 - "$r $kind" "$f" "$out/kl-$r-$kind.log" >>"$out/llama.jsonl" <<'PY'
import json, os, re, sys
name, f, log = sys.argv[1:4]
text = open(log, errors="replace").read()
def num(label):
    m = re.search(label + r"\s*:\s*([-0-9.eE+]+)", text)
    return float(m.group(1)) if m else None
top1 = num(r"Same top p")
print(json.dumps({"side": "llama.cpp", "build": name, "file": f, "bytes": os.path.getsize(f),
                  "kl": num(r"Mean\s+KLD"), "same_top1": top1 / 100 if top1 else None,
                  "ppl": num(r"Mean PPL\(Q\)")}))
PY
    done
  done
  # greedy against the one float continuation (nibble eval runs the GGUF files), and as
  # llama-completion runs them against its own f32 run (one run of it for all the files)
  mapfile -t files < <(python3 -c "import json,sys; [print(json.loads(l)['file']) for l in open(sys.argv[1])]" "$out/llama.jsonl")
  : >"$out/llama-greedy.jsonl"
  for f in "${files[@]}"; do
    "$bin" eval --ref "$model" --test "$f" --prompts "$out/prompts.txt" -n "$n" -t "$t" -o json \
      2>/dev/null >"$out/eval.json" || { echo "pareto: nibble eval $f failed" >&2; continue; }
    python3 -c 'import json,sys; e=json.load(open(sys.argv[2])); print(json.dumps({"file": sys.argv[1], "greedy": e["reproduced"], "prompts": e["prompts"], "gaps": sorted(c["ref_gap"] for c in e["cases"] if c["ref_gap"] is not None)}))' \
      "$f" "$out/eval.json" >>"$out/llama-greedy.jsonl"
  done
  python3 bench/llamacpp_greedy.py "$lb" "$ref" "$n" "$model" "${files[@]}" >"$out/greedy.md"
  python3 - "$out/llama.jsonl" "$out/greedy.md" "$out/llama-greedy.jsonl" >>"$res" <<'PY'
import json, sys
own = {}
for line in open(sys.argv[2]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 3 and "/" in c[2] and c[2].split("/")[0].isdigit():
        own[c[0]] = int(c[2].split("/")[0])
one = {d["file"]: d for d in map(json.loads, open(sys.argv[3]))}
for line in open(sys.argv[1]):
    r = json.loads(line)
    f = r.pop("file")
    g = one.get(f, {})
    r["greedy"], r["prompts"], r["gaps"] = g.get("greedy"), g.get("prompts"), g.get("gaps")
    r["greedy_own"] = own.get(f)
    print(json.dumps(r))
PY
fi

# decode speed of each rung's format on the 1.7 B shape, interleaved passes
: >"$out/speed.jsonl"
if [ -n "${SPEED:-}" ]; then
  for ((p = 1; p <= ${SPEED_PASSES:-2}; p++)); do
    for r in $rungs; do
      g="$SPEED/qwen3-1.7b-$(echo "$r" | tr 'A-Z' 'a-z').gguf"
      if [ -n "$lb" ] && [ -f "$g" ]; then
        "$lb/llama-bench" -m "$g" -p 0 -n 128 -t "$t" -r 1 -o jsonl 2>/dev/null >>"$out/speed.jsonl"
      fi
    done
    ms=()
    for f in "$SPEED"/qwen3-1.7b-*.nib; do [ -f "$f" ] && ms+=(-m "$f"); done
    if [ ${#ms[@]} -gt 0 ]; then
      "$bin" bench "${ms[@]}" -p 0 -n 128 -r 1 -t "$t" -o jsonl 2>/dev/null >>"$out/speed.jsonl"
    fi
  done
fi

# the table and the plot
python3 - "$res" "$out" "$out/speed.jsonl" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows.sort(key=lambda r: r["bytes"])
tg = {}  # "q4_k_m", "q4", ... -> best decode tok/s on the 1.7 B shape
for line in open(sys.argv[3]):
    d = json.loads(line)
    if d.get("n_prompt") or not d.get("n_gen"):
        continue
    key = os.path.basename(d["model_filename"]).rsplit(".", 1)[0].split("-", 2)[-1].lower()
    tg[key] = max(tg.get(key, 0), d["avg_ts"])
for r in rows:  # "Q4_K_M imatrix" -> q4_k_m; "q4 (balanced, the default)" -> q4
    r["tg"] = tg.get(r["build"].split()[0].lower())
print("| side | build | file bytes | mean KL | same top-1 | ppl | greedy | reference's gaps where "
      "it diverged (nats) | greedy, llama-completion vs its own f32 | tg128 tok/s, 1.7 B shape |")
print("|---|---|---|---|---|---|---|---|---|---|")
f = lambda v, fmt: fmt % v if v is not None else "-"
for r in rows:
    g = "%d/%d" % (r["greedy"], r["prompts"]) if r.get("greedy") is not None else "-"
    gaps = " ".join("%.3f" % x for x in r.get("gaps") or []) or "-"
    own = "%d/%d" % (r["greedy_own"], r["prompts"]) if r.get("greedy_own") is not None else "-"
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["side"], r["build"], "{:,}".format(r["bytes"]), f(r["kl"], "%.6f"),
        f(r["same_top1"] and 100 * r["same_top1"], "%.2f%%"), f(r["ppl"], "%.4f"), g, gaps, own,
        f(r["tg"], "%.1f")))
for side in ("nibble", "llama.cpp"):
    with open("%s/%s.dat" % (sys.argv[2], side.replace(".", "")), "w") as o:
        for r in rows:
            if r["side"] == side and r["kl"]:
                # one label per llama.cpp rung: its plain and imatrix points all but coincide
                label = r["build"].replace(" plain", "") if " imatrix" not in r["build"] else ""
                o.write('%d %g %g "%s"\n' % (r["bytes"], r["kl"], r["tg"] or 0, label))
PY
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 1000,640 noenhanced
set output "$out/pareto.png"
set title "$(basename "$model"): KL against bytes; llama.cpp plain and imatrix files (two circles per rung)"
set logscale y
set xlabel "file bytes"
set ylabel "mean KL against the f32 model (held-out, chunks of 256)"
set key top right
set grid
set cblabel "decode tok/s, tg128 on the Qwen3-1.7B shape (0: not measured)"
set palette rgbformulae 33,13,10
plot "$out/llamacpp.dat" using 1:2:3 with points pt 7 ps 2 lc palette title "llama.cpp (circles)", \
     "" using 1:2:4 with labels offset 0,1 font ",8" notitle, \
     "$out/nibble.dat" using 1:2:3 with points pt 5 ps 2 lc palette title "nibble (squares)", \
     "" using 1:2:4 with labels offset 0,-1 font ",8" notitle
GP
  echo "pareto: $out/pareto.png"
fi
