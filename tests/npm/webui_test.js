// nibble serve's chat page (GET /) in headless Chromium: Debian's `chromium` driven by
// puppeteer-core (pinned in package.json; it downloads no browser). Against a server
// started with --api-key: the page loads and asks for the key, the key is entered and kept,
// a greedy answer streams in (the bubble grows over several updates) and equals the API's
// plain answer, Stop ends a long answer and the input works again, a reload restores the
// conversation from localStorage, model text with HTML and javascript: links is shown as
// text, no Content-Security-Policy violation; screenshots (PNGs, checked non-empty) of the
// conversation (SCREENSHOT.png) and of the markdown one (SCREENSHOT_markdown.png).
//   node webui_test.js URL API_KEY SCREENSHOT.png     (CHROMIUM: the browser, /usr/bin/chromium)
// Prints one line per check; exits 1 on the first failure.
"use strict";
const fs = require("fs");
const puppeteer = require("puppeteer-core");

const [base, key, shot] = process.argv.slice(2);
if (!base || !key || !shot) {
  console.error("usage: node webui_test.js URL API_KEY SCREENSHOT.png");
  process.exit(2);
}
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const SYSTEM = "Speak as the King James Bible.";
const QUESTION = "Who made the heaven and the earth?";
const MODEL = "kjv-7m-f32.gguf";

function check(name, cond, detail) {
  if (!cond) {
    console.log(`FAIL ${name}: ${detail}`);
    process.exit(1);
  }
  console.log(`ok ${name}`);
}

// The API directly (Node's fetch), with the key.
async function api(path, body) {
  const r = await fetch(base + path, {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
  });
  return r.json();
}

// The settings panel: open it, set the fields given, press Done.
async function setSettings(page, fields) {
  if (await page.$eval("#settings", (e) => e.hidden)) await page.click("#gear");
  for (const [id, value] of Object.entries(fields)) {
    await page.$eval("#" + id, (e) => { e.value = ""; });
    await page.type("#" + id, String(value));
  }
  await page.click("#done");
}

// Type a message, press Enter, wait for the answer to end; the stored conversation.
async function ask(page, text) {
  await page.type("#input", text);
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.querySelector("#send").hidden, { timeout: 120000 });
  return stored(page);
}

async function stored(page) {
  return page.evaluate(() => {
    const convs = JSON.parse(localStorage.getItem("nibble.conversations"));
    const cur = JSON.parse(localStorage.getItem("nibble.current"));
    return convs.find((c) => c.id === cur);
  });
}

const bubbles = (page) => page.$$eval("#log .msg", (els) => els.map((e) => [e.className, e.textContent]));

async function firstAnswer(page) {
  // every update of the last assistant bubble, from the page itself
  await page.evaluate(() => {
    window.lens = [];
    new MutationObserver(() => {
      const b = document.querySelectorAll("#log .msg.assistant");
      if (b.length) window.lens.push(b[b.length - 1].textContent.length);
    }).observe(document.querySelector("#log"), { childList: true, subtree: true, characterData: true });
  });
  const conv = await ask(page, QUESTION);
  const reply = conv.messages[1];
  check("answer stored", conv.messages.length === 2 && conv.messages[0].content === QUESTION &&
        reply.role === "assistant" && reply.content.length > 0 && !reply.error && !reply.stopped,
        JSON.stringify(conv));
  check("conversation titled", conv.title === QUESTION, conv.title);
  const lens = await page.evaluate(() => window.lens);
  const grew = [...new Set(lens.filter((n) => n > 0))];
  check(`answer streamed (the bubble grew over ${grew.length} updates)`, grew.length >= 2, JSON.stringify(lens));
  const plain = await api("/v1/chat/completions", {
    messages: [{ role: "system", content: SYSTEM }, { role: "user", content: QUESTION }],
    temperature: 0, top_p: 1, max_tokens: 48,
  });
  const want = plain.choices[0].message.content;
  check("streamed answer = the API's greedy answer", reply.content === want,
        `${JSON.stringify(reply.content)} vs ${JSON.stringify(want)}`);
}

async function stopAnswer(page) {
  await setSettings(page, { max_tokens: 4000 });
  await page.type("#input", "Tell me more.");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => {
    const b = document.querySelectorAll("#log .msg.assistant");
    return b.length === 2 && b[1].textContent.length > 0;
  }, { polling: "mutation", timeout: 60000 });
  const running = await page.$eval("#stop", (e) => !e.hidden && !e.disabled);
  check("stop button shown while streaming", running, "Stop is hidden: the answer ended first");
  await page.click("#stop");
  await page.waitForFunction(() => !document.querySelector("#send").hidden, { timeout: 10000 });
  const len1 = await page.$$eval("#log .msg.assistant", (b) => b[1].textContent.length);
  await new Promise((r) => setTimeout(r, 600));
  const len2 = await page.$$eval("#log .msg.assistant", (b) => b[1].textContent.length);
  check("answer ends at Stop", len1 === len2, `${len1} then ${len2}`);
  const conv = await stored(page);
  const reply = conv.messages[3];
  check("stopped answer kept", reply.stopped === true && reply.content.length > 0 && !reply.error,
        JSON.stringify(reply).slice(0, 300));
  const ui = await page.evaluate(() => ({
    stop: document.querySelector("#stop").hidden, send: document.querySelector("#send").disabled,
    input: document.querySelector("#input").disabled,
    note: document.querySelectorAll("#log .msg.assistant")[1].querySelector(".note").textContent,
  }));
  check("input usable again", ui.stop && !ui.send && !ui.input && ui.note === "stopped", JSON.stringify(ui));
  await setSettings(page, { max_tokens: 8 });
  const after = await ask(page, "Amen.");
  const last = after.messages[5];
  check("a message after Stop is answered", after.messages.length === 6 && last.content.length > 0 &&
        !last.error && !last.stopped, JSON.stringify(after.messages.slice(4)));
}

