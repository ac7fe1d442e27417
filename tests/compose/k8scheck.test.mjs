// k8scheck.test.mjs -- node --test: k8scheck.mjs passes the shipped manifests and catches each
// deliberate breakage of them (schema, unknown field, and every policy rule).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { loadManifests, runChecks, checkTlsOverlay, overlayUnbuildable, DEFAULT_CONF, DEFAULT_TLS_DIR } from "./k8scheck.mjs";

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
  // Not open to strangers.
  ["a master without requirepass", /requirepass from a Secret.*redis-2: no --requirepass/, (m) => {
    master(m, 2).spec.template.spec.containers[0].args = ["--maxmemory", "256mb"]; }],
  ["a literal requirepass", /redis-4: --requirepass is given literally/, (m) => {
    const a = master(m, 4).spec.template.spec.containers[0].args; a[a.indexOf("--requirepass") + 1] = "hunter2"; }],
  ["requirepass from a plain env value", /redis-1: REDIS_PASSWORD does not come from a secretKeyRef/, (m) => {
    const e = master(m, 1).spec.template.spec.containers[0].env.find((x) => x.name === "REDIS_PASSWORD"); delete e.valueFrom; e.value = "hunter2"; }],
  ["requirepass from a Secret that nothing makes", /redis-3: Secret redis-pw is neither here nor generated/, (m) => {
    master(m, 3).spec.template.spec.containers[0].env.find((x) => x.name === "REDIS_PASSWORD").valueFrom.secretKeyRef.name = "redis-pw"; }],
  ["no secretGenerator", /Secret redis-auth is neither here nor generated/, (m) => { delete m.kustomization.obj.secretGenerator; }],
  ["a bare redis-cli ping probe", /redis-5: the probe `redis-cli ping` does not look for PONG/, (m) => {
    master(m, 5).spec.template.spec.containers[0].readinessProbe.exec.command = ["redis-cli", "ping"]; }],
  ["a probe without REDISCLI_AUTH", /redis-1: the redis-cli probe has no REDISCLI_AUTH/, (m) => {
    const c = master(m, 1).spec.template.spec.containers[0]; c.env = c.env.filter((x) => x.name !== "REDISCLI_AUTH"); }],
  ["redlockd without the password file", /no REDLOCK_REDIS_PASSWORD_FILE/, (m) => {
    const c = redlockd(m); c.env = c.env.filter((x) => x.name !== "REDLOCK_REDIS_PASSWORD_FILE"); }],
  ["the password file not mounted", /\/etc\/redlockd\/redis\/password is not on a mounted volume/, (m) => { redlockd(m).volumeMounts = []; }],
  ["the password file from another key", /Secret volume redis-auth has no item at password/, (m) => {
    find(m, "Deployment", "redlockd").spec.template.spec.volumes[0].secret.items[0].path = "pw"; }],
  ["a password in REDLOCK_MASTERS", /REDLOCK_MASTERS carries a literal password/, (m) => {
    redlockd(m).env.find((e) => e.name === "REDLOCK_MASTERS").value = "redis://:hunter2@redis-1:6379,redis-2:6379,redis-3:6379,redis-4:6379,redis-5:6379"; }],
  ["an unreadable password file", /not readable by user 10001/, (m) => {
    delete find(m, "Deployment", "redlockd").spec.template.spec.securityContext.fsGroup; }],
  ["the password in the ConfigMap", /ConfigMap\/redis-master-conf redis.conf sets requirepass/, (m) => {
    const cm = find(m, "ConfigMap", "redis-master-conf"); cm.data["redis.conf"] += "requirepass hunter2\n"; }],
  ["a Secret source that is not git-ignored", /committed-password \(Secret redis-auth\) is not in kubernetes\/.gitignore/, (m) => {
    m.kustomization.obj.secretGenerator[0].files = ["password=committed-password"]; }],
  ["no NetworkPolicy", /redis-1: no Ingress NetworkPolicy selects its pods/, (m) => { m.docs = m.docs.filter((d) => d.obj.kind !== "NetworkPolicy"); }],
  ["a NetworkPolicy open to every source", /ingress\[0\]: no from: every source is allowed/, (m) => { delete find(m, "NetworkPolicy", "redis-master").spec.ingress[0].from; }],
  ["a NetworkPolicy open to every pod", /admits pods that are not redlockd's/, (m) => { find(m, "NetworkPolicy", "redis-master").spec.ingress[0].from[0].podSelector = {}; }],
  ["a NetworkPolicy open to other namespaces", /a namespaceSelector admits pods of other namespaces/, (m) => {
    find(m, "NetworkPolicy", "redis-master").spec.ingress[0].from[0].namespaceSelector = {}; }],
  ["a NetworkPolicy open to an address block", /an ipBlock admits addresses/, (m) => {
    find(m, "NetworkPolicy", "redis-master").spec.ingress[0].from.push({ ipBlock: { cidr: "0.0.0.0/0" } }); }],
  ["a NetworkPolicy open on every port", /no ports: every port is open/, (m) => { delete find(m, "NetworkPolicy", "redis-master").spec.ingress[0].ports; }],
  ["a NetworkPolicy that locks redlockd out", /redlockd would be locked out/, (m) => {
    find(m, "NetworkPolicy", "redis-master").spec.ingress[0].from[0].podSelector.matchLabels["app.kubernetes.io/name"] = "redlock"; }],
  ["a NetworkPolicy that misses a master", /redis-4: no Ingress NetworkPolicy selects its pods/, (m) => {
    find(m, "NetworkPolicy", "redis-master").spec.podSelector = { matchExpressions: [{ key: "app.kubernetes.io/instance", operator: "NotIn", values: ["redis-4"] }] }; }],
  ["no preStop sleep", /no preStop `sleep N`/, (m) => { delete redlockd(m).lifecycle; }],
  ["a preStop too short", /preStop sleeps 1 s, want >= 5/, (m) => { redlockd(m).lifecycle.preStop.exec.command = ["sleep", "1"]; }],
  ["a preStop eating the grace period", /preStop 25 s leaves 5 s of terminationGracePeriodSeconds 30/, (m) => { redlockd(m).lifecycle.preStop.exec.command = ["sleep", "25"]; }],
  ["maxUnavailable above 0", /maxUnavailable 1, want 0/, (m) => { find(m, "Deployment", "redlockd").spec.strategy.rollingUpdate.maxUnavailable = 1; }],
];
for (const [name, expect, mutate] of cases) {
  test(`catches: ${name}`, async () => {
    const m = fresh();
    mutate(m);
    const f = await failures(m);
    assert.ok(f.some((x) => expect.test(x)), `expected ${expect}, got:\n${f.join("\n") || "(no failure)"}`);
  });
}

