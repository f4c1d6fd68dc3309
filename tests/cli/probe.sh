#!/usr/bin/env bash
# nibble probe: the JSON contract (probe + decision fields), --explain, errors.
set -u
bin="${NIBBLE_BIN:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
unset NIBBLE_WEIGHT_PATH NIBBLE_MEASUREMENTS

"$bin" probe --json --no-bw >"$tmp/p.json"; ok test $? -eq 0
ok python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/p.json"
# the contract: probed features + the decision at top level
ok python3 - "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("arch", "family_key", "features", "cores", "cache_bytes", "mem_total_bytes",
          "weight_path", "kernel", "head_bits", "bits_per_weight", "runs_locally", "verified",
          "reasons"):
    assert k in d, k
assert d["weight_path"] in ("w4a8", "w4a16", "w8a16", "bf16", "f32")
assert isinstance(d["verified"], bool) and isinstance(d["runs_locally"], bool)
assert isinstance(d["reasons"], list) and all(isinstance(r, str) for r in d["reasons"])
assert d["head_bits"] in (4, 8) and d["bits_per_weight"] > 4
assert d["read_bw_gbs"] is None  # --no-bw
# no --priority: the agentic-use reason is there
assert any("--priority fidelity" in r for r in d["reasons"]), d["reasons"]
# the record key: this CPU's key, the path, its kernel and the features it uses
if d["arch"] == "aarch64" and d["cpu_key"] is None:
    # qemu-user (the Arm leg): /proc/cpuinfo is the host's, no implementer or part
    assert d["record_key"] is None and not d["verified"], d
    assert any("has no record key (no CPU implementer)" in r for r in d["reasons"]), d
elif d["arch"] in ("x86_64", "aarch64"):
    assert d["cpu_key"].startswith(("x86:", "arm:")) and d["cpu_key"].count(":") in (2, 3), d
    assert d["record_key"].startswith(d["cpu_key"] + "/" + d["weight_path"] + "/"), d
    assert d["record_key"].count("/") == 3, d["record_key"]
# Arm: the NEON kernel the table runs, and never verified (no record from Arm hardware)
if d["arch"] == "aarch64":
    assert d["kernel"].startswith("neon") and not d["verified"], d
    assert any(r.startswith("unverified on Arm") for r in d["reasons"]), d["reasons"]
PY
"$bin" probe --json --no-bw --priority fidelity >"$tmp/f.json"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["weight_path"]=="w4a16" and d["head_bits"]==8; assert not any("--priority fidelity" in r for r in d["reasons"])' <"$tmp/f.json"
"$bin" probe --json --no-bw --target phone --priority speed >"$tmp/ph.json"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["weight_path"]=="w8a16" and d["runs_locally"] is False and d["verified"] is False' <"$tmp/ph.json"
# --target arm: this host's choice on an Arm CPU, else a generic dotprod core's (not run here)
"$bin" probe --json --no-bw --target arm --priority speed >"$tmp/arm.json"; ok test $? -eq 0
ok python3 - "$tmp/arm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["target"] == "arm" and d["verified"] is False, d
if d["arch"] == "aarch64":
    assert d["runs_locally"] is True and d["kernel"].startswith("neon"), d
    assert any("this host is an Arm CPU" in r for r in d["reasons"]), d["reasons"]
else:
    assert d["weight_path"] == "w4a8" and d["runs_locally"] is False, d
    assert d["kernel"] == "neon-dotprod (aarch64 build)", d
    assert any("generic armv8.2-a CPU with dotprod" in r for r in d["reasons"]), d["reasons"]
PY
"$bin" probe --target watch 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "not one of host, arm or phone" "$tmp/err"
NIBBLE_WEIGHT_PATH=w4a16 "$bin" probe --json --no-bw --priority speed >"$tmp/o.json"; ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["weight_path"]=="w4a16"; assert any("NIBBLE_WEIGHT_PATH" in r for r in d["reasons"])' <"$tmp/o.json"
NIBBLE_WEIGHT_PATH=w7 "$bin" probe --no-bw 2>"$tmp/err" >/dev/null; ok test $? -eq 1
ok grep -q "NIBBLE_WEIGHT_PATH=w7" "$tmp/err"

"$bin" probe --no-bw --explain >"$tmp/h.txt"; ok test $? -eq 0
ok grep -q "^decision" "$tmp/h.txt"
ok grep -q "cpu key " "$tmp/h.txt"
if grep -q "cpu key none" "$tmp/h.txt"; then # (qemu-user: above)
  ok grep -q "has no record key" "$tmp/h.txt"
else
  ok grep -q "^record key " "$tmp/h.txt"
fi
# a record that cannot be keyed to a CPU is ignored, with the reason, not a crash
mkdir "$tmp/rec"
printf '{"cpu": {"family_key": "x86:GenuineIntel:6"}, "kernel": "avx512vnni", "weight_path": "w4a8", "threads": 2, "tg": {"n_gen": 8, "best_ts": 50}}' >"$tmp/rec/old.json"
NIBBLE_MEASUREMENTS="$tmp/rec" "$bin" probe --no-bw --explain >"$tmp/k.txt" 2>"$tmp/err"; ok test $? -eq 0
ok grep -q "ignored: 1 measurement record that cannot be keyed to a CPU: old.json (no record_key" "$tmp/k.txt"
ok grep -q "old.json: ignored by the selector" "$tmp/err"
ok grep -q "verified" "$tmp/h.txt"
ok grep -q "^cores" "$tmp/h.txt"

"$bin" probe --bogus 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "unknown option '--bogus'" "$tmp/err"
"$bin" probe --priority fast 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "speed, fidelity or memory" "$tmp/err"
"$bin" probe --target 2>"$tmp/err"; ok test $? -eq 1
"$bin" run --path w5 --ids 1 -m x 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "not one of auto" "$tmp/err"
# a bad NIBBLE_AMX is named and ignored (the default stays); 0, 1 and all are quiet
NIBBLE_AMX=bf16 "$bin" probe --json --no-bw >/dev/null 2>"$tmp/err"; ok test $? -eq 0
ok grep -q "NIBBLE_AMX=bf16 is not one of 0, 1, all: ignored" "$tmp/err"
for v in 0 1 all; do
  NIBBLE_AMX=$v "$bin" probe --json --no-bw >/dev/null 2>"$tmp/err"; ok test $? -eq 0
  ok test ! -s "$tmp/err"
done

echo "probe.sh: $pass passed, $fail failed"
test $fail -eq 0
