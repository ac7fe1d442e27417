#!/usr/bin/env node
// conformance.mjs -- checks recorded HTTP responses against api/openapi.yaml.
//
// Usage: node conformance.mjs [--spec api/openapi.yaml] [--coverage] FILE.jsonl...
// Each line of FILE is one response:
//   {"method":"POST","path":"/locks/x","status":201,"headers":{...},"body":<parsed JSON>}
// (path without the query string; headers optional, any case; a non-JSON body as a string --
// an application/x-ndjson body as its text, each line checked against the schema;
// other members are ignored).
// A line conforms when its path matches a path template, its method an operation there and its
// status a documented response, its body validates against that response's schema, and -- when
// headers were recorded -- every required documented header is present and valid and the
// Content-Type is the documented one.  Unlisted paths must answer the document's
// x-fallback-responses.not-found (404), unlisted methods its method-not-allowed (405, with an
// Allow header naming exactly the documented methods).  For lock routes the body's `name` must
// be the decoded name of the path, and 2xx answers need a path name that the document allows;
// a body with `names` and `fencing_tokens` (POST /locks) needs exactly one token per name.
// Exit status: 0 all lines conform, 1 some do not, 2 bad usage or unreadable input.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import YAML from "yaml";

const MAX_SHOWN = 20;
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_SPEC = path.resolve(HERE, "../../api/openapi.yaml");

/** Follow a local "#/a/b" JSON pointer in doc. */
function pointer(doc, ref) {
  if (!ref.startsWith("#/")) throw new Error(`only local $refs are supported: ${ref}`);
  return ref.slice(2).split("/").reduce((node, raw) => {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node == null || !(key in node)) throw new Error(`unresolvable $ref ${ref}`);
    return node[key];
  }, doc);
}

/** An object that may be a {$ref} to a component (response, header, parameter). */
function deref(doc, obj) {
  for (let i = 0; obj && obj.$ref && i < 20; i++) obj = pointer(doc, obj.$ref);
  return obj;
}

/** Deep copy of a schema with "#/components/schemas/X" refs turned into "#/$defs/X". */
function toDefs(schema) {
  if (Array.isArray(schema)) return schema.map(toDefs);
  if (schema && typeof schema === "object") {
    const out = {};
    for (const [k, v] of Object.entries(schema)) {
      out[k] = k === "$ref" && typeof v === "string" && v.startsWith("#/components/schemas/")
        ? "#/$defs/" + v.slice("#/components/schemas/".length)
        : toDefs(v);
    }
    return out;
  }
  return schema;
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Load the document and prepare matchers; returns a checker object. */
export function loadSpec(specPath = DEFAULT_SPEC) {
  const doc = YAML.parse(fs.readFileSync(specPath, "utf8"));
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false });
  addFormats(ajv);
  ajv.addFormat("int64", { type: "number", validate: (n) => Number.isInteger(n) });
  ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && Math.abs(n) < 2 ** 31 });
  const defs = toDefs(doc.components?.schemas ?? {});
  const cache = new Map();
  const compile = (schema) => {
    if (!cache.has(schema)) cache.set(schema, ajv.compile({ ...toDefs(schema), $defs: defs }));
    return cache.get(schema);
  };

  // Templates: a parameter matches one segment, except in the last segment, where it takes
  // the rest of the path, even none (lock names may contain "/"; "/locks/" is an invalid,
  // empty name, not an unknown path).  Fewer parameters win.
  const routes = Object.keys(doc.paths ?? {}).map((tpl) => {
    const names = [];
    const segs = tpl.split("/");
    const re = segs.map((seg, i) => seg.replace(/\{([^}]+)\}|[^{]+/g, (m, p) => {
      if (!p) return escapeRe(m);
      names.push(p);
      return i === segs.length - 1 ? "(.*)" : "([^/]+)";
    })).join("/");
    return { tpl, re: new RegExp(`^${re}$`), names, item: doc.paths[tpl] };
  }).sort((a, b) => a.names.length - b.names.length);

  return { doc, compile, routes, specPath };
}