test("catches: the password in redis-master.conf", async () => {
  const conf = CONF + "requirepass hunter2\n";
  const m = fresh();
  find(m, "ConfigMap", "redis-master-conf").data["redis.conf"] = conf;
  const f = await failures(m, conf);
  assert.ok(f.some((x) => /redis-master.conf sets requirepass/.test(x)), f.join("\n"));
});

test("catches: AOF off in redis-master.conf", async () => {
  const conf = CONF.replace("appendonly yes", "appendonly no");
  const m = fresh();
  find(m, "ConfigMap", "redis-master-conf").data["redis.conf"] = conf;
  const f = await failures(m, conf);
  assert.ok(f.some((x) => /appendonly is not yes/.test(x)), f.join("\n"));
});

// The TLS overlay, when kubectl is there to build it: passes as shipped; a patch without
// client certificates, and redlockd pointed at plain masters, are caught.
const cannotBuild = overlayUnbuildable();
test("the TLS overlay passes, and its breakages are caught", { skip: cannotBuild || false }, async () => {
  const ok = await checkTlsOverlay();
  assert.deepEqual(ok.flatMap((r) => r.problems), []);
  const broken = (file, from, to) => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), "k8stls-")), o = path.join(d, "kubernetes-tls");
    fs.mkdirSync(o);
    for (const f of fs.readdirSync(DEFAULT_TLS_DIR)) fs.copyFileSync(path.join(DEFAULT_TLS_DIR, f), path.join(o, f));
    const t = fs.readFileSync(path.join(o, file), "utf8");
    assert.ok(t.includes(from), `${file} lacks ${from}`);
    fs.writeFileSync(path.join(o, file), t.replace(from, to));
    return { d, o };
  };
  for (const [file, from, to, want] of [
    ["masters-tls.yaml", '"--tls-auth-clients", "yes"', '"--tls-auth-clients", "no"', /--tls-auth-clients is no/],
    ["redlockd-tls.yaml", "value: rediss://redis-1:6379,", "value: redis://redis-1:6379,", /REDLOCK_MASTERS is redis:\/\/redis-1/],
    [".gitignore", "*.key", "", /redis.key \(a certificate or key\) is not in the overlay's .gitignore/],
  ]) {
    const { d, o } = broken(file, from, to);
    try {
      const got = (await checkTlsOverlay(o)).flatMap((r) => r.problems).join(" | ");
      assert.match(got, want, `${file}: ${from} -> ${to}`);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  }
});
