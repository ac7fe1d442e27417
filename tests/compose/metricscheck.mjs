#!/usr/bin/env node
// metricscheck.mjs -- the alert rules and the Grafana dashboard of deploy/ query metrics
// that exist (make metrics-check).
//
// Usage: node metricscheck.mjs --metrics FILE [--rules FILE] [--dashboard FILE] [--pending FILE]
//   --metrics    a real redlockd's GET /metrics (scrape-metrics.sh writes one)
//   --rules      Prometheus rule file (default deploy/prometheus/redlockd-alerts.yaml)
//   --dashboard  Grafana dashboard JSON (default deploy/grafana/redlockd-dashboard.json)
//   --pending    names not in /metrics yet, accepted as if they were (default
//                deploy/prometheus/pending-metrics.txt; "-" or a missing file: none)
// Every expression (rules, dashboard targets, template variable queries) is parsed with
// Prometheus' own PromQL grammar (@prometheus-io/lezer-promql, as the Prometheus UI uses);
// each selector's metric must be a series of the scrape (a histogram's NAME_bucket/_sum/
// _count included) or of the pending list, each matcher's label a label of that series,
// and each by/without/on/ignoring label one of a series of the expression (job and instance,
// the target labels Prometheus adds, are always there; `up` is Prometheus' own series).
// Prints one line per check and "metrics-check: N passed, N failed"; exit 1 on failure.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { parser } from "@prometheus-io/lezer-promql";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
export const DEFAULTS = {
  rules: path.join(ROOT, "deploy/prometheus/redlockd-alerts.yaml"),
  dashboard: path.join(ROOT, "deploy/grafana/redlockd-dashboard.json"),
  pending: path.join(ROOT, "deploy/prometheus/pending-metrics.txt"),
};
const TARGET_LABELS = ["job", "instance"];
/** Series Prometheus makes itself for every target. */
const SYNTHETIC = new Map([["up", new Set(TARGET_LABELS)]]);

/** Series of a metric family: [name, extra labels] for each sample name it brings. */
function familySeries(name, type) {
  if (type === "histogram") return [[`${name}_bucket`, ["le"]], [`${name}_sum`, []], [`${name}_count`, []]];
  if (type === "summary") return [[name, ["quantile"]], [`${name}_sum`, []], [`${name}_count`, []]];
  return [[name, []]];
}

/** Prometheus text exposition -> Map(series name -> Set(label names)). */
export function parseExposition(text) {
  const series = new Map();
  const add = (name, labels) => {
    if (!series.has(name)) series.set(name, new Set(TARGET_LABELS));
    for (const l of labels) series.get(name).add(l);
  };
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      for (const [n, extra] of familySeries(type[1], type[2])) if (type[2] !== "histogram" && type[2] !== "summary") add(n, extra);
      continue;
    }
    if (!line.trim() || line.startsWith("#")) continue;
    // Label values may hold braces and escaped quotes: route="/locks/{name}".
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s/.exec(line);
    if (!m) continue;
    const labels = [...(m[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)].map((x) => x[1]);
    add(m[1], labels);
  }
  return series;
}

/** pending-metrics.txt -> {series: Map(series name -> Set(labels)), families: [{name, type, series: [names]}]}. */
export function parsePending(text) {
  const series = new Map();
  const families = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (!line) continue;
    const [name, type, ...labels] = line.split(/\s+/);
    const fam = { name, type, series: [] };
    for (const [n, extra] of familySeries(name, type)) {
      series.set(n, new Set([...TARGET_LABELS, ...labels, ...extra]));
      fam.series.push(n);
    }
    families.push(fam);
  }
  return { series, families };
}

/** Grafana's own variables as PromQL durations; $var and ${var} inside strings stay. */
export function grafanaSubst(expr) {
  return expr.replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, "5m");
}

function childText(node, src, name) {
  const c = node.getChild(name);
  return c ? src.slice(c.from, c.to) : null;
}