async function reload(page) {
  const before = await bubbles(page);
  await page.reload();
  await page.waitForFunction((m) => document.querySelector("#model").textContent === m, {}, MODEL);
  const after = await bubbles(page);
  check("reload restores the conversation", JSON.stringify(after) === JSON.stringify(before) &&
        after.length === 6, JSON.stringify(after).slice(0, 400));
  const list = await page.$$eval("#convs .open", (b) => b.map((e) => e.textContent));
  check("conversation list", list.length === 1 && list[0] === QUESTION, JSON.stringify(list));
}

const EVIL = 'Look: <img src=x onerror="window.pwned=1"> and <script>window.pwned=2</script>\n' +
  "**bold** and *it* and `<b>code</b>`\n\n" +
  "- [safe](https://example.com/a?b=1&c=2)\n- [bad](javascript:window.pwned=3)\n" +
  '- [quote](https://x.test/"onmouseover="window.pwned=4)\n\n' +
  "```\n<svg onload=window.pwned=5>\n```";

async function escaping(page) {
  const unit = await page.evaluate(() => window.nbMarkdown("<img src=x onerror=alert(1)> & 'q'"));
  check("markdown escapes HTML", unit === "<p>&lt;img src=x onerror=alert(1)&gt; &amp; &#39;q&#39;</p>", unit);
  await page.evaluate((evil) => {
    const convs = JSON.parse(localStorage.getItem("nibble.conversations"));
    convs.push({ id: "evil", title: "<b>evil</b>", messages: [
      { role: "user", content: "<i>hi</i>" }, { role: "assistant", content: evil }] });
    localStorage.setItem("nibble.conversations", JSON.stringify(convs));
    localStorage.setItem("nibble.current", JSON.stringify("evil"));
  }, EVIL);
  await page.reload();
  await page.waitForFunction((m) => document.querySelector("#model").textContent === m, {}, MODEL);
  const r = await page.evaluate(() => {
    const log = document.querySelector("#log");
    const on = [...log.querySelectorAll("*")].flatMap((e) => [...e.attributes].map((a) => a.name))
      .filter((n) => n.startsWith("on"));
    return {
      pwned: window.pwned, tags: log.querySelectorAll("img, script, svg, i, b").length, on,
      user: log.querySelector(".msg.user").textContent, text: log.querySelector(".msg.assistant").textContent,
      strong: [...log.querySelectorAll("strong")].map((e) => e.textContent),
      em: [...log.querySelectorAll("em")].map((e) => e.textContent),
      code: [...log.querySelectorAll("code")].map((e) => e.textContent),
      links: [...log.querySelectorAll("a")].map((a) => [a.getAttribute("href"), a.attributes.length]),
      title: document.querySelector("#convs li.on .open").textContent,
    };
  });
  check("model HTML shown as text", r.pwned === undefined && r.tags === 0 && r.on.length === 0 &&
        r.text.includes('<img src=x onerror="window.pwned=1">') && r.text.includes("<script>") &&
        r.user === "<i>hi</i>" && r.title === "<b>evil</b>", JSON.stringify(r));
  check("markdown: bold, italic, code", JSON.stringify(r.strong) === '["bold"]' &&
        JSON.stringify(r.em) === '["it"]' && r.code.includes("<b>code</b>") &&
        r.code.includes("<svg onload=window.pwned=5>"), JSON.stringify(r));
  check("links: http(s) only", r.links.length === 2 &&
        r.links[0][0] === "https://example.com/a?b=1&c=2" && r.links[1][0].startsWith("https://x.test/") &&
        r.links.every((l) => l[1] === 3) && r.text.includes("[bad](javascript:window.pwned=3)"),
        JSON.stringify(r.links));
}

async function screenshot(page, path) {
  await page.screenshot({ path });
  const png = fs.readFileSync(path);
  check("screenshot", png.length > 5000 && png.subarray(1, 4).toString() === "PNG", `${png.length} bytes`);
  console.log(`screenshot: ${path}`);
}

async function run(browser) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 760 });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused/.test(m.text())) problems.push(m.text());
  });
  const res = await page.goto(base + "/");
  const h = res.headers();
  check("GET / without the key", res.status() === 200 && h["content-type"] === "text/html; charset=utf-8" &&
        /^default-src 'none'; script-src 'sha256-/.test(h["content-security-policy"] || "") &&
        h["x-content-type-options"] === "nosniff", JSON.stringify(h));
  await page.waitForFunction(() => /API key/.test(document.querySelector("#status").textContent) &&
                             !document.querySelector("#settings").hidden);
  console.log("ok the page asks for the API key");
  await setSettings(page, { key, temperature: 0, top_p: 1, max_tokens: 48, system: SYSTEM });
  await page.waitForFunction((m) => document.querySelector("#model").textContent === m, {}, MODEL);
  const kept = await page.evaluate(() => JSON.parse(localStorage.getItem("nibble.key")));
  check("key kept in localStorage, model listed", kept === key, JSON.stringify(kept));
  await firstAnswer(page);
  await stopAnswer(page);
  await reload(page);
  await screenshot(page, shot);
  await escaping(page);
  await screenshot(page, shot.replace(/\.png$/, "") + "_markdown.png");
  check("no page errors or CSP violations", problems.length === 0, JSON.stringify(problems));
}

async function main() {
  const browser = await puppeteer.launch({
    // as root (CI) without the sandbox; /dev/shm may be small in a container
    executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--headless=new", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  try {
    await run(browser);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.log("FAIL " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
