// Load on nibble serve with a real HTTP client: autocannon (pinned in package.json) keeps
// LOAD connections streaming greedy completions back to back, and MEASURE connections of
// this script's own (node's http) do the same while timing each request's first token —
// autocannon sees whole responses only, not when their first byte came. Every streamed
// body from either is checked: status 200, SSE events ending with `data: [DONE]`, a
// finish_reason, and (greedy, fixed prompts) the text the server gives each prompt alone
// before the load. The server's anonymous memory (RssAnon of /proc/PID/status) is sampled
// every 2 s.
//   node serve_load.js URL PID [--seconds 60] [--load 56] [--measure 8] [--max-tokens 32]
//                              [--warmup 10] [--rss-slack-kib 8192] [--json FILE]
// Loopback only (127.0.0.1, ::1, localhost). Stops by itself: the load runs --seconds, the
// measuring clients finish their last request, and a watchdog ends the script 90 s later
// whatever happens. Exit 0 when no request failed, none was truncated, every text was the
// known answer and RssAnon grew by at most --rss-slack-kib from the first sample after
// --warmup seconds to the last.
"use strict";
const fs = require("fs");
const http = require("http");
const autocannon = require("autocannon");

const args = process.argv.slice(2);
const opt = { seconds: 60, load: 56, measure: 8, "max-tokens": 32, warmup: 10, "rss-slack-kib": 8192, json: "" };
const pos = [];
for (let i = 0; i < args.length; i++) {
  if (args[i].startsWith("--")) {
    const k = args[i].slice(2);
    if (!(k in opt) || i + 1 >= args.length) {
      console.error(`serve_load.js: unknown or incomplete option ${args[i]}`);
      process.exit(2);
    }
    opt[k] = k === "json" ? args[++i] : Number(args[++i]);
  } else {
    pos.push(args[i]);
  }
}
if (pos.length !== 2) {
  console.error("usage: node serve_load.js URL PID [--seconds S] [--load N] [--measure N] [--max-tokens N] [--warmup S] [--rss-slack-kib K] [--json FILE]");
  process.exit(2);
}
const base = new URL(pos[0]);
const pid = Number(pos[1]);
if (!["127.0.0.1", "[::1]", "localhost"].includes(base.hostname)) {
  console.error(`serve_load.js: ${base.hostname} is not loopback: this load test runs against this machine only`);
  process.exit(2);
}
const watchdog = setTimeout(() => {
  console.error("serve_load.js: the watchdog ended the run (90 s past its end)");
  process.exit(3);
}, (opt.seconds + 90) * 1000);

const prompts = [
  "In the beginning",
  "And God said",
  "The LORD is my shepherd",
  "Blessed are the",
  "And it came to pass",
  "Then answered Jesus",
  "Hear, O Israel",
  "For God so loved",
];
const body = (i, stream) =>
  JSON.stringify({ prompt: prompts[i], max_tokens: opt["max-tokens"], temperature: 0, stream });

// ---------------------------------------------------------------- checks

const tally = { ok: 0, wrong_text: 0, truncated: 0, bad_status: 0, client_errors: 0 };
const wrong = [];
// A streamed body: its events, the text they add up to, a finish reason, [DONE] last.
function verify(i, status, text) {
  if (status !== 200) {
    tally.bad_status++;
    if (wrong.length < 5) wrong.push(`status ${status}: ${String(text).slice(0, 200)}`);
    return;
  }
  const events = text.split("\n\n").filter((e) => e.length);
  let got = "", finish = null, done = false, broken = false;
  for (const e of events) {
    if (!e.startsWith("data: ") || done) { broken = true; break; }
    const d = e.slice(6);
    if (d === "[DONE]") { done = true; continue; }
    let c;
    try { c = JSON.parse(d); } catch { broken = true; break; }
    if (c.error || !c.choices || !c.choices.length) { broken = true; break; }
    got += c.choices[0].text || "";
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  if (broken || !done || !finish) {
    tally.truncated++;
    if (wrong.length < 5) wrong.push(`truncated (prompt ${i}): ${JSON.stringify(text.slice(-200))}`);
  } else if (got !== answers[i]) {
    tally.wrong_text++;
    if (wrong.length < 5) wrong.push(`prompt ${i}: ${JSON.stringify(got)} vs ${JSON.stringify(answers[i])}`);
  } else {
    tally.ok++;
  }
}

// ---------------------------------------------------------------- plain requests

function post(path, data, onFirst) {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, base), {
      method: "POST", headers: { "Content-Type": "application/json" }, timeout: 120000,
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        // the first token: the first event that carries text (a completion stream has no
        // opening event without text)
        if (onFirst && /"text":"[^"]/.test(d)) { onFirst(); onFirst = null; }
        text += d;
      });
      res.on("end", () => resolve({ status: res.statusCode, text }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(data);
  });
}