/** Parse one PromQL expression: {errors: [text], selectors: [{metric, labels: [..]}], grouping: [..]}. */
export function analyse(src) {
  const tree = parser.parse(src);
  const out = { errors: [], selectors: [], grouping: [] };
  tree.iterate({
    enter: (n) => {
      if (n.type.isError) {
        out.errors.push(`syntax error at ${n.from}: ${JSON.stringify(src.slice(Math.max(0, n.from - 15), n.to + 15))}`);
        return;
      }
      if (n.name === "VectorSelector") {
        const node = n.node;
        const metric = childText(node, src, "Identifier");
        const labels = [];
        const lm = node.getChild("LabelMatchers");
        if (lm) {
          for (let c = lm.firstChild; c; c = c.nextSibling) {
            const ln = c.getChild("LabelName");
            if (ln) labels.push(src.slice(ln.from, ln.to));
            else if (c.name === "QuotedLabelName" || c.name === "QuotedLabelMatcher") labels.push(src.slice(c.from, c.to));
          }
        }
        out.selectors.push({ metric, labels });
      }
      if (n.name === "GroupingLabels") {
        for (let c = n.node.firstChild; c; c = c.nextSibling) if (c.name === "LabelName") out.grouping.push(src.slice(c.from, c.to));
      }
    },
  });
  return out;
}

/** Problems of one query against the known series (Map name -> Set(labels)). */
export function checkQuery(expr, known) {
  const src = grafanaSubst(expr);
  const a = analyse(src);
  const problems = [...a.errors];
  const seen = new Set(TARGET_LABELS);
  for (const s of a.selectors) {
    if (!s.metric) {
      if (s.labels.includes("__name__")) continue; // {__name__=~...}: nothing to check
      problems.push("a selector without a metric name");
      continue;
    }
    const labels = known.get(s.metric);
    if (!labels) { problems.push(`metric ${s.metric} is not in /metrics`); continue; }
    for (const l of labels) seen.add(l);
    for (const l of s.labels) if (l !== "__name__" && !labels.has(l)) problems.push(`${s.metric} has no label ${l} (it has ${[...labels].sort().join(", ")})`);
  }
  for (const g of a.grouping) if (!seen.has(g)) problems.push(`by/on label ${g} is on none of the series queried`);
  return problems;
}

/** The queries of a rule file: [{where, expr}]. */
export function ruleQueries(text) {
  const doc = YAML.parse(text);
  const out = [];
  for (const g of doc?.groups ?? []) {
    for (const r of g.rules ?? []) out.push({ where: `rule ${r.alert ?? r.record}`, expr: String(r.expr) });
  }
  return out;
}

/** Panels of a dashboard, rows' nested panels included. */
function allPanels(d) {
  const out = [];
  for (const p of d.panels ?? []) { out.push(p); for (const q of p.panels ?? []) out.push(q); }
  return out;
}

/** The queries of a dashboard: targets, and the metric selectors of query variables. */
export function dashboardQueries(d) {
  const out = [];
  for (const p of allPanels(d)) {
    for (const t of p.targets ?? []) if (t.expr !== undefined) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: String(t.expr) });
  }
  for (const v of d.templating?.list ?? []) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : v.query?.query ?? "";
    const lv = /^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$/.exec(q);
    const m = /^\s*(?:query_result|metrics)\((.*)\)\s*$/.exec(q);
    out.push({ where: `variable $${v.name}`, expr: lv ? lv[1] : m ? m[1] : q, label: lv?.[2] });
  }
  return out;
}

