#!/usr/bin/env bash
# nibble serve against slow clients (slowloris) on kjv-7m: with --read-timeout 2, 200
# connections trickling their headers a byte at a time are each closed about 2 s after
# they opened (not before), while ordinary requests beside them keep getting nibble run's
# greedy text; a request whose body trickles is cut, never served; a request sent slowly
# but whole within the deadline is served; an idle keep-alive connection is closed after
# the deadline; the server stays up and exits 0 on SIGTERM. Then --max-conn-per-ip: the
# connection past the limit is refused, and one more is taken once another closed.
# Python sockets; every wait is bounded; the servers are killed on every way out (trap).
. "$(dirname "$0")/../helpers/serve_common.sh"

"$bin" serve -m x --read-timeout -1 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && ok || bad "bad --read-timeout: rc $rc: $(cat "$tmp/err")"
"$bin" serve -m x --max-conn-per-ip -1 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && ok || bad "bad --max-conn-per-ip: rc $rc: $(cat "$tmp/err")"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then
  echo "SKIP (no $gguf): $pass passed"
  [ $fail = 0 ]; exit
fi


"$bin" run -m "$gguf" --path source -t 2 -p "In the beginning" -n 8 2>/dev/null >"$tmp/want.txt"

# ---------------------------------------------------------------- the read deadline
# no per-address limit here: 200 slow clients and the ordinary ones all come from 127.0.0.1
start_server slow --read-timeout 2 --max-conn-per-ip 0 --parallel 2
timeout 120 "$py" - "$port" "$tmp/want.txt" >"$tmp/slow.out" 2>&1 <<'EOF'
import http.client, json, select, socket, sys, threading, time
port = int(sys.argv[1])
want = open(sys.argv[2], encoding="utf-8").read()
assert want.endswith("\n")
want = want[:-1]
DEADLINE = 2.0
results = []  # (name, ok, detail)

def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))

def metric(name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics", headers={"Connection": "close"})
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)

def completion(sock_timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=sock_timeout)
    body = json.dumps({"prompt": "In the beginning", "max_tokens": 8, "temperature": 0})
    c.request("POST", "/v1/completions", body=body,
              headers={"Content-Type": "application/json", "Connection": "close"})
    r = c.getresponse()
    j = json.loads(r.read())
    c.close()
    return r.status, j

# ordinary requests, one after another, while the slow clients hold their connections
normal = {"ok": 0, "bad": []}
stop = threading.Event()
def ordinary():
    while not stop.is_set():
        try:
            st, j = completion()
            if st == 200 and j["choices"][0]["text"] == want:
                normal["ok"] += 1
            else:
                normal["bad"].append((st, j))
        except Exception as e:  # noqa: BLE001 - any failure is a failure of the test
            normal["bad"].append(repr(e))
        time.sleep(0.05)
worker = threading.Thread(target=ordinary)

# 200 slowloris connections: a request line, then a header byte every 0.5 s, forever
N = 200
socks = []
for i in range(N):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setblocking(False)
    s.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    socks.append({"s": s, "t0": time.monotonic(), "cut": None, "got": b""})
worker.start()
# a slow body: whole headers, then a byte of the body every 0.25 s (all of it: 10 s)
body = json.dumps({"prompt": [1, 2, 3, 4, 5], "max_tokens": 4}).encode()
body = body + b" " * (40 - len(body)) if len(body) < 40 else body
sb = socket.create_connection(("127.0.0.1", port), timeout=10)
sb.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body))
sb.setblocking(False)
slow_body = {"s": sb, "t0": time.monotonic(), "cut": None, "got": b"", "sent": 0}
pending = {id(x): x for x in socks + [slow_body]}
prompt_before = metric("nibble_prompt_tokens_total")

t_end = time.monotonic() + 15
last_trickle = 0.0
while pending and time.monotonic() < t_end:
    now = time.monotonic()
    if now - last_trickle >= 0.25:
        last_trickle = now
        for x in list(pending.values()):
            try:
                if x is slow_body:
                    if x["sent"] < len(body):
                        x["s"].send(body[x["sent"]:x["sent"] + 1])
                        x["sent"] += 1
                elif int(now * 4) % 2 == 0:
                    x["s"].send(b"X")
            except OSError:
                x["cut"] = time.monotonic() - x["t0"]
                del pending[id(x)]
    r, _, _ = select.select([x["s"] for x in pending.values()], [], [], 0.05)
    for x in list(pending.values()):
        if x["s"] in r:
            try:
                d = x["s"].recv(4096)
            except OSError:
                d = b""
            if d:
                x["got"] += d
            else:
                x["cut"] = time.monotonic() - x["t0"]
                del pending[id(x)]
