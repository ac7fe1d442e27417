#!/usr/bin/env node
// examplecheck.mjs -- api/openapi.yaml's response examples against the real service's answers.
//
// Usage: node examplecheck.mjs [--spec api/openapi.yaml] RECORDING.jsonl...
// RECORDING: the responses `make openapi-conformance-live` records from the integration suite
// (the format of conformance.mjs).  Every example of an application/json response (inline or a
// components/examples $ref) is compared with the live answers of the same operation and status
// ("POST /locks/{name} 409"):
//   - an error example ({"error","message",...}) needs a live answer with the same error code
//     and the same message, quoted parts ('...': the name, member or parameter the request gave)
//     compared as any value, and the example's members, no more, no fewer.  The answers
//     compared: the operation's own; for the request-validation codes (invalid_*, forbidden,
//     unauthorized, not_found, method_not_allowed, body_too_large), whose texts are the same
//     on every route, any route's; for a code the operation never answered, any route's;
//   - any other example needs a live answer of the same shape: the same members, recursively
//     (values differ: leases, tokens, timings; a map keyed by lock names, e.g. fencing_tokens,
//     has data for keys: not compared); an array's elements each like one of the live array's.
// An example whose operation and status (or error code) the suite never provoked is listed as
// not seen, and does not fail.  Exit status: 0 every example seen matches, 1 some do not, 2 bad
// usage or input.
import fs from "node:fs";
import { loadSpec, checkRecord, DEFAULT_SPEC } from "./conformance.mjs";

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

function deref(doc, obj) {
  for (let i = 0; obj && obj.$ref && i < 20; i++) {
    obj = obj.$ref.slice(2).split("/").reduce((n, k) => n?.[k.replace(/~1/g, "/").replace(/~0/g, "~")], doc);
  }
  return obj;
}

/** [{key: "POST /locks/{name} 409", name, value}] for every JSON response example. */
export function examples(doc) {
  const out = [];
  for (const [tpl, item] of Object.entries(doc.paths ?? {})) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      for (const [status, r] of Object.entries(op.responses ?? {})) {
        const resp = deref(doc, r);
        const media = resp?.content?.["application/json"];
        if (!media) continue;
        const key = `${m.toUpperCase()} ${tpl} ${status}`, schema = media.schema;
        if (media.example !== undefined) out.push({ key, name: "example", value: media.example, schema });
        for (const [name, ex] of Object.entries(media.examples ?? {})) {
          const e = deref(doc, ex);
          if (e && e.value !== undefined) out.push({ key, name, value: e.value, schema });
        }
      }
    }
  }
  return out;
}

const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** The schema of member k of schema s (through $ref, allOf, oneOf, anyOf), or undefined. */
function member(doc, s, k) {
  s = deref(doc, s);
  if (!s) return undefined;
  if (s.properties?.[k]) return s.properties[k];
  for (const part of [...(s.allOf ?? []), ...(s.oneOf ?? []), ...(s.anyOf ?? [])]) {
    const m = member(doc, part, k);
    if (m) return m;
  }
  return undefined;
}

/** A map keyed by data (lock names), not by member names: propertyNames, or only
 *  additionalProperties. */
function isMap(doc, s) {
  s = deref(doc, s);
  return !!s && (s.propertyNames !== undefined || (!s.properties && isObj(s.additionalProperties)));
}

/** Same members, recursively (a map's keys are data: not compared); arrays: each example
 *  element like one live element. */
export function sameShape(ex, live, doc = {}, schema = undefined) {
  if (isObj(ex) && isObj(live)) {
    if (isMap(doc, schema)) return true;
    const a = Object.keys(ex).sort(), b = Object.keys(live).sort();
    if (a.join() !== b.join()) return false;
    return a.every((k) => sameShape(ex[k], live[k], doc, member(doc, schema, k)));
  }
  if (Array.isArray(ex) && Array.isArray(live)) {
    if (!live.length || !ex.length) return true;
    const items = deref(doc, schema)?.items;
    return ex.every((e) => live.some((l) => sameShape(e, l, doc, items)));
  }
  if (isObj(ex) !== isObj(live) || Array.isArray(ex) !== Array.isArray(live)) return ex === null || live === null;
  return true;
}

