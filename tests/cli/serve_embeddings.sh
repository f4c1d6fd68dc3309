#!/usr/bin/env bash
# nibble serve's POST /v1/embeddings (docs/serve.md) with curl on kjv-7m: the answer's
# shape (n_embd floats per input, index, usage), unit vectors, the same text twice the
# same vector, base64 the same floats, token-id inputs, /embeddings as /v1/embeddings; the
# 400s (empty input, too many inputs, one past the context, bad dimensions and
# encoding_format) and the API key; the vector while a stream runs in the other slot equal
# to the one alone; --pooling last differs from mean; a slot's cached prompt after an
# embedding ran in it gives the same greedy completion (-np 1).
. "$(dirname "$0")/../helpers/serve_common.sh"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
[ -f "$gguf" ] || { echo "SKIP: no $gguf"; exit 0; }
# emb BODY OUT [PATH]: the answer in OUT, its HTTP status printed
emb() {
  curl -s --max-time 60 -o "$2" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H "Authorization: Bearer ${key:-}" --data-binary "$1" "$url${3:-/v1/embeddings}"
}
# pycheck NAME EXPR FILES...: EXPR true of the answers a[0], a[1], ... (helpers: vec, unit)
pycheck() {
  local name="$1" expr="$2"; shift 2
  if "$py" - "$expr" "$@" <<'PY'
import base64, json, math, struct, sys
a = [json.load(open(p)) for p in sys.argv[2:]]
def vec(r, i=0):
    e = r["data"][i]["embedding"]
    if not isinstance(e, str): return [struct.unpack("<f", struct.pack("<f", x))[0] for x in e]
    b = base64.b64decode(e)
    return list(struct.unpack("<%df" % (len(b) // 4), b))
def unit(v): return abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5
sys.exit(0 if eval(sys.argv[1]) else 1)
PY
  then ok; else bad "$name: $(head -c 300 "$1")"; fi
}
status() { [ "$2" = "$3" ] && ok || bad "$1: HTTP $2, expected $3: $(head -c 300 "$tmp/e.json")"; }

key=k1
start_server main -np 2 -c 256 --api-key k1
t="$tmp"
s=$(emb '{"input":"In the beginning God created the heaven and the earth."}' "$t/a1.json"); status one "$s" 200
pycheck shape 'a[0]["object"] == "list" and len(a[0]["data"]) == 1 and a[0]["data"][0]["index"] == 0 and a[0]["data"][0]["object"] == "embedding" and len(vec(a[0])) == 256 and a[0]["usage"]["prompt_tokens"] > 1 and a[0]["usage"]["total_tokens"] == a[0]["usage"]["prompt_tokens"] and a[0]["model"] == "kjv-7m-f32.gguf"' "$t/a1.json"
pycheck unit 'unit(vec(a[0]))' "$t/a1.json"
s=$(emb '{"input":"In the beginning God created the heaven and the earth.","model":"x"}' "$t/a2.json"); status twice "$s" 200
pycheck "same text twice" 'vec(a[0]) == vec(a[1])' "$t/a1.json" "$t/a2.json"
s=$(emb '{"input":["And God said","In the beginning God created the heaven and the earth."],"encoding_format":"base64"}' "$t/b.json"); status base64 "$s" 200
pycheck "base64 = floats" 'len(a[1]["data"]) == 2 and a[1]["data"][1]["index"] == 1 and isinstance(a[1]["data"][1]["embedding"], str) and vec(a[1], 1) == vec(a[0]) and unit(vec(a[1], 0)) and vec(a[1], 0) != vec(a[0])' "$t/a1.json" "$t/b.json"
s=$(emb '{"input":[1, 1046, 261, 2074]}' "$t/i1.json" /embeddings); status ids "$s" 200
s=$(emb '{"input":"In the beginning"}' "$t/i2.json"); status text "$s" 200
pycheck "token ids = text with BOS" 'vec(a[0]) == vec(a[1]) and a[0]["usage"]["prompt_tokens"] == 4' "$t/i1.json" "$t/i2.json"
s=$(emb '{"input":[[1, 1046], [1, 1046, 261, 2074]]}' "$t/i3.json"); status "id arrays" "$s" 200
pycheck "id arrays" 'len(a[0]["data"]) == 2 and vec(a[0], 1) == vec(a[1]) and a[0]["usage"]["prompt_tokens"] == 6' "$t/i3.json" "$t/i1.json"

# the 400s, each naming its field
for case in '{"input":""}|input' '{"input":[]}|input' '{"input":["a",""]}|input' \
            '{"model":"m"}|input' '{"input":5}|input' '{"input":[1,-1]}|input' \
            '{"input":"a","dimensions":3}|dimensions' '{"input":"a","encoding_format":"hex"}|encoding_format'; do
  s=$(emb "${case%|*}" "$t/e.json"); status "${case%|*}" "$s" 400
  pycheck "${case%|*} param" "a[0]['error']['param'] == '${case#*|}'" "$t/e.json"
done
many=$("$py" -c 'import json; print(json.dumps({"input": ["a"] * 65}))')
s=$(emb "$many" "$t/e.json"); status "65 inputs" "$s" 400
long=$("$py" -c 'import json; print(json.dumps({"input": [5] * 257}))')
s=$(emb "$long" "$t/e.json"); status "257 tokens" "$s" 400
pycheck "257 tokens code" 'a[0]["error"]["code"] == "context_length_exceeded"' "$t/e.json"
s=$(emb '{"input":"a","dimensions":256}' "$t/e.json"); status "dimensions 256" "$s" 200
key=wrong; s=$(emb '{"input":"a"}' "$t/e.json"); status "wrong key" "$s" 401; key=k1

# while a stream runs in the other slot (EOS banned: it runs its 200 tokens)
curl -s -N --max-time 120 -H 'Authorization: Bearer k1' -H 'Content-Type: application/json' \
  -d '{"prompt":"And it came to pass","max_tokens":200,"stream":true,"logit_bias":{"2":-100}}' \
  "$url/v1/completions" > "$t/stream.txt" &
spid=$!
for _ in $(seq 1 100); do [ "$(grep -c '^data:' "$t/stream.txt")" -ge 3 ] && break; sleep 0.05; done
s=$(emb '{"input":"In the beginning God created the heaven and the earth."}' "$t/c.json"); status concurrent "$s" 200
running=$(grep -c '"finish_reason":"length"' "$t/stream.txt")
wait "$spid"
[ "$running" = 0 ] && ok || bad "the stream had ended before the embedding"
grep -q '"finish_reason":"length"' "$t/stream.txt" && ok || bad "the stream did not finish: $(tail -c 300 "$t/stream.txt")"
pycheck "concurrent = alone" 'vec(a[0]) == vec(a[1])' "$t/a1.json" "$t/c.json"
grep -q 'POST /v1/embeddings 200 .* prompt [0-9]* inputs 1 of 1 done' "$tmp/main.log" && ok \
  || bad "log line: $(grep embeddings "$tmp/main.log" | head -2)"
stop_server
[ "$rc" = 0 ] && ok || bad "main exited $rc"

# --pooling last, one slot: the cached prompt of a completion is gone after an embedding
# ran in its slot, and the next completion is the same
key=""
start_server last -np 1 -c 256 --pooling last
s=$(emb '{"input":"In the beginning God created the heaven and the earth."}' "$t/l.json"); status last "$s" 200
pycheck "last != mean" 'unit(vec(a[1])) and vec(a[0]) != vec(a[1])' "$t/a1.json" "$t/l.json"
cmpl() {
  curl -s --max-time 60 -H 'Content-Type: application/json' \
    -d '{"prompt":"And God said","max_tokens":12,"temperature":0}' "$url/v1/completions" > "$1"
}
cmpl "$t/g1.json"
s=$(emb '{"input":"And God said, Let there be light"}' "$t/x.json"); status "between" "$s" 200
cmpl "$t/g2.json"
pycheck "completion after an embedding" 'a[0]["choices"][0]["text"] == a[1]["choices"][0]["text"] and len(a[0]["choices"][0]["text"]) > 0' "$t/g1.json" "$t/g2.json"
stop_server
[ "$rc" = 0 ] && ok || bad "last exited $rc"
bad_pool=$("$bin" serve -m "$gguf" --pooling max 2>&1); [ $? != 0 ] && ok || bad "--pooling max accepted"

echo "serve_embeddings: $pass passed, $fail failed"
[ "$fail" = 0 ]