stop.set()
worker.join(timeout=60)

for x in socks + [slow_body]:
    x["s"].close()
cuts = [x["cut"] for x in socks if x["cut"] is not None]
check("every slow client cut", len(cuts) == N, "%d of %d cut" % (len(cuts), N))
check("none cut before the deadline", all(c >= DEADLINE - 0.05 for c in cuts), "earliest %.2f s" % min(cuts or [0]))
check("cut within a few seconds of the deadline", all(c <= DEADLINE + 6 for c in cuts), "latest %.2f s" % max(cuts or [0]))
check("no answer to a slow client", all(x["got"] == b"" for x in socks), "")
check("slow body cut", slow_body["cut"] is not None and DEADLINE - 0.05 <= slow_body["cut"] <= DEADLINE + 6,
      "cut after %s s, %d of %d body bytes sent" % (slow_body["cut"], slow_body["sent"], len(body)))
check("slow body not served", slow_body["got"] == b"", repr(slow_body["got"][:200]))
check("ordinary requests answered meanwhile", normal["ok"] >= 2 and not normal["bad"],
      "%d right, wrong: %r" % (normal["ok"], normal["bad"][:3]))
# the slow body's prompt (5 ids) never ran: the prompt tokens counted are the ordinary
# requests' (4 each)
check("slow body's prompt never run", (metric("nibble_prompt_tokens_total") - prompt_before) % 4 == 0, "")

# a request sent slowly but whole within the deadline (over about 1 s) is served
req = json.dumps({"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}).encode()
raw = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
       b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(req)) + req
s = socket.create_connection(("127.0.0.1", port), timeout=30)
for i in range(0, len(raw), len(raw) // 10 + 1):
    s.send(raw[i:i + len(raw) // 10 + 1])
    time.sleep(0.1)
resp = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    resp += d
s.close()
head, _, rest = resp.partition(b"\r\n\r\n")
okay = head.startswith(b"HTTP/1.1 200")
if okay:
    try:
        okay = json.loads(rest)["choices"][0]["text"] == want
    except ValueError:
        okay = False
check("slow but in time: served", okay, repr(resp[:300]))

# an idle keep-alive connection is closed once the deadline passes without a new request
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/health")
r = c.getresponse(); r.read()
t0 = time.monotonic()
c.sock.settimeout(DEADLINE + 8)
try:
    d = c.sock.recv(1)
except OSError:
    d = b""
idle = time.monotonic() - t0
check("idle keep-alive closed after the deadline", d == b"" and DEADLINE - 0.3 <= idle <= DEADLINE + 6, "%.2f s" % idle)
c.close()

# polled: the server closes connections (and the previous metrics request's) in its own time
for _ in range(50):
    tos = metric("nibble_read_timeouts_total")
    if tos == N + 2: break
    time.sleep(0.1)
check("read timeouts counted", tos == N + 2, str(tos))
for _ in range(50):
    conns = metric("nibble_connections")
    if conns == 1: break
    time.sleep(0.1)
check("connections gauge back to the metrics one", conns == 1, str(conns))
st, j = completion()
check("still answering", st == 200 and j["choices"][0]["text"] == want, repr(j))
for name, good, detail in results:
    print("%s %s%s" % ("ok  " if good else "FAIL", name, ": " + detail if detail else ""))
sys.exit(0 if all(g for _, g, _ in results) else 1)
EOF
rc=$?
cat "$tmp/slow.out" | sed 's/^/  /'
[ "$rc" = 0 ] && ok || bad "slow clients (python exit $rc)"
stop_server
[ "$rc" = 0 ] && ok || bad "slow: SIGTERM exit $rc: $(tail -5 "$tmp/slow.log")"

# ---------------------------------------------------------------- connections per address
start_server perip --max-conn-per-ip 3
timeout 60 "$py" - "$port" >"$tmp/perip.out" 2>&1 <<'EOF'
import http.client, socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
time.sleep(1.0)
def health():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/health", headers={"Connection": "close"})
        return c.getresponse().status
    except (OSError, http.client.HTTPException) as e:
        return repr(e)
    finally:
        c.close()
fourth = health()
held.pop().close()
for _ in range(50):  # until the server has seen the close
    time.sleep(0.1)
    after = health()
    if after == 200: break
print("fourth:", fourth, "after one closed:", after)
sys.exit(0 if fourth != 200 and after == 200 else 1)
EOF
rc=$?
[ "$rc" = 0 ] && ok || bad "--max-conn-per-ip 3: $(cat "$tmp/perip.out")"
stop_server
[ "$rc" = 0 ] && ok || bad "perip: SIGTERM exit $rc"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