function get(path) {
  return new Promise((resolve, reject) => {
    http.get(new URL(path, base), (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, text }));
    }).on("error", reject);
  });
}

function rssAnonKiB() {
  try {
    const m = /RssAnon:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const quantile = (xs, q) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
};

// p50 and p99 of a Prometheus histogram: the upper bound of the bucket they fall in
function histQuantiles(metrics, name) {
  const buckets = [];
  for (const line of metrics.split("\n")) {
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)`).exec(line);
    if (m) buckets.push([m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2])]);
  }
  const n = buckets.length ? buckets[buckets.length - 1][1] : 0;
  const q = (p) => { for (const [le, c] of buckets) if (c >= p * n) return le; return null; };
  return { n, p50_le: q(0.5), p99_le: q(0.99) };
}
const metricValue = (metrics, name) => {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(metrics);
  return m ? Number(m[1]) : null;
};

// ---------------------------------------------------------------- the run

const answers = [];
async function main() {
  // the known answers: each prompt alone, plain (not streamed), before any load
  for (let i = 0; i < prompts.length; i++) {
    const r = await post("/v1/completions", body(i, false));
    if (r.status !== 200) throw new Error(`reference answer ${i}: status ${r.status}: ${r.text}`);
    answers.push(JSON.parse(r.text).choices[0].text);
  }
  const t0 = Date.now();
  const until = t0 + opt.seconds * 1000;

  const rss = [];
  const sample = () => rss.push({ t: (Date.now() - t0) / 1000, kib: rssAnonKiB() });
  sample();
  const sampler = setInterval(sample, 2000);

  // the measuring clients: back to back until the end, every request finished
  const ttft = [], total = [];
  let measuring = 0;
  const measure = async (c) => {
    for (let k = c; Date.now() < until; k++) {
      const i = k % prompts.length;
      const start = process.hrtime.bigint();
      let first = null;
      measuring++;
      try {
        const r = await post("/v1/completions", body(i, true), () => { first = process.hrtime.bigint(); });
        const end = process.hrtime.bigint();
        if (first !== null) ttft.push(Number(first - start) / 1e6);
        total.push(Number(end - start) / 1e6);
        verify(i, r.status, r.text);
      } catch (e) {
        tally.client_errors++;
        if (wrong.length < 5) wrong.push(`measuring client: ${e.message}`);
      }
      measuring--;
    }
  };

  // autocannon: LOAD connections, the prompts in turn (autocannon builds a connection's
  // next request after handing its response to onResponse, with a fresh context)
  let nextRequest = 0;
  const load = opt.load > 0 ? autocannon({
    url: base.origin,
    connections: opt.load,
    duration: opt.seconds,
    timeout: 120,
    requests: [{
      method: "POST",
      path: "/v1/completions",
      headers: { "Content-Type": "application/json" },
      setupRequest: (req, context) => {
        context.i = nextRequest++ % prompts.length;
        return { ...req, body: body(context.i, true) };
      },
      onResponse: (status, text, context) => verify(context.i, status, text),
    }],
  }) : null;
  const measurers = [];
  for (let c = 0; c < opt.measure; c++) measurers.push(measure(c));
  const result = load ? await load : null;
  await Promise.all(measurers);
  clearInterval(sampler);
  sample();

  // after the load: the slots empty again (clients cut at the end cancel their requests)
  let metrics = "";
  for (let k = 0; k < 50; k++) {
    metrics = (await get("/metrics")).text;
    if (metricValue(metrics, "nibble_slots_running") === 0 && metricValue(metrics, "nibble_queue_depth") === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const health = await get("/health");

  // the samples taken while the load ran, after the warm-up (the last one, taken once the
  // clients are gone, is reported apart: the connections' threads have freed their memory)
  const after = rss.slice(0, -1).filter((s) => s.t >= opt.warmup && s.kib !== null);
  const report = {
    seconds: opt.seconds,
    connections: { autocannon: opt.load, measuring: opt.measure },
    max_tokens: opt["max-tokens"],
    responses: tally,
    wrong: wrong,
    autocannon: result && {
      requests: result.requests.total, errors: result.errors, timeouts: result.timeouts,
      non2xx: result.non2xx, latency_ms: { p50: result.latency.p50, p99: result.latency.p99 },
    },
    measuring: {
      requests: total.length,
      ttft_ms: { p50: quantile(ttft, 0.5), p99: quantile(ttft, 0.99), max: quantile(ttft, 1) },
      total_ms: { p50: quantile(total, 0.5), p99: quantile(total, 0.99) },
    },
    server: {
      ttft_s: histQuantiles(metrics, "nibble_time_to_first_token_seconds"),
      generated_tokens: metricValue(metrics, "nibble_generated_tokens_total"),
      decode_steps: metricValue(metrics, "nibble_decode_steps_total"),
      step_tokens: metricValue(metrics, "nibble_step_tokens_total"),
      slots_running_after: metricValue(metrics, "nibble_slots_running"),
      health_after: health.status,
    },
    rss_anon_kib: {
      start: rss[0].kib,
      first_after_warmup: after.length ? after[0].kib : null,
      last: after.length ? after[after.length - 1].kib : null,
      max_after_warmup: after.length ? Math.max(...after.map((s) => s.kib)) : null,
      after_load: rss[rss.length - 1].kib,
      samples: rss.map((s) => [Math.round(s.t), s.kib]),
    },
  };
  const growth = report.rss_anon_kib.last - report.rss_anon_kib.first_after_warmup;
  const checks = [
    ["no failed request", tally.bad_status === 0 && tally.client_errors === 0 &&
      (!result || (result.errors === 0 && result.timeouts === 0 && result.non2xx === 0))],
    ["no truncated stream", tally.truncated === 0],
    ["every text the known answer", tally.wrong_text === 0],
    ["requests answered", tally.ok >= opt.measure && total.length >= opt.measure],
    [`RssAnon flat after warm-up (grew ${growth} KiB, at most ${opt["rss-slack-kib"]})`,
      after.length >= 2 && growth <= opt["rss-slack-kib"]],
    ["slots empty and healthy after", report.server.slots_running_after === 0 && health.status === 200],
  ];
  report.checks = Object.fromEntries(checks);
  if (opt.json) fs.writeFileSync(opt.json, JSON.stringify(report, null, 2) + "\n");
  const r = report;
  console.log(`load: ${opt.seconds} s, ${opt.load} autocannon + ${opt.measure} measuring streaming connections, ${opt["max-tokens"]} tokens each`);
  console.log(`responses checked: ${tally.ok} right, ${tally.wrong_text} wrong text, ${tally.truncated} truncated, ${tally.bad_status} bad status, ${tally.client_errors} client errors`);
  if (result) console.log(`autocannon: ${result.requests.total} responses, ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx; whole response p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms`);
  console.log(`measuring clients: ${total.length} requests; time to first token p50 ${r.measuring.ttft_ms.p50?.toFixed(1)} ms, p99 ${r.measuring.ttft_ms.p99?.toFixed(1)} ms; whole response p50 ${r.measuring.total_ms.p50?.toFixed(1)} ms, p99 ${r.measuring.total_ms.p99?.toFixed(1)} ms`);
  console.log(`server histogram, all ${r.server.ttft_s.n} requests: time to first token p50 <= ${r.server.ttft_s.p50_le} s, p99 <= ${r.server.ttft_s.p99_le} s; mean batch ${(r.server.step_tokens / r.server.decode_steps).toFixed(1)} tokens per step`);
  console.log(`RssAnon: ${r.rss_anon_kib.start} KiB at start, ${r.rss_anon_kib.first_after_warmup} KiB after ${opt.warmup} s of warm-up, ${r.rss_anon_kib.last} KiB at the load's last sample (max ${r.rss_anon_kib.max_after_warmup}), ${r.rss_anon_kib.after_load} KiB after it`);
  for (const w of wrong) console.log(`  ${w}`);
  let fails = 0;
  for (const [name, good] of checks) {
    console.log(`${good ? "ok  " : "FAIL"} ${name}`);
    if (!good) fails++;
  }
  clearTimeout(watchdog);
  process.exit(fails ? 1 : 0);
}

main().catch((e) => {
  console.error(`serve_load.js: ${e.stack || e}`);
  process.exit(1);
});
