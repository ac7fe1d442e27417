// k8scheck.test.mjs -- node --test: k8scheck.mjs passes the shipped manifests and catches each
// deliberate breakage of them (schema, unknown field, and every policy rule).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { loadManifests, runChecks, DEFAULT_CONF } from "./k8scheck.mjs";

const CONF = fs.readFileSync(DEFAULT_CONF, "utf8");
const fresh = () => structuredClone(loadManifests());
const find = (m, kind, name) => m.docs.find((d) => d.obj.kind === kind && d.obj.metadata.name === name).obj;
const redlockd = (m) => find(m, "Deployment", "redlockd").spec.template.spec.containers[0];
const master = (m, i) => find(m, "StatefulSet", `redis-${i}`);

async function failures(m, conf = CONF) {
  return (await runChecks(m, conf)).filter((r) => r.problems.length)
    .map((r) => `${r.name} :: ${r.problems.join(" | ")}`);
}

test("the shipped manifests pass every check", async () => {
  assert.deepEqual(await failures(fresh()), []);
});

const cases = [
  ["replicas as a string (schema)", /schema:.*replicas must be integer/, (m) => { find(m, "Deployment", "redlockd").spec.replicas = "3"; }],
  ["missing container image name (schema)", /schema:.*must have required property name/, (m) => { delete redlockd(m).name; }],
  ["misspelt readinessProbe (strict fields)", /strict fields:.*readinessprobe/, (m) => { const c = redlockd(m); c.readinessprobe = c.readinessProbe; delete c.readinessProbe; }],
  ["unknown spec field replica (strict fields)", /strict fields:.*"replica": 3: Object literal may only specify known properties/, (m) => { find(m, "Deployment", "redlockd").spec.replica = 3; }],
  ["port as an object (strict fields)", /strict fields:/, (m) => { redlockd(m).ports[0].containerPort = { port: 8080 }; }],
  ["selector not matching the template", /selectors match/, (m) => { find(m, "Deployment", "redlockd").spec.selector.matchLabels["app.kubernetes.io/name"] = "other"; }],
  ["Service selecting nothing", /select pods that exist/, (m) => { find(m, "Service", "redlockd").spec.selector = { app: "nothing" }; }],
  ["readiness on /healthz", /redlockd Deployment.*readinessProbe path \/healthz/, (m) => { redlockd(m).readinessProbe.httpGet.path = "/healthz"; }],
  ["liveness on /readyz", /redlockd Deployment.*livenessProbe path \/readyz/, (m) => { redlockd(m).livenessProbe.httpGet.path = "/readyz"; }],
  ["probe on the wrong port", /readinessProbe port 9090/, (m) => { redlockd(m).readinessProbe.httpGet.port = 9090; }],
  ["one replica", /replicas 1, want >= 3/, (m) => { find(m, "Deployment", "redlockd").spec.replicas = 1; }],
  ["runs as root", /runAsNonRoot/, (m) => { delete find(m, "Deployment", "redlockd").spec.template.spec.securityContext.runAsNonRoot; }],
  ["a master with two replicas", /redis-3: replicas 2/, (m) => { master(m, 3).spec.replicas = 2; }],
  ["only four masters", /StatefulSets are \[redis-1,redis-2,redis-3,redis-4\]/, (m) => { m.docs = m.docs.filter((d) => d.obj.metadata.name !== "redis-5"); }],
  ["preferred instead of required anti-affinity", /redis-2: no required pod anti-affinity/, (m) => {
    const a = master(m, 2).spec.template.spec.affinity.podAntiAffinity;
    a.preferredDuringSchedulingIgnoredDuringExecution = [{ weight: 100, podAffinityTerm: a.requiredDuringSchedulingIgnoredDuringExecution[0] }];
    delete a.requiredDuringSchedulingIgnoredDuringExecution; }],
  ["anti-affinity on the zone only", /redis-1: no required pod anti-affinity on kubernetes.io\/hostname/, (m) => {
    master(m, 1).spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey = "topology.kubernetes.io/zone"; }],
  ["anti-affinity against itself only", /redis-4: anti-affinity does not cover/, (m) => {
    master(m, 4).spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels["app.kubernetes.io/instance"] = "redis-4"; }],
  ["data on an emptyDir", /redis-5: \/data is not a volumeClaimTemplate/, (m) => {
    const s = master(m, 5); s.spec.volumeClaimTemplates = []; s.spec.template.spec.volumes.push({ name: "data", emptyDir: {} }); }],
  ["a Service that is not headless", /Service\/redis-2 is not headless/, (m) => { delete find(m, "Service", "redis-2").spec.clusterIP; }],
  ["a Service selecting every master", /Service\/redis-1 selects \[redis-1,redis-2,redis-3,redis-4,redis-5\]/, (m) => {
    delete find(m, "Service", "redis-1").spec.selector["app.kubernetes.io/instance"]; }],
  ["REDLOCK_MASTERS missing a master", /REDLOCK_MASTERS is/, (m) => {
    redlockd(m).env.find((e) => e.name === "REDLOCK_MASTERS").value = "redis-1:6379,redis-2:6379,redis-3:6379"; }],
  ["ConfigMap drifted from redis-master.conf", /differs from deploy\/redis-master.conf/, (m) => {
    const cm = find(m, "ConfigMap", "redis-master-conf"); cm.data["redis.conf"] = cm.data["redis.conf"].replace("appendfsync everysec", "appendfsync always"); }],
  ["replicaof on the command line", /redis-2: command line overrides the config with --replicaof/, (m) => { master(m, 2).spec.template.spec.containers[0].args.push("--replicaof", "redis-1", "6379"); }],
  ["maxmemory above the limit", /--maxmemory 1gb is not below the limit 512Mi/, (m) => { master(m, 1).spec.template.spec.containers[0].args = ["--maxmemory", "1gb"]; }],
  ["config mounted writable", /redis-3: the config is not mounted readOnly/, (m) => {
    master(m, 3).spec.template.spec.containers[0].volumeMounts.find((v) => v.name === "config").readOnly = false; }],
  ["kustomization missing a file", /kustomization.yaml lists every manifest/, (m) => { m.kustomization.obj.resources.pop(); }],
];
for (const [name, expect, mutate] of cases) {
  test(`catches: ${name}`, async () => {
    const m = fresh();
    mutate(m);
    const f = await failures(m);
    assert.ok(f.some((x) => expect.test(x)), `expected ${expect}, got:\n${f.join("\n") || "(no failure)"}`);
  });
}

test("catches: AOF off in redis-master.conf", async () => {
  const conf = CONF.replace("appendonly yes", "appendonly no");
  const m = fresh();
  find(m, "ConfigMap", "redis-master-conf").data["redis.conf"] = conf;
  const f = await failures(m, conf);
  assert.ok(f.some((x) => /appendonly is not yes/.test(x)), f.join("\n"));
});