/** The dashboard's own shape: problems. */
export function checkDashboardShape(d) {
  const p = [];
  if (typeof d.title !== "string" || !d.title) p.push("no title");
  if (typeof d.uid !== "string" || !d.uid) p.push("no uid");
  if (!Number.isInteger(d.schemaVersion)) p.push("no schemaVersion");
  const vars = new Map((d.templating?.list ?? []).map((v) => [v.name, v]));
  if (vars.get("datasource")?.type !== "datasource" || vars.get("datasource")?.query !== "prometheus") p.push("no datasource variable of type prometheus");
  const ids = new Set();
  for (const panel of allPanels(d)) {
    const at = `panel ${panel.id} "${panel.title}"`;
    if (!Number.isInteger(panel.id)) p.push(`${at}: no integer id`);
    else if (ids.has(panel.id)) p.push(`${at}: id ${panel.id} used twice`);
    ids.add(panel.id);
    if (!panel.title) p.push(`${at}: no title`);
    const g = panel.gridPos;
    if (!g || ![g.x, g.y, g.w, g.h].every(Number.isInteger) || g.x < 0 || g.x + g.w > 24) p.push(`${at}: gridPos ${JSON.stringify(g)} is not within the 24 columns`);
    if (panel.type === "row") continue;
    if (!panel.targets?.length) p.push(`${at}: no targets`);
    const refs = new Set();
    for (const t of panel.targets ?? []) {
      if (!t.expr) p.push(`${at}: a target without expr`);
      if (!t.refId || refs.has(t.refId)) p.push(`${at}: refId ${t.refId} missing or repeated`);
      refs.add(t.refId);
    }
    const uid = panel.datasource?.uid;
    if (uid !== "${datasource}" && uid !== "$datasource") p.push(`${at}: datasource ${JSON.stringify(panel.datasource)} is not the $datasource variable`);
    for (const m of JSON.stringify(panel.targets ?? []).matchAll(/\$\{?([a-zA-Z_][a-zA-Z0-9_]*)/g)) {
      if (!m[1].startsWith("__") && !vars.has(m[1])) p.push(`${at}: variable $${m[1]} is not defined`);
    }
  }
  return p;
}

/** All checks: [{name, problems}]. */
export function runChecks({ metricsText, rulesText, dashboard, pendingText }) {
  const scraped = parseExposition(metricsText);
  const pending = parsePending(pendingText ?? "");
  const known = new Map([...SYNTHETIC, ...scraped]);
  for (const [n, labels] of pending.series) if (!known.has(n)) known.set(n, labels);
  const results = [];
  const check = (name, fn) => {
    const problems = [];
    try { fn(problems); } catch (e) { problems.push(`check crashed: ${e.message}`); }
    results.push({ name, problems });
  };
  const used = new Set();
  const queries = (list, p) => {
    for (const q of list) {
      for (const s of analyse(grafanaSubst(q.expr)).selectors) if (s.metric) used.add(s.metric);
      for (const x of checkQuery(q.expr, known)) p.push(`${q.where}: ${x}`);
      if (q.label && q.label !== "job" && q.label !== "instance") {
        const m = analyse(grafanaSubst(q.expr)).selectors[0]?.metric;
        if (m && known.get(m) && !known.get(m).has(q.label)) p.push(`${q.where}: ${m} has no label ${q.label}`);
      }
    }
  };
  check("the scrape is a real redlockd's /metrics", (p) => {
    if (!scraped.has("redlockd_build_info")) p.push("no redlockd_build_info in it");
    if (scraped.size < 10) p.push(`only ${scraped.size} series`);
  });
  let rules = [];
  check("alert rules: every expression parses, every metric and label is in /metrics", (p) => {
    rules = ruleQueries(rulesText);
    if (!rules.length) p.push("no rules");
    queries(rules, p);
  });
  check("dashboard: panels, ids, grid, targets, the $datasource variable", (p) => {
    for (const x of checkDashboardShape(dashboard)) p.push(x);
  });
  check("dashboard: every query parses, every metric and label is in /metrics", (p) => {
    const qs = dashboardQueries(dashboard);
    if (!qs.length) p.push("no queries");
    queries(qs, p);
  });
  check("pending list: only names that /metrics still lacks, each used", (p) => {
    for (const f of pending.families) {
      if (f.series.every((n) => scraped.has(n))) p.push(`${f.name} is in /metrics now: remove it from pending-metrics.txt (pending the histograms)`);
      if (!f.series.some((n) => used.has(n))) p.push(`${f.name} is pending but no query uses it`);
    }
  });
  return results;
}

function main(argv) {
  const o = { ...DEFAULTS, metrics: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, "");
    if (!(k in o) || i + 1 >= argv.length) { console.error("usage: metricscheck.mjs --metrics FILE [--rules F] [--dashboard F] [--pending F|-]"); return 2; }
    o[k] = argv[++i];
  }
  if (!o.metrics) { console.error("metricscheck: --metrics FILE is required (tests/compose/scrape-metrics.sh writes one)"); return 2; }
  const pendingText = o.pending !== "-" && fs.existsSync(o.pending) ? fs.readFileSync(o.pending, "utf8") : "";
  const results = runChecks({
    metricsText: fs.readFileSync(o.metrics, "utf8"),
    rulesText: fs.readFileSync(o.rules, "utf8"),
    dashboard: JSON.parse(fs.readFileSync(o.dashboard, "utf8")),
    pendingText,
  });
  let passed = 0, failed = 0;
  for (const r of results) {
    if (r.problems.length) {
      failed++;
      console.log(`FAIL ${r.name}`);
      for (const p of r.problems) console.log(`     ${p}`);
    } else {
      passed++;
      console.log(`ok   ${r.name}`);
    }
  }
  console.log(`metrics-check: ${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
