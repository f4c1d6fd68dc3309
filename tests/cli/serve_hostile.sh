#!/usr/bin/env bash
# nibble serve against hostile and careless clients (issue 35), loopback only, every wait
# bounded: a client that half-closes after its request gets its whole answer (plain and
# streamed); a client that never reads its streams is cut at the send deadline; slowloris
# connections, 64 from 127.0.0.2-4 and then 300 from 127.0.0.1 itself, leave >= 95% of
# health checks from 127.0.0.1 answered within 1 s; 16 concurrent 1 MB bodies (chat text,
# and an ignored field of 500,000 numbers) keep the peak of RssAnon under 4x the bodies;
# after 10 rounds of large bodies and cut streams RssAnon (the median of the last three
# rounds) is within 20% (or 4 MiB, the swing between rounds at this small level) of its
# level after the first three, and within 64 MiB of where it was before them. Memory is read from /proc/PID/status RssAnon (the model's mapping is not in
# it), sampled every 2 ms; under AddressSanitizer it is reported, not judged (its
# quarantine holds freed memory by design). The server exits 0 on SIGTERM.
. "$(dirname "$0")/../helpers/serve_common.sh"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP (no $gguf)"; exit 0; fi
judge_mem=1
if grep -aq __asan_init "$bin"; then judge_mem=0; echo "(AddressSanitizer build: RssAnon reported, not judged)"; fi

"$bin" run -m "$gguf" --path source -t 2 -p "In the beginning" -n 8 2>/dev/null >"$tmp/want.txt"

# --timeout 4: a connection that takes nothing for 4 s while the server has bytes for it
# is cut (the send deadline, min(--timeout, 30) s); --read-timeout 20 keeps the slowloris
# connections open for the whole of their part
start_server hostile --parallel 2 --timeout 4 --read-timeout 20 --log-disable
timeout 300 "$py" - "$port" "$pid" "$tmp/want.txt" "$judge_mem" <<'EOF' && ok || bad "hostile clients (above)"
import json, re, select, socket, sys, threading, time
port, pid, judge = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4] == "1"
want = open(sys.argv[3], encoding="utf-8").read()[:-1]
fails = []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (": " + detail if detail else ""))
    if not cond: fails.append(name)

def request(path, body, src="127.0.0.1", extra=b""):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    b = json.dumps(body).encode() if not isinstance(body, bytes) else body
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n%s\r\n" % (path.encode(), len(b), extra) + b)
    return s

def read_all(s):
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except OSError:
        pass
    s.close()
    return out

def rss():
    t = open("/proc/%d/status" % pid).read()
    return int(re.search(r"RssAnon:\s+(\d+)", t).group(1)) / 1024.0

def health(src="127.0.0.1", timeout=1.0):
    t0 = time.monotonic()
    try:
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        d = b""
        while b"\r\n\r\n" not in d:
            x = s.recv(4096)
            if not x: break
            d += x
        s.close()
        return d.startswith(b"HTTP/1.1 200") and time.monotonic() - t0 <= timeout
    except OSError:
        return False

# ---------------------------------------------------------------- item 4: half-close
for stream in (False, True):
    s = request("/v1/completions", {"prompt": "In the beginning", "max_tokens": 8,
                                    "temperature": 0, "stream": stream},
                extra=b"Connection: close\r\n")
    s.shutdown(socket.SHUT_WR)  # nc -N: the request sent, nothing more to say
    r = read_all(s)
    while r.startswith(b"HTTP/1.1 1"):  # interim answers (100 Continue), as clients skip them
        r = r.partition(b"\r\n\r\n")[2]
    head, _, body = r.partition(b"\r\n\r\n")
    if stream:
        text = "".join(json.loads(l[6:])["choices"][0]["text"] for l in body.decode().split("\n")
                       if l.startswith("data: {"))
        good = head.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in body and text == want
    else:
        good = head.startswith(b"HTTP/1.1 200") and json.loads(body)["choices"][0]["text"] == want
    check("half-closed client, %s: the whole answer" % ("stream" if stream else "plain"), good,
          r[:200].decode(errors="replace"))

# ---------------------------------------------------------------- item 1: never reads
def metrics():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    t = read_all(s)
    m = lambda k: int(re.search(rb"\n" + k + rb" (\d+)", t).group(1))
    # open connections not counting this one; requests queued or running
    return m(b"nibble_connections") - 1, m(b"nibble_queue_depth") + m(b"nibble_slots_running")

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
one = json.dumps({"prompt": "In the beginning", "max_tokens": 2000, "stream": True,
                  "temperature": 1, "seed": 1}).encode()
req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\n\r\n" % len(one) + one)
s.sendall(req * 6)  # six pipelined streams, and nothing read: the server's buffers fill
# The send deadline counts from the last byte the client took, which comes before the
# stream that fills the buffers has its text: so the cut must come within the deadline of
# the moment no job runs (plus the 0.25 s of polling and a second of slack).
t0 = time.monotonic()
t_idle = None
n_open, busy = metrics()
while n_open > 0 and time.monotonic() - t0 < 40:
    if busy == 0 and t_idle is None:
        t_idle = time.monotonic()
    time.sleep(0.25)
    n_open, busy = metrics()
