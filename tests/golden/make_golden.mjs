#!/usr/bin/env node
// Reference implementation of dsh-loop-brake's call identity (SPEC §1), written with JavaScript's own
// JSON.stringify, so the Python canonical_json is held to what a JavaScript host produces.
//
// canonical(value) is JSON.stringify with object keys sorted by UTF-16 code units (Array#sort's
// default order) at every level. Objects are assembled here rather than by JSON.stringify because a
// JavaScript object would list integer-like keys ("2", "10") first, whatever order they were added in.
//
// Input is "tagged JSON": plain JSON, plus objects with a "$py" key for the Python values that JSON
// text cannot carry into JavaScript intact:
//   {"$py": "int", "digits": "-123…"}           an exact Python int. JavaScript would round it beyond
//                                                2^53; the spec writes Python ints exactly (a deliberate
//                                                difference), so this script writes the BigInt's digits:
//                                                those expected outputs come from that rule, not from
//                                                JSON.stringify.
//   {"$py": "float", "value": "nan"|"inf"|"-inf"}  non-finite floats (JSON.stringify writes null)
//   {"$py": "object", "pairs": [[key, value], …]}  an object given as key/value pairs (a "$py" key)
// Lone surrogates travel as \udxxx escapes and -0.0 as -0.0: JSON.parse keeps both.
//
// Usage:
//   node make_golden.mjs identity_inputs.json > identity_expected.json
//       inputs: [{"name", "value", "tool"?}, …] -> [{"name", "canonical", "callHash"?}, …]
//       where callHash is the hex SHA-256 of tool + "\n" + canonical, UTF-8 encoded.
//   node make_golden.mjs --lines
//       one tagged value per stdin line -> its canonical JSON as a JSON string literal per stdout line.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

class ExactInt {
  constructor(digits) {
    this.value = BigInt(digits);
  }
}

const NON_FINITE = { nan: NaN, inf: Infinity, "-inf": -Infinity };

function decode(node) {
  if (Array.isArray(node)) return node.map(decode);
  if (node === null || typeof node !== "object") return node;
  if (!Object.hasOwn(node, "$py")) {
    return new Map(Object.entries(node).map(([k, v]) => [k, decode(v)]));
  }
  switch (node.$py) {
    case "int":
      return new ExactInt(node.digits);
    case "float":
      if (!Object.hasOwn(NON_FINITE, node.value)) throw new Error(`bad float tag ${node.value}`);
      return NON_FINITE[node.value];
    case "object":
      return new Map(node.pairs.map(([k, v]) => [k, decode(v)]));
    default:
      throw new Error(`unknown tag ${node.$py}`);
  }
}

function canonical(value) {
  if (value instanceof ExactInt) return value.value.toString();
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value instanceof Map) {
    const keys = [...value.keys()].sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value.get(k))}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function callHash(tool, canonicalArgs) {
  return createHash("sha256").update(`${tool}\n${canonicalArgs}`, "utf8").digest("hex");
}

function golden(path) {
  const vectors = JSON.parse(readFileSync(path, "utf8"));
  const expected = vectors.map(({ name, value, tool }) => {
    const text = canonical(decode(value));
    return tool === undefined
      ? { name, canonical: text }
      : { name, canonical: text, callHash: callHash(tool, text) };
  });
  process.stdout.write(`${JSON.stringify(expected, null, 2)}\n`);
}

function lines() {
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on("line", (line) => {
    process.stdout.write(`${JSON.stringify(canonical(decode(JSON.parse(line))))}\n`);
  });
}

const [arg] = process.argv.slice(2);
if (arg === "--lines") lines();
else if (arg) golden(arg);
else {
  process.stderr.write("usage: node make_golden.mjs INPUTS.json | --lines\n");
  process.exit(2);
}
