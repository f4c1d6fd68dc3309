// Validates text files against a JSON Schema with ajv (pinned in package.json: an
// independent validator for `nibble run --json-schema`, tests/cli/json_schema.sh).
// usage: node validate_json.js SCHEMA.json FILE...
// Prints one line per file ("ok FILE", or "invalid FILE: why") and exits 1 if any is not
// one JSON value (surrounding whitespace allowed) that keeps to the schema.
"use strict";
const fs = require("fs");
const Ajv2020 = require("ajv/dist/2020");

const [schemaPath, ...files] = process.argv.slice(2);
if (!schemaPath || files.length === 0) {
  console.error("usage: node validate_json.js SCHEMA.json FILE...");
  process.exit(2);
}
const validate = new Ajv2020({ strict: false }).compile(JSON.parse(fs.readFileSync(schemaPath, "utf8")));
let bad = 0;
for (const f of files) {
  const text = fs.readFileSync(f, "utf8");
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    console.log(`invalid ${f}: not JSON (${e.message}): ${JSON.stringify(text.slice(0, 200))}`);
    bad++;
    continue;
  }
  if (validate(value)) {
    console.log(`ok ${f}`);
  } else {
    console.log(`invalid ${f}: ${JSON.stringify(validate.errors)}: ${JSON.stringify(text.slice(0, 200))}`);
    bad++;
  }
}
process.exit(bad ? 1 : 0);
