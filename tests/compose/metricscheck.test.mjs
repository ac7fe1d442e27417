// metricscheck.test.mjs -- node --test: metricscheck.mjs passes the shipped alert rules and
// dashboard against a recorded scrape of a real redlockd (fixtures/metrics.txt, written by
// scrape-metrics.sh; make metrics-check checks a fresh one), and catches each deliberate
// breakage: an unknown metric or label, bad PromQL, a grouping label nothing has, a broken
// dashboard, a pending name that is no longer pending.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { runChecks, DEFAULTS, parseExposition, parsePending } from "./metricscheck.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const base = () => ({
  metricsText: fs.readFileSync(path.join(HERE, "fixtures/metrics.txt"), "utf8"),
  rulesText: fs.readFileSync(DEFAULTS.rules, "utf8"),
  dashboard: JSON.parse(fs.readFileSync(DEFAULTS.dashboard, "utf8")),
  pendingText: fs.existsSync(DEFAULTS.pending) ? fs.readFileSync(DEFAULTS.pending, "utf8") : "",
});
const failures = (input) => runChecks(input).filter((r) => r.problems.length)
  .map((r) => `${r.name} :: ${r.problems.join(" | ")}`);

/** A copy of the rules with rule `alert` given expression expr. */
function withRule(input, alert, expr) {
  const doc = YAML.parse(input.rulesText);
  doc.groups[0].rules.find((r) => r.alert === alert).expr = expr;
  return { ...input, rulesText: YAML.stringify(doc) };
}
const panel = (d, title) => d.panels.find((p) => p.title === title);

test("the shipped rules and dashboard pass against a real scrape", () => {
  assert.deepEqual(failures(base()), []);
});

test("the exposition parser sees names, labels and histogram series", () => {
  const s = parseExposition("# TYPE a_seconds histogram\na_seconds_bucket{x=\"1\",le=\"0.1\"} 1\na_seconds_sum 1\n# TYPE b_total counter\nb_total{code=\"2xx\"} 3\n"
    + 'c_total{route="/locks/{name}",q="a\\"}b",method="POST"} 1\n');
  assert.deepEqual([...s.get("a_seconds_bucket")].sort(), ["instance", "job", "le", "x"]);
  assert.ok(s.has("a_seconds_sum") && s.has("b_total"));
  assert.ok(s.get("b_total").has("code"));
  assert.deepEqual([...s.get("c_total")].sort(), ["instance", "job", "method", "q", "route"], "braces and quotes in values");
  const p = parsePending("# c\nh_seconds histogram route\ng gauge\n");
  assert.ok(p.series.get("h_seconds_bucket").has("le") && p.series.get("h_seconds_bucket").has("route"));
  assert.ok(p.series.has("h_seconds_count") && p.series.has("g"));
});

const cases = [
  ["a rule on a metric that does not exist", /RedlockdQuorumLost: metric redlockd_master_ready is not in \/metrics/,
    (i) => withRule(i, "RedlockdQuorumLost", "sum by (job, instance) (redlockd_master_ready) < 3")],
  ["a misspelt label in a rule", /redlockd_master_state has no label sate/,
    (i) => withRule(i, "RedlockdMasterQuarantined", 'max by (job, instance, address) (redlockd_master_state{sate="quarantined"}) == 1')],
  ["a rule grouping by a label nothing has", /by\/on label adress is on none of the series queried/,
    (i) => withRule(i, "RedlockdMasterQuarantined", 'max by (job, instance, adress) (redlockd_master_state{state="quarantined"}) == 1')],
  ["a rule that is not PromQL", /Redlockd503Rate: syntax error/,
    (i) => withRule(i, "Redlockd503Rate", "sum(rate(redlockd_http_requests_total[5m]) > ")],
  ["the counter without _total", /metric redlockd_http_requests is not in \/metrics/,
    (i) => withRule(i, "Redlockd503Rate", 'sum(rate(redlockd_http_requests{code="503"}[5m]))')],
  ["a dashboard query on an unknown metric", /panel "Parked waiters" A: metric redlockd_waiters is not in \/metrics/,
    (i) => { panel(i.dashboard, "Parked waiters").targets[0].expr = "sum(redlockd_waiters)"; return i; }],
  ["a dashboard query that does not parse", /panel "Acquire outcomes \/ s" A: syntax error/,
    (i) => { panel(i.dashboard, "Acquire outcomes / s").targets[0].expr = "sum by (outcome) (rate(redlockd_acquire_total[$__rate_interval])"; return i; }],
  ["a dashboard label typo", /redlockd_acquire_total has no label outcom/,
    (i) => { panel(i.dashboard, "Acquire outcomes / s").targets[0].expr = 'sum(rate(redlockd_acquire_total{outcom="granted"}[$__rate_interval]))'; return i; }],
  ["a variable query on an unknown metric", /variable \$job: metric redlockd_info is not in \/metrics/,
    (i) => { i.dashboard.templating.list[1].query.query = "label_values(redlockd_info, job)"; return i; }],
  ["a variable over a label the metric lacks", /variable \$job: redlockd_build_info has no label service/,
    (i) => { i.dashboard.templating.list[1].query.query = "label_values(redlockd_build_info, service)"; return i; }],
  ["two panels with one id", /id 3 used twice/,
    (i) => { i.dashboard.panels[3].id = 3; i.dashboard.panels[2].id = 3; return i; }],
  ["a panel off the grid", /gridPos .* is not within the 24 columns/,
    (i) => { i.dashboard.panels[1].gridPos.x = 20; return i; }],
  ["a panel on a fixed data source", /is not the \$datasource variable/,
    (i) => { i.dashboard.panels[1].datasource = { type: "prometheus", uid: "P1809F7CD0C75ACF3" }; return i; }],
  ["a query using an undefined variable", /variable \$cluster is not defined/,
    (i) => { panel(i.dashboard, "Parked waiters").targets[0].expr = 'sum(redlockd_parked_waiters{cluster="$cluster"})'; return i; }],
  ["a scrape without the histograms", /metric redlockd_request_duration_seconds_bucket is not in \/metrics/,
    (i) => ({ ...i, metricsText: i.metricsText.split("\n").filter((l) => !l.includes("redlockd_request_duration_seconds")).join("\n") })],
  ["a pending name that /metrics has now", /redlockd_uptime_seconds is in \/metrics now: remove it/,
    (i) => ({ ...i, pendingText: i.pendingText + "redlockd_uptime_seconds gauge\n" })],
  ["a pending histogram that /metrics has now", /redlockd_request_duration_seconds is in \/metrics now/,
    (i) => ({ ...i, pendingText: i.pendingText + "redlockd_request_duration_seconds histogram route method\n" })],
  ["a pending name nothing uses", /redlockd_never_used is pending but no query uses it/,
    (i) => ({ ...i, pendingText: i.pendingText + "redlockd_never_used gauge\n" })],
  ["a scrape that is not redlockd's", /no redlockd_build_info/,
    (i) => ({ ...i, metricsText: "# TYPE x gauge\nx 1\n" })],
];
for (const [name, expect, mutate] of cases) {
  test(`catches: ${name}`, () => {
    const f = failures(mutate(base()));
    assert.ok(f.some((x) => expect.test(x)), `expected ${expect}, got:\n${f.join("\n") || "(no failure)"}`);
  });
}