function fmtErrors(errors, root = "(body)") {
  return (errors ?? []).map((e) => `${e.instancePath || root} ${e.message}` +
    (e.params?.additionalProperty ? ` '${e.params.additionalProperty}'` : "") +
    (e.params?.allowedValues ? ` ${JSON.stringify(e.params.allowedValues)}` : "") +
    (e.params?.allowedValue !== undefined ? ` ${JSON.stringify(e.params.allowedValue)}` : "")).join("; ");
}

function findResponse(responses, status) {
  const s = String(status);
  if (responses?.[s]) return { key: s, resp: responses[s] };
  const range = `${s[0]}XX`;
  if (responses?.[range]) return { key: range, resp: responses[range] };
  if (responses?.default) return { key: "default", resp: responses.default };
  return null;
}

/** Check one recorded response.  Returns a list of problems (empty: it conforms) and, when it
 *  matched an operation, the key "METHOD template status" for coverage. */
export function checkRecord(spec, rec) {
  const { doc, compile, routes } = spec;
  const problems = [];
  if (!rec || typeof rec !== "object") return { problems: ["not a JSON object"] };
  for (const k of ["method", "path", "status"]) if (rec[k] === undefined) problems.push(`missing "${k}"`);
  if (problems.length) return { problems };
  const method = String(rec.method).toLowerCase();
  const rawPath = String(rec.path).split("?")[0];
  const status = Number(rec.status);
  if (!Number.isInteger(status)) return { problems: [`status ${JSON.stringify(rec.status)} is not an integer`] };
  const headers = rec.headers && typeof rec.headers === "object"
    ? Object.fromEntries(Object.entries(rec.headers).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v.join(", ") : String(v)]))
    : null;

  let route = null, match = null;
  for (const r of routes) {
    match = r.re.exec(rawPath);
    if (match) { route = r; break; }
  }
  const fallback = doc["x-fallback-responses"] ?? {};
  let resp, where, key, op = null;
  if (!route) {
    where = `${rec.method} ${rawPath} (no such path in the document)`;
    if (status !== 404 || !fallback["not-found"]) {
      return { problems: [`${where}: answered ${status}; an undocumented path must answer 404 not_found`] };
    }
    resp = deref(doc, { $ref: fallback["not-found"] });
  } else if (!METHODS.includes(method) || !route.item[method]) {
    const documented = METHODS.filter((m) => route.item[m]).map((m) => m.toUpperCase());
    where = `${rec.method} ${route.tpl} (method not in the document: ${documented.join(", ")})`;
    if (status !== 405 || !fallback["method-not-allowed"]) {
      return { problems: [`${where}: answered ${status}; an undocumented method must answer 405 method_not_allowed`] };
    }
    resp = deref(doc, { $ref: fallback["method-not-allowed"] });
    if (headers && headers.allow !== undefined) {
      const norm = (list) => [...new Set(list.map((m) => m.trim().toUpperCase()).filter((m) => m && m !== "HEAD" && m !== "OPTIONS"))].sort();
      const got = norm(headers.allow.split(","));
      const want = norm(documented);
      if (got.join() !== want.join()) problems.push(`Allow: ${headers.allow} -- the document has ${want.join(", ")}`);
    }
  } else {
    op = route.item[method];
    where = `${method.toUpperCase()} ${route.tpl} ${status}`;
    const found = findResponse(op.responses, status);
    if (!found) {
      const listed = Object.keys(op.responses ?? {}).join(", ");
      return { problems: [`${where}: status ${status} is not documented for this operation (documented: ${listed})`] };
    }
    resp = deref(doc, found.resp);
    key = `${method.toUpperCase()} ${route.tpl} ${found.key}`;
  }

  // Path parameters: a 2xx answer means the server accepted them, so they must be valid.
  const pathValues = {};
  if (route) {
    route.names.forEach((n, i) => {
      let v = match[i + 1];
      try { v = decodeURIComponent(v); } catch { problems.push(`path parameter ${n} is not valid percent-encoding`); }
      pathValues[n] = v;
    });
    if (op && status >= 200 && status < 300) {
      const params = [...(route.item.parameters ?? []), ...(op.parameters ?? [])].map((p) => deref(doc, p));
      for (const p of params.filter((p) => p.in === "path" && p.schema)) {
        const validate = compile(p.schema);
        if (!validate(pathValues[p.name])) {
          problems.push(`path parameter ${p.name}=${JSON.stringify(pathValues[p.name])} was accepted (${status}) but the document does not allow it: ${fmtErrors(validate.errors, "value")}`);
        }
      }
    }
  }

  // Headers (only when recorded).
  if (headers) {
    for (const [name, h0] of Object.entries(resp.headers ?? {})) {
      const h = deref(doc, h0);
      const v = headers[name.toLowerCase()];
      if (v === undefined) {
        if (h.required) problems.push(`missing header ${name}`);
        continue;
      }
      if (h.schema) {
        const t = h.schema.type;
        let value = v;
        if (t === "integer" || t === "number") {
          value = /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v.trim()) : v;
        }
        const validate = compile(h.schema);
        if (!validate(value)) problems.push(`header ${name}: ${JSON.stringify(v)}: ${fmtErrors(validate.errors, "value")}`);
      }
    }
    if (resp.content) {
      const ct = (headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
      if (!Object.keys(resp.content).map((k) => k.toLowerCase()).includes(ct)) {
        problems.push(`Content-Type ${JSON.stringify(headers["content-type"] ?? null)}; the document has ${Object.keys(resp.content).join(", ")}`);
      }
    }
  }

  // Body: the media type the response was sent as (or JSON, or the only one documented).
  const types = Object.keys(resp.content ?? {});
  const sent = (headers?.["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  const mediaType = types.find((t) => t.toLowerCase() === sent) ??
    (types.includes("application/json") ? "application/json" : types[0]);
  const media = mediaType ? resp.content[mediaType] : undefined;
  if (media) {
    if (!("body" in rec)) {
      problems.push(`no body recorded, the document has a ${mediaType} body`);
    } else if (media.schema && mediaType.toLowerCase() === "application/x-ndjson") {
      // A stream: each line is one JSON value of the schema.
      const validate = compile(media.schema);
      const lines = typeof rec.body === "string" ? rec.body.split("\n").filter((l) => l.trim()) : null;
      if (!lines || lines.length === 0) problems.push("body: an x-ndjson body needs at least one line");
      (lines ?? []).forEach((l, i) => {
        let v;
        try {
          v = JSON.parse(l);
        } catch {
          problems.push(`body line ${i + 1}: not JSON: ${JSON.stringify(l.slice(0, 80))}`);
          return;
        }
        if (!validate(v)) problems.push(`body line ${i + 1}: ${fmtErrors(validate.errors)}`);
      });
    } else if (media.schema) {
      const validate = compile(media.schema);
      if (!validate(rec.body)) problems.push(`body: ${fmtErrors(validate.errors)}`);
    }
    if (rec.body && typeof rec.body === "object" && "name" in rec.body && "name" in pathValues &&
        rec.body.name !== pathValues.name) {
      problems.push(`body name ${JSON.stringify(rec.body.name)} is not the path's name ${JSON.stringify(pathValues.name)}`);
    }
    const b = rec.body;
    if (b && typeof b === "object" && Array.isArray(b.names) && b.fencing_tokens &&
        typeof b.fencing_tokens === "object" && !Array.isArray(b.fencing_tokens)) {
      const keys = Object.keys(b.fencing_tokens);
      if ([...keys].sort().join("\n") !== [...b.names].map(String).sort().join("\n")) {
        problems.push(`fencing_tokens has the names ${JSON.stringify(keys)}, the body's names are ${JSON.stringify(b.names)}`);
      }
    }
  } else if (rec.body !== undefined && rec.body !== null && rec.body !== "") {
    problems.push("a body was recorded, the document has none for this response");
  }
  return { problems: problems.map((p) => (p.startsWith(where) ? p : `${where}: ${p}`)), key };
}

/** Every documented "METHOD template status", for coverage reports. */
export function documented(spec) {
  const out = [];
  for (const r of spec.routes) {
    for (const m of METHODS) {
      if (!r.item[m]) continue;
      for (const s of Object.keys(r.item[m].responses ?? {})) out.push(`${m.toUpperCase()} ${r.tpl} ${s}`);
    }
  }
  return out;
}

/** Check every line of a JSON-lines text; returns {passed, failed, messages, seen}. */
export function checkLines(spec, text, label = "input") {
  let passed = 0, failed = 0;
  const messages = [], seen = new Set();
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let rec;
    try {
      rec = JSON.parse(line);
    } catch (e) {
      failed++;
      messages.push(`${label}:${i + 1}: not JSON: ${e.message}`);
      return;
    }
    const { problems, key } = checkRecord(spec, rec);
    if (key) seen.add(key);
    if (problems.length) {
      failed++;
      for (const p of problems) messages.push(`${label}:${i + 1}: ${p}`);
    } else {
      passed++;
    }
  });
  return { passed, failed, messages, seen };
}