const quotedAsAny = (s) => String(s).replace(/'[^']*'/g, "'…'");
// Codes whose messages come from the shared validation of requests (the same text on every
// route); other codes' messages belong to the operation (lock_held says "every permit of
// this semaphore is taken" on a semaphore, "held by another lease" on a lock).
const routeFree = (code) => code.startsWith("invalid_") ||
  ["forbidden", "unauthorized", "not_found", "method_not_allowed", "body_too_large"].includes(code);
const isError = (v) => isObj(v) && typeof v.error === "string" && typeof v.message === "string";

/** Checks the examples against the recorded bodies; returns {passed, failed, unseen, messages}. */
export function checkExamples(spec, records) {
  const byKey = new Map(), errorsByCode = new Map();
  for (const rec of records) {
    const { key } = checkRecord(spec, rec);
    if (!key || !isObj(rec.body)) continue;
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(rec.body);
    if (isError(rec.body)) {
      if (!errorsByCode.has(rec.body.error)) errorsByCode.set(rec.body.error, []);
      errorsByCode.get(rec.body.error).push(rec.body);
    }
  }
  let passed = 0, failed = 0;
  const unseen = [], messages = [];
  for (const ex of examples(spec.doc)) {
    const where = `${ex.key} example '${ex.name}'`;
    let live = byKey.get(ex.key) ?? [];
    if (isError(ex.value)) {
      let same = live.filter((b) => isError(b) && b.error === ex.value.error);
      if (!same.length || routeFree(ex.value.error)) same = errorsByCode.get(ex.value.error) ?? [];
      if (!same.length) { unseen.push(`${where} (${ex.value.error})`); continue; }
      const msg = same.filter((b) => quotedAsAny(b.message) === quotedAsAny(ex.value.message));
      if (!msg.length) {
        failed++;
        const common = (m) => { let i = 0; while (i < m.length && m[i] === ex.value.message[i]) i++; return i; };
        const seen = [...new Set(same.map((b) => b.message))].sort((x, y) => common(y) - common(x))
          .slice(0, 3).map((m) => JSON.stringify(m)).join(", ");
        messages.push(`${where}: message ${JSON.stringify(ex.value.message)}; the service says ${seen}`);
      } else if (!msg.some((b) => sameShape(ex.value, b, spec.doc, ex.schema))) {
        failed++;
        messages.push(`${where}: members ${Object.keys(ex.value).sort().join(",")}; the service answers ` +
          `${Object.keys(msg[0]).sort().join(",")}`);
      } else passed++;
      continue;
    }
    if (!live.length) { unseen.push(where); continue; }
    if (live.some((b) => sameShape(ex.value, b, spec.doc, ex.schema))) { passed++; continue; }
    failed++;
    messages.push(`${where}: members ${Object.keys(ex.value ?? {}).sort().join(",")}; no live answer has ` +
      `that shape (e.g. ${Object.keys(live[0]).sort().join(",")})`);
  }
  return { passed, failed, unseen, messages };
}

function main(argv) {
  let specPath = DEFAULT_SPEC;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--spec") specPath = argv[++i];
    else files.push(argv[i]);
  }
  if (!files.length) {
    console.error("usage: examplecheck.mjs [--spec FILE] RECORDING.jsonl...");
    return 2;
  }
  const spec = loadSpec(specPath);
  const records = [];
  for (const f of files) {
    let text;
    try { text = fs.readFileSync(f, "utf8"); } catch (e) { console.error(`examplecheck: ${e.message}`); return 2; }
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try { records.push(JSON.parse(line)); } catch { /* conformance.mjs reports it */ }
    }
  }
  const r = checkExamples(spec, records);
  for (const m of r.messages) console.log(`examplecheck: ${m}`);
  if (r.unseen.length) console.log(`examplecheck: not provoked by the suite (not checked): ${r.unseen.join("; ")}`);
  console.log(`openapi examples against live answers: ${r.passed} passed, ${r.failed} failed, ${r.unseen.length} skipped`);
  return r.failed ? 1 : 0;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) process.exit(main(process.argv.slice(2)));