t_cut = time.monotonic()
after = t_cut - (t_idle if t_idle is not None else t_cut)
check("a client that never reads is cut at the send deadline (4 s)", n_open == 0 and after < 5.5,
      "%s %.1f s after its jobs ended (%.1f s after it began)"
      % ("closed" if n_open == 0 else "still open", after, t_cut - t0))
s.close()

# ---------------------------------------------------------------- item 5: slowloris
def slowloris(srcs, n):
    socks = []
    for i in range(n):
        c = socket.socket()
        c.bind((srcs[i % len(srcs)], 0))
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(c)
    time.sleep(0.5)
    for c in socks:
        try: c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        except OSError: pass
    return socks

def trickle(socks, stop):
    while not stop.is_set():
        for c in socks:
            try: c.send(b"X")
            except OSError: pass
        stop.wait(0.5)

for name, srcs, n in (("64 from 127.0.0.2-4", ["127.0.0.2", "127.0.0.3", "127.0.0.4"], 64),
                      ("300 from 127.0.0.1", ["127.0.0.1"], 300)):
    socks = slowloris(srcs, n)
    stop = threading.Event()
    t = threading.Thread(target=trickle, args=(socks, stop)); t.start()
    res = []
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:
        res.append(health())
        time.sleep(0.05)
    stop.set(); t.join()
    for c in socks: c.close()
    frac = sum(res) / len(res)
    check("slowloris %s: health checks from 127.0.0.1 answered within 1 s" % name,
          frac >= 0.95, "%d of %d" % (sum(res), len(res)))
time.sleep(1)

# ---------------------------------------------------------------- item 2: bodies
text = ("In the beginning God created the heaven and the earth. " * 20000)[:1000000]
chat = json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": 4}).encode()
arr = ('{"prompt":"x","max_tokens":2,"x":[' + ",".join(["1"] * 499990) + "]}").encode()
def burst(body, path, n=16):
    out = []
    def one():
        try:
            out.append(read_all(request(path, body, extra=b"Connection: close\r\n")).split(b"\r\n")[0])
        except OSError as e:
            out.append(repr(e).encode())
    ts = [threading.Thread(target=one) for _ in range(n)]
    for x in ts: x.start()
    for x in ts: x.join()
    return out

def measured(fn):
    peak = [rss()]; stop = threading.Event()
    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss()); time.sleep(0.002)
    th = threading.Thread(target=sample); th.start()
    r = fn()
    stop.set(); th.join()
    return peak[0], r

for name, body, path in (("1 MB chat bodies", chat, "/v1/chat/completions"),
                         ("1 MB bodies of 500,000 ignored numbers", arr, "/v1/completions")):
    base = rss()
    peak, out = measured(lambda: burst(body, path))
    bound = 4 * 16 * len(body) / 2**20
    answered = all(o.startswith(b"HTTP/1.1 ") for o in out)
    print("     %s: RssAnon %.1f MiB before, peak %.1f MiB (+%.1f; bound %.1f), statuses %s"
          % (name, base, peak, peak - base, bound, sorted(set(o.decode(errors="replace") for o in out))))
    check("16 concurrent %s: every one answered" % name, answered)
    if judge:
        check("16 concurrent %s: peak RssAnon within 4x the bodies" % name, peak - base <= bound,
              "+%.1f MiB" % (peak - base))

# ---------------------------------------------------------------- item 3: RSS returns
def cut_streams(n=8):
    socks = [request("/v1/completions", {"prompt": "In the beginning", "max_tokens": 200,
                                          "stream": True}) for _ in range(n)]
    for c in socks:
        try: c.recv(100)
        except OSError: pass
        c.close()

levels = []
before = rss()  # before any of the rounds' traffic
for rnd in range(10):
    burst(chat, "/v1/chat/completions")
    cut_streams()
    time.sleep(0.3)
    # the level once the round's requests are over: the least of 5 samples over 0.5 s
    # (a cut stream's job may still be ending)
    levels.append(min(rss() for _ in range(5) if time.sleep(0.1) is None))
print("     RssAnon after each round (MiB): " + " ".join("%.1f" % x for x in levels))
# A level moves by a few MiB from round to round (freed memory the allocator keeps in the
# HTTP threads' arenas): the first and the last three rounds' medians are compared, and
# the level must also stay within the documented bound of the bodies (64 MiB) over where
# it was before the rounds (the thread-per-connection server rose to +120 MiB and on).
first, last = sorted(levels[:3])[1], sorted(levels[-3:])[1]
if judge:
    # 20%, or 4 MiB where 20% is less than the swing between rounds (at a level of 6-12
    # MiB the allocator's cached arenas alone move it by 2-4 MiB)
    check("after 10 rounds RssAnon within 20% (or 4 MiB) of the first rounds'",
          last <= max(1.2 * first, first + 4), "median %.1f vs %.1f MiB" % (last, first))
    check("after 10 rounds RssAnon within 64 MiB of its level before them",
          last - before <= 64, "%.1f vs %.1f MiB" % (last, before))

# the server still answers
s = request("/v1/completions", {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0},
            extra=b"Connection: close\r\n")
r = read_all(s)
check("afterwards a request gets the greedy text",
      r.startswith(b"HTTP/1.1 200") and json.loads(r.partition(b"\r\n\r\n")[2])["choices"][0]["text"] == want)
sys.exit(1 if fails else 0)
EOF
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM: exit $rc"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