function main(argv) {
  let specPath = DEFAULT_SPEC, coverage = false;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--spec") specPath = argv[++i];
    else if (argv[i] === "--coverage") coverage = true;
    else if (argv[i] === "-h" || argv[i] === "--help") {
      console.log("usage: conformance.mjs [--spec api/openapi.yaml] [--coverage] FILE.jsonl...");
      return 0;
    } else files.push(argv[i]);
  }
  if (!files.length) {
    console.error("conformance: no input file (usage: conformance.mjs [--spec FILE] [--coverage] FILE.jsonl...)");
    return 2;
  }
  let spec;
  try {
    spec = loadSpec(specPath);
  } catch (e) {
    console.error(`conformance: cannot load ${specPath}: ${e.message}`);
    return 2;
  }
  let passed = 0, failed = 0;
  const seen = new Set();
  const all = [];
  for (const f of files) {
    let text;
    try {
      text = fs.readFileSync(f, "utf8");
    } catch (e) {
      console.error(`conformance: cannot read ${f}: ${e.message}`);
      return 2;
    }
    const r = checkLines(spec, text, f);
    passed += r.passed;
    failed += r.failed;
    all.push(...r.messages);
    r.seen.forEach((k) => seen.add(k));
  }
  // The first problems in full; past that, each kind of problem once with its count.
  all.slice(0, MAX_SHOWN).forEach((m) => console.log(`FAIL ${m}`));
  if (all.length > MAX_SHOWN) {
    const kinds = new Map();
    for (const m of all.slice(MAX_SHOWN)) {
      const k = m.replace(/^.*?:\d+: /, "");
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
    console.log(`... and ${all.length - MAX_SHOWN} more problems:`);
    [...kinds].sort((a, b) => b[1] - a[1]).forEach(([k, n]) => console.log(`FAIL ${n} x ${k}`));
  }
  if (passed + failed === 0) {
    console.error(`conformance: no responses in ${files.join(" ")}`);
    return 1;
  }
  if (coverage) {
    const missing = documented(spec).filter((k) => !seen.has(k));
    console.log(`documented responses seen: ${seen.size} of ${seen.size + missing.length}`);
    if (missing.length) console.log(`not exercised: ${missing.join("; ")}`);
  }
  console.log(`openapi-conformance: ${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
