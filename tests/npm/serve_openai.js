// nibble serve against the official OpenAI client (the `openai` package pinned in
// package.json): chat, a streamed chat whose chunks add up to the plain answer, a
// completion, the model list, logit_bias, presence/frequency penalties, tool calls (plain, streamed through the client's own
// ChatCompletionStream, and a conversation with a call and its result), json_object
// answers, json_schema answers and call arguments that keep to their schemas (checked by
// ajv, pinned in package.json, as an independent validator), and errors the client raises
// as APIError with their status.
//   node serve_openai.js http://127.0.0.1:PORT
// Prints one line per check; exits 1 on the first failure.
"use strict";
const OpenAI = require("openai");
const Ajv2020 = require("ajv/dist/2020");

const base = process.argv[2];
if (!base) {
  console.error("usage: node serve_openai.js URL");
  process.exit(2);
}
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", timeout: 30000, maxRetries: 0 });

function check(name, cond, detail) {
  if (!cond) {
    console.log(`FAIL ${name}: ${detail}`);
    process.exit(1);
  }
  console.log(`ok ${name}`);
}

async function main() {
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  check("models.list", ids.length === 1 && ids[0] === "kjv-7m-f32.gguf", JSON.stringify(ids));
  const one = await client.models.retrieve(ids[0]);
  check("models.retrieve", one.id === ids[0] && one.object === "model", JSON.stringify(one));

  const messages = [
    { role: "system", content: "Speak as the King James Bible." },
    { role: "user", content: "Who made the heaven and the earth?" },
  ];
  const chat = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 16, temperature: 0,
  });
  const answer = chat.choices[0].message.content;
  check("chat", chat.object === "chat.completion" && typeof answer === "string" && answer.length > 0 &&
        chat.choices[0].message.role === "assistant" && chat.usage.completion_tokens >= 1 &&
        ["stop", "length"].includes(chat.choices[0].finish_reason), JSON.stringify(chat));

  const stream = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 16, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "", chunks = 0, finish = null, usage = null;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].delta.content || "";
      finish = c.choices[0].finish_reason || finish;
    }
  }
  check("chat stream = chat", text === answer && chunks > 2 && finish === chat.choices[0].finish_reason,
        `${JSON.stringify(text)} vs ${JSON.stringify(answer)}, ${chunks} chunks, ${finish}`);
  check("stream usage", usage && usage.completion_tokens === chat.usage.completion_tokens &&
        usage.prompt_tokens === chat.usage.prompt_tokens, JSON.stringify(usage));

  const lp = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const content = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
  check("chat logprobs", Array.isArray(content) && content.length === lp.usage.completion_tokens &&
        content.every((t) => t.logprob <= 0 && t.top_logprobs.length === 2 &&
                             t.top_logprobs[0].logprob === t.logprob) &&
        content.map((t) => t.token).join("") === lp.choices[0].message.content,
        JSON.stringify(lp.choices[0]));

  const cmpl = await client.completions.create({
    model: ids[0], prompt: "In the beginning", max_tokens: 8, temperature: 0,
  });
  check("completion", cmpl.choices[0].text.length > 0 && cmpl.usage.completion_tokens === 8 &&
        cmpl.choices[0].finish_reason === "length", JSON.stringify(cmpl));

  // n: choices sampled apart, the choice i of a seeded request that of seed + i; greedy
  // ones all the same; streams (chunks of the choices interleaved, each with its index) add
  // up to the plain answer; usage counts the prompt once and sums the completions
  const nChat = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 10, temperature: 1, seed: 7, n: 3,
  });
  const nAlone = [];
  for (let i = 0; i < 3; i++)
    nAlone.push(await client.chat.completions.create({
      model: ids[0], messages, max_tokens: 10, temperature: 1, seed: 7 + i,
    }));
  check("chat n=3", nChat.choices.length === 3 && nChat.choices.every((c, i) => c.index === i &&
        c.message.content === nAlone[i].choices[0].message.content) &&
        nChat.usage.prompt_tokens === nAlone[0].usage.prompt_tokens &&
        nChat.usage.completion_tokens === nAlone.reduce((a, r) => a + r.usage.completion_tokens, 0),
        JSON.stringify(nChat));
  const nStream = await client.chat.completions.create({
    model: ids[0], messages, max_tokens: 10, temperature: 1, seed: 7, n: 3, stream: true,
    stream_options: { include_usage: true },
  });
  const nText = ["", "", ""], nFin = [null, null, null];
  let nUsage = null;
  for await (const c of nStream) {
    if (c.usage) nUsage = c.usage;
    for (const ch of c.choices) {
      nText[ch.index] += ch.delta.content || "";
      nFin[ch.index] = ch.finish_reason || nFin[ch.index];
    }
  }
  check("chat n=3 stream", nText.every((t, i) => t === nChat.choices[i].message.content &&
        nFin[i] === nChat.choices[i].finish_reason) && nUsage &&
        nUsage.completion_tokens === nChat.usage.completion_tokens,
        `${JSON.stringify(nText)} ${JSON.stringify(nFin)} ${JSON.stringify(nUsage)}`);
  const nCmpl = await client.completions.create({
    model: ids[0], prompt: "In the beginning", max_tokens: 8, temperature: 0, n: 4,
  });
  check("completions n=4 greedy", nCmpl.choices.length === 4 &&
        nCmpl.choices.every((c, i) => c.index === i && c.text === cmpl.choices[0].text) &&
        nCmpl.usage.completion_tokens === 32 && nCmpl.usage.prompt_tokens === cmpl.usage.prompt_tokens,
        JSON.stringify(nCmpl));
  const nCs = await client.completions.create({
    model: ids[0], prompt: "In the beginning", max_tokens: 8, temperature: 1, seed: 3, n: 2, stream: true,
  });
  const nCt = ["", ""];
  for await (const c of nCs) for (const ch of c.choices) nCt[ch.index] += ch.text;
  const nCp = await client.completions.create({
    model: ids[0], prompt: "In the beginning", max_tokens: 8, temperature: 1, seed: 3, n: 2,
  });
  check("completions n=2 stream", nCt.every((t, i) => t === nCp.choices[i].text) && nCt[0] !== nCt[1],
        `${JSON.stringify(nCt)} vs ${JSON.stringify(nCp.choices)}`);

  // logit_bias: a banned token never comes (the greedy answer to these ids starts with
  // 271), a token at +100 is all that comes; a key outside the vocabulary is a 400
  const ids4 = [1, 1046, 261, 2074];
  const plain = await client.completions.create({
    model: ids[0], prompt: ids4, max_tokens: 6, temperature: 0, logprobs: 1,
  });
  const banned = await client.completions.create({
    model: ids[0], prompt: ids4, max_tokens: 6, temperature: 0, logprobs: 1, logit_bias: { "271": -100 },
  });
  check("logit_bias ban", banned.choices[0].logprobs.tokens[0] !== plain.choices[0].logprobs.tokens[0] &&
        banned.choices[0].text !== plain.choices[0].text, JSON.stringify([plain.choices[0].text, banned.choices[0].text]));
  const forced = await client.completions.create({
    model: ids[0], prompt: ids4, max_tokens: 5, temperature: 1, seed: 3, logprobs: 1, logit_bias: { "614": 100 },
  });
  const ft = forced.choices[0].logprobs.tokens;
  check("logit_bias +100", ft.length === 5 && ft.every((t) => t === ft[0]), JSON.stringify(ft));
  let biasErr = null;
  try {
    await client.completions.create({ model: ids[0], prompt: "In", max_tokens: 2, logit_bias: { "999999": 1 } });
  } catch (e) { biasErr = e; }
  check("logit_bias out of the vocabulary", biasErr && biasErr.status === 400 &&
        biasErr.param === "logit_bias", String(biasErr));

  // presence / frequency penalties: OpenAI's, over the penalty window; greedy, 32 tokens:
  // each penalty makes the answer repeat less (more distinct tokens) and differ from the
  // plain one; out of -2..2 a 400 naming the field
  const distinct = (r) => new Set(r.choices[0].logprobs.tokens).size;
  const unpen = await client.completions.create({
    model: ids[0], prompt: "And the LORD said", max_tokens: 32, temperature: 0, logprobs: 1,
  });
  for (const field of ["presence_penalty", "frequency_penalty"]) {
    const pen = await client.completions.create({
      model: ids[0], prompt: "And the LORD said", max_tokens: 32, temperature: 0, logprobs: 1, [field]: 2,
    });
    check(`${field} 2`, pen.choices[0].text !== unpen.choices[0].text && distinct(pen) > distinct(unpen),
          JSON.stringify([distinct(unpen), distinct(pen), unpen.choices[0].text, pen.choices[0].text]));
    let penErr = null;
    try {
      await client.completions.create({ model: ids[0], prompt: "In", max_tokens: 2, [field]: 3 });
    } catch (e) { penErr = e; }
    check(`${field} out of range`, penErr && penErr.status === 400 && penErr.param === field, String(penErr));
  }

  // tools: tool_choice "required" makes even kjv-7m call one of them
  const tools = [
    { type: "function", function: { name: "get_weather", description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" },
        unit: { enum: ["celsius", "fahrenheit"] }, days: { type: "integer" } },
      required: ["city", "unit"], additionalProperties: false } } },
    { type: "function", function: { name: "find_verse", description: "Find a verse",
      parameters: { type: "object", properties: { book: { type: "string" },
        chapter: { type: "integer" }, verses: { type: "array", items: { type: "integer" }, maxItems: 3 } },
      required: ["book", "chapter"], additionalProperties: false } } },
  ];
  const names = tools.map((t) => t.function.name);
  const ajv = new Ajv2020({ strict: true });
  const argsValid = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
  const ask = [{ role: "user", content: "What is the weather in Jerusalem?" }];
  // a call: its id, a listed name, and arguments that keep to that function's schema
  const isCall = (c) => c.type === "function" && /^call_[0-9A-Za-z]{24}$/.test(c.id) &&
    names.includes(c.function.name) && typeof JSON.parse(c.function.arguments) === "object" &&
    !Array.isArray(JSON.parse(c.function.arguments)) && argsValid[c.function.name](JSON.parse(c.function.arguments));
  let calls = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
      model: ids[0], messages: ask, tools, tool_choice: "required", temperature: 1, seed, max_tokens: 96,
    });
    const m = r.choices[0].message;
    check(`tool call (seed ${seed})`, r.choices[0].finish_reason === "tool_calls" && m.content === null &&
          m.tool_calls.length === 1 && isCall(m.tool_calls[0]), JSON.stringify(r.choices[0]));
    calls++;
  }
  // "required" with parallel calls (the default) and room for more than one: one call or
  // more, each valid, distinct ids; parallel_tool_calls false: exactly one
  let several = 0;
  for (let seed = 1; seed <= 6; seed++) {
    for (const parallel of [true, false]) {
      const r = await client.chat.completions.create({
        model: ids[0], messages: ask, tools, tool_choice: "required", temperature: 1, seed, max_tokens: 400,
        parallel_tool_calls: parallel,
      });
      const tc = r.choices[0].message.tool_calls || [];
      const ok = r.choices[0].finish_reason === "tool_calls" && tc.length >= 1 && tc.every(isCall) &&
        new Set(tc.map((c) => c.id)).size === tc.length && (parallel || tc.length === 1);
      check(`tool calls (seed ${seed}, parallel ${parallel})`, ok, JSON.stringify(r.choices[0]));
      if (tc.length > 1) several++;
    }
  }
  console.log(`# required, 400 tokens: ${several} of 6 parallel answers made more than one call`);
  const greedy = await client.chat.completions.create({
    model: ids[0], messages: ask, tools, tool_choice: { type: "function", function: { name: "get_weather" } },
    temperature: 0, max_tokens: 96,
  });
  const call = greedy.choices[0].message.tool_calls[0];
  check("named tool call", call.function.name === "get_weather" && isCall(call), JSON.stringify(greedy.choices[0]));
  // the client's stream helper puts the deltas together: the same call
  const ts = client.chat.completions.stream({
    model: ids[0], messages: ask, tools, tool_choice: { type: "function", function: { name: "get_weather" } },
    temperature: 0, max_tokens: 96,
  });
  let argDeltas = "";
  ts.on("tool_calls.function.arguments.delta", (e) => { argDeltas += e.arguments_delta; });
  const fin = await ts.finalChatCompletion();
  const sc = fin.choices[0].message.tool_calls;
  check("streamed tool call", fin.choices[0].finish_reason === "tool_calls" && sc.length === 1 &&
        sc[0].function.name === call.function.name && sc[0].function.arguments === call.function.arguments &&
        argDeltas === call.function.arguments && isCall(sc[0]), JSON.stringify(fin.choices[0]));
  // the call and its result sent back, the conversation goes on
  const next = await client.chat.completions.create({
    model: ids[0], tools, temperature: 0, max_tokens: 8,
    messages: [...ask, greedy.choices[0].message, { role: "tool", tool_call_id: call.id, content: "hot" }],
  });
  check("tool result turn", typeof next.choices[0].message.content === "string", JSON.stringify(next.choices[0]));

  // json_object: the content parses as a JSON object
  for (let seed = 1; seed <= 6; seed++) {
    const j = await client.chat.completions.create({
      model: ids[0], messages: [{ role: "user", content: "Answer in JSON." }],
      response_format: { type: "json_object" }, temperature: 1, seed, max_tokens: 24 + 8 * seed,
    });
    let obj = null;
    try { obj = JSON.parse(j.choices[0].message.content); } catch (e) { obj = null; }
    check(`json_object (seed ${seed})`, obj !== null && typeof obj === "object" && !Array.isArray(obj) &&
          j.choices[0].finish_reason === "stop", JSON.stringify(j.choices[0]));
  }
  const js = await client.chat.completions.create({
    model: ids[0], messages: [{ role: "user", content: "JSON" }], response_format: { type: "json_object" },
    temperature: 0.8, seed: 4, max_tokens: 40, stream: true,
  });
  let jtext = "";
  for await (const c of js) if (c.choices.length) jtext += c.choices[0].delta.content || "";
  let jobj = null;
  try { jobj = JSON.parse(jtext); } catch (e) { jobj = null; }
  check("json_object stream", jobj !== null && typeof jobj === "object", JSON.stringify(jtext));
  console.log(`# ${calls} of 6 forced tool calls and 6 of 6 json_object answers parsed`);

  // json_schema, strict: every answer parses and keeps to the schema (ajv), at temperature 1,
  // with budgets from about the least the schema needs up; a budget too short for any valid
  // object is said as finish_reason "length"
  const schema = {
    type: "object",
    properties: {
      name: { type: "string" },
      age: { type: "integer" },
      tags: { type: "array", items: { enum: ["law", "prophets", "psalms"] }, minItems: 1, maxItems: 3 },
      place: { anyOf: [{ type: "null" }, { $ref: "#/$defs/place" }] },
      alive: { type: "boolean" },
      score: { type: ["number", "null"] },
    },
    required: ["name", "tags", "place"],
    additionalProperties: false,
    $defs: { place: { type: "object", properties: { city: { type: "string" }, near: { anyOf: [{ $ref: "#/$defs/place" }, { type: "null" }] } },
      required: ["city", "near"], additionalProperties: false } },
  };
  const validate = ajv.compile(schema);
  let valid = 0, lengths = 0, runs = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const max_tokens = 40 + 12 * seed;
    const r = await client.chat.completions.create({
      model: ids[0], messages: [{ role: "user", content: "Who was Moses? Answer in JSON." }],
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
      temperature: 1, seed, max_tokens,
    });
    runs++;
    const ch = r.choices[0];
    let obj = null;
    try { obj = JSON.parse(ch.message.content); } catch (e) { obj = null; }
    const ok = obj !== null && validate(obj);
    if (ch.finish_reason === "length") { lengths++; continue; }
    check(`json_schema (seed ${seed}, max_tokens ${max_tokens})`, ch.finish_reason === "stop" && ok,
          JSON.stringify(ch) + " " + JSON.stringify(validate.errors));
    valid++;
  }
  console.log(`# json_schema strict: ${valid} of ${runs} answers parse and keep to the schema (ajv), ` +
              `${lengths} said finish_reason "length"`);
  check("json_schema: most answers finish", valid >= 7, `${valid} of ${runs}`);
  // streamed: the chunks add up to an answer that keeps to the schema
  const ss = await client.chat.completions.create({
    model: ids[0], messages: [{ role: "user", content: "JSON" }],
    response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
    temperature: 1, seed: 99, max_tokens: 100, stream: true,
  });
  let stext = "";
  for await (const c of ss) if (c.choices.length) stext += c.choices[0].delta.content || "";
  let sobj = null;
  try { sobj = JSON.parse(stext); } catch (e) { sobj = null; }
  check("json_schema stream", sobj !== null && validate(sobj), JSON.stringify(stext));
  // strict with a keyword outside the subset: 400 naming it
  try {
    await client.chat.completions.create({
      model: ids[0], messages: [{ role: "user", content: "JSON" }], max_tokens: 8,
      response_format: { type: "json_schema", json_schema: { name: "p", strict: true,
        schema: { type: "object", properties: { a: { type: "string", format: "email" } } } } },
    });
    check("json_schema strict refused", false, "no error");
  } catch (e) {
    check("json_schema strict refused", e instanceof OpenAI.BadRequestError &&
          e.param === "response_format.json_schema.schema" && /'format' is not supported/.test(e.message),
          `${e.status} ${e.param} ${e.message}`);
  }

  // embeddings: unit vectors of n_embd floats; the client asks for base64 unless told
  // (and decodes it): the same floats as encoding_format "float"
  const texts = ["In the beginning God created the heaven and the earth.", "And God said, Let there be light"];
  const emb = await client.embeddings.create({ model: ids[0], input: texts });
  const embF = await client.embeddings.create({ model: ids[0], input: texts, encoding_format: "float" });
  const unit = (v) => Math.abs(Math.sqrt(v.reduce((a, x) => a + x * x, 0)) - 1) < 1e-5;
  check("embeddings", emb.object === "list" && emb.data.length === 2 &&
        emb.data.every((d, i) => d.object === "embedding" && d.index === i && d.embedding.length === 256 &&
                       unit(d.embedding)) &&
        emb.usage.prompt_tokens > 2 && emb.usage.total_tokens === emb.usage.prompt_tokens,
        JSON.stringify(emb).slice(0, 300));
  check("embeddings base64 = float", emb.data.every((d, i) =>
        d.embedding.every((x, k) => x === Math.fround(embF.data[i].embedding[k]))),
        JSON.stringify(embF.data[0].embedding.slice(0, 4)));
  check("embeddings differ", emb.data[0].embedding.some((x, k) => x !== emb.data[1].embedding[k]), "");
  const again = await client.embeddings.create({ model: ids[0], input: texts[1] });
  check("embeddings: same text, same vector",
        again.data[0].embedding.every((x, k) => x === emb.data[1].embedding[k]), "");
  try {
    await client.embeddings.create({ model: ids[0], input: "In", dimensions: 3 });
    check("embeddings dimensions refused", false, "no error");
  } catch (e) {
    check("embeddings dimensions refused", e instanceof OpenAI.BadRequestError && e.param === "dimensions",
          `${e.status} ${e.param} ${e.message}`);
  }

  // errors: APIError with the status and the error object's fields
  try {
    await client.chat.completions.create({ model: ids[0], messages, n: 9 });
    check("n = 9 refused", false, "no error");
  } catch (e) {
    check("n = 9 refused", e instanceof OpenAI.APIError && e.status === 400 && e.param === "n" &&
          e.type === "invalid_request_error", `${e.status} ${e.param} ${e.type} ${e.message}`);
  }
  try {
    await client.chat.completions.create({ model: ids[0], messages: [{ role: "user", content: "x ".repeat(3000) }] });
    check("prompt too long", false, "no error");
  } catch (e) {
    check("prompt too long", e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded",
          `${e.status} ${e.code} ${e.message}`);
  }
  const bad = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 });
  try {
    await bad.post("/nope", { body: {} });
    check("unknown endpoint", false, "no error");
  } catch (e) {
    check("unknown endpoint", e instanceof OpenAI.NotFoundError, `${e.status} ${e.message}`);
  }
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
