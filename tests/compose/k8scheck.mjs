#!/usr/bin/env node
// k8scheck.mjs -- offline checks of deploy/kubernetes/*.yaml (make k8s-check).
//
// Usage: node k8scheck.mjs [--dir deploy/kubernetes] [--conf deploy/redis-master.conf]
// Three layers, none of which needs a cluster (and a fourth when kubectl is installed:
// `kubectl kustomize` builds the directory, the generated Secret included):
//   1. schema: every object validates against the Kubernetes 1.27 OpenAPI schemas
//      (kubernetes-models' validate(): required fields, types, enums, formats);
//   2. strict fields: every object type-checks, with TypeScript, as an object literal of the
//      kind's interface, so an unknown or misspelt field (`readinessprobe`, `replica`) fails,
//      as `kubectl apply --validate=strict` would; the schemas alone allow unknown fields;
//   3. policy: what redlockd needs of the manifests (see checkPolicy).
// With kubectl, also deploy/kubernetes-tls (the TLS overlay): built, layers 1 and 2, and what
// TLS needs of it (checkTlsOverlay).
// Prints one line per check and a closing "k8s-check: N passed, N failed"; exit 1 on failure.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import ts from "typescript";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
export const DEFAULT_DIR = path.join(ROOT, "deploy/kubernetes");
export const DEFAULT_CONF = path.join(ROOT, "deploy/redis-master.conf");
const require = createRequire(import.meta.url);
const MASTERS = [1, 2, 3, 4, 5].map((i) => `redis-${i}`);

/** apiVersion + kind -> the kubernetes-models module path ("kubernetes-models/apps/v1/Deployment"). */
function modelPath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/** Read every manifest in dir: [{file, index, obj}] (kustomization.yaml is returned apart). */
export function loadManifests(dir = DEFAULT_DIR) {
  const docs = [];
  let kustomization = null;
  for (const f of fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    const text = fs.readFileSync(path.join(dir, f), "utf8");
    const parsed = YAML.parseAllDocuments(text);
    parsed.forEach((d, index) => {
      if (d.errors.length) throw new Error(`${f}: YAML: ${d.errors[0].message}`);
      const obj = d.toJS();
      if (obj == null) return;
      if (obj.kind === "Kustomization") kustomization = { file: f, obj };
      else docs.push({ file: f, index, obj });
    });
  }
  return { docs, kustomization };
}

const label = (d) => `${d.file}: ${d.obj?.kind ?? "?"}/${d.obj?.metadata?.name ?? "?"}`;

/** Layer 1: the Kubernetes schemas. */
export async function checkSchemas(docs) {
  const problems = [];
  for (const d of docs) {
    const { apiVersion, kind } = d.obj;
    let mod;
    try {
      mod = await import(modelPath(apiVersion, kind));
    } catch {
      problems.push(`${label(d)}: unknown apiVersion/kind ${apiVersion}/${kind}`);
      continue;
    }
    try {
      new mod[kind](d.obj).validate();
    } catch (e) {
      problems.push(`${label(d)}: ${e.message}`);
    }
  }
  return problems;
}

const libCache = new Map();

/** Layer 2: unknown fields and wrong types, by type-checking the objects with TypeScript. */
export function checkStrictFields(docs) {
  const virtual = path.join(HERE, "__k8s_manifests__.ts");
  const lines = [];
  const owners = [];  // line index -> doc
  docs.forEach((d, i) => {
    const { apiVersion, kind } = d.obj;
    const start = lines.length;
    lines.push(`const m${i}: import("${modelPath(apiVersion, kind)}").I${kind} =`);
    for (const l of JSON.stringify(d.obj, null, 2).split("\n")) lines.push(l);
    lines.push(";");
    for (let k = start; k < lines.length; k++) owners[k] = d;
  });
  lines.push("export {};");
  const source = lines.join("\n");
  const options = {
    noEmit: true, strict: true, target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16, skipLibCheck: true, types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  // The library's .d.ts files are parsed once per process (the self-tests check many variants).
  host.getSourceFile = (f, lang, ...rest) => {
    if (path.resolve(f) === virtual) return ts.createSourceFile(f, source, lang);
    if (!libCache.has(f)) libCache.set(f, getSourceFile.call(host, f, lang, ...rest));
    return libCache.get(f);
  };
  host.fileExists = (f) => path.resolve(f) === virtual || fileExists.call(host, f);
  host.readFile = (f) => (path.resolve(f) === virtual ? source : readFile.call(host, f));
  const program = ts.createProgram([virtual], options, host);
  const problems = [];
  for (const diag of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, " ");
    if (diag.file && path.resolve(diag.file.fileName) === virtual && diag.start !== undefined) {
      const { line } = diag.file.getLineAndCharacterOfPosition(diag.start);
      const d = owners[line];
      // Point at the field: the JSON path of the offending line is lost, but its text is not.
      const at = lines[line].trim().replace(/[,{[]$/, "").trim().replace(/:$/, "");
      problems.push(`${d ? label(d) : "?"}: ${at ? at + ": " : ""}${msg}`);
    } else {
      problems.push(`typescript: ${msg}`);
    }
  }
  return problems;
}

// ---- Layer 3: redlockd's own rules -------------------------------------------------------

function matches(selector, labels) {
  const ml = selector?.matchLabels ?? {};
  if (!Object.keys(ml).length && !(selector?.matchExpressions ?? []).length) return false;
  if (!Object.entries(ml).every(([k, v]) => labels?.[k] === v)) return false;
  return (selector?.matchExpressions ?? []).every((e) => {
    const v = labels?.[e.key];
    if (e.operator === "In") return e.values.includes(v);
    if (e.operator === "NotIn") return !e.values.includes(v);
    if (e.operator === "Exists") return v !== undefined;
    if (e.operator === "DoesNotExist") return v === undefined;
    return false;
  });
}

/** Resolve a probe/Service port (number or container port name) to a number. */
function portNumber(port, container) {
  if (typeof port === "number") return port;
  if (/^\d+$/.test(String(port))) return Number(port);
  return container?.ports?.find((p) => p.name === port)?.containerPort;
}

/** Redis memory string ("256mb", "1gb", "1048576") in bytes; Kubernetes quantity likewise. */
function redisBytes(s) {
  const m = /^(\d+)(b|k|kb|m|mb|g|gb)?$/i.exec(String(s).trim());
  if (!m) return NaN;
  const unit = (m[2] ?? "b").toLowerCase();
  const mult = { b: 1, k: 1e3, kb: 1024, m: 1e6, mb: 1024 ** 2, g: 1e9, gb: 1024 ** 3 }[unit];
  return Number(m[1]) * mult;
}
function quantityBytes(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q).trim());
  if (!m) return NaN;
  const mult = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2]] ?? 1;
  return Number(m[1]) * mult;
}

/** Returns [{name, problems}] for the policy checks. */
export function checkPolicy(docs, kustomization, confText, dir = DEFAULT_DIR) {
  const results = [];
  const check = (name, fn) => {
    const problems = [];
    try { fn(problems); } catch (e) { problems.push(`check crashed: ${e.message}`); }
    results.push({ name, problems });
  };
  const objs = docs.map((d) => d.obj);
  const of = (kind) => objs.filter((o) => o.kind === kind);
  const workloads = objs.filter((o) => ["Deployment", "StatefulSet"].includes(o.kind));
  const podLabels = (w) => w.spec?.template?.metadata?.labels ?? {};

  check("workload selectors match their pod templates", (p) => {
    for (const w of workloads) {
      if (!matches(w.spec?.selector, podLabels(w))) p.push(`${w.kind}/${w.metadata?.name}: selector does not match its template labels`);
    }
  });

  check("Services and PodDisruptionBudgets select pods that exist", (p) => {
    for (const s of [...of("Service"), ...of("PodDisruptionBudget")]) {
      const sel = s.kind === "Service" ? { matchLabels: s.spec?.selector } : s.spec?.selector;
      if (!workloads.some((w) => matches(sel, podLabels(w)))) p.push(`${s.kind}/${s.metadata?.name} selects no workload's pods`);
    }
    for (const s of of("Service")) {
      const targets = workloads.filter((w) => matches({ matchLabels: s.spec?.selector }, podLabels(w)));
      for (const port of s.spec?.ports ?? []) {
        for (const w of targets) {
          const c = w.spec.template.spec.containers?.[0];
          if (portNumber(port.targetPort ?? port.port, c) === undefined) p.push(`Service/${s.metadata.name}: targetPort ${port.targetPort} is not a port of ${w.metadata.name}`);
        }
      }
    }
  });

  // The service.
  const deploy = of("Deployment").find((d) => d.metadata?.name === "redlockd");
  const c = deploy?.spec?.template?.spec?.containers?.find((x) => x.name === "redlockd");
  const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value]));
  check("redlockd Deployment: >= 3 replicas, /readyz readiness, /healthz liveness, non-root", (p) => {
    if (!deploy || !c) return p.push("no Deployment redlockd with a container redlockd");
    if (!(deploy.spec.replicas >= 3)) p.push(`replicas ${deploy.spec.replicas}, want >= 3`);
    const listenPort = Number(/:(\d+)$/.exec(env.REDLOCK_LISTEN ?? "")?.[1]);
    if (!listenPort) p.push(`REDLOCK_LISTEN ${env.REDLOCK_LISTEN} has no port`);
    for (const [probe, want] of [["readinessProbe", "/readyz"], ["livenessProbe", "/healthz"]]) {
      const g = c[probe]?.httpGet;
      if (!g) { p.push(`no httpGet ${probe}`); continue; }
      if (g.path !== want) p.push(`${probe} path ${g.path}, want ${want}`);
      if (portNumber(g.port, c) !== listenPort) p.push(`${probe} port ${g.port} is not the REDLOCK_LISTEN port ${listenPort}`);
    }
    if (c.readinessProbe?.httpGet?.path === "/healthz") p.push("readiness on /healthz would route to replicas without a quorum");
    const sc = { ...deploy.spec.template.spec.securityContext, ...c.securityContext };
    if (!sc.runAsNonRoot) p.push("runAsNonRoot is not set");
    if (sc.allowPrivilegeEscalation !== false) p.push("allowPrivilegeEscalation is not false");
    const svc = of("Service").find((s) => matches({ matchLabels: s.spec?.selector }, podLabels(deploy)));
    if (!svc) p.push("no Service in front of the Deployment");
    else if (!svc.spec.ports?.some((sp) => portNumber(sp.targetPort ?? sp.port, c) === listenPort)) {
      p.push(`Service/${svc.metadata.name} does not target port ${listenPort}`);
    }
  });

  // The masters.
  const sets = of("StatefulSet");
  const names = sets.map((s) => s.metadata?.name).sort();
  check("five single-replica master StatefulSets redis-1..redis-5", (p) => {
    if (names.join() !== MASTERS.join()) p.push(`StatefulSets are [${names}], want [${MASTERS}]`);
    for (const s of sets) if (s.spec?.replicas !== 1) p.push(`${s.metadata.name}: replicas ${s.spec?.replicas}, want 1`);
  });

  check("masters: required anti-affinity on kubernetes.io/hostname covering all five", (p) => {
    for (const s of sets) {
      const terms = s.spec?.template?.spec?.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
      const t = terms.find((t) => t.topologyKey === "kubernetes.io/hostname");
      if (!t) { p.push(`${s.metadata.name}: no required pod anti-affinity on kubernetes.io/hostname`); continue; }
      const missed = sets.filter((o) => !matches(t.labelSelector, podLabels(o))).map((o) => o.metadata.name);
      if (missed.length) p.push(`${s.metadata.name}: anti-affinity does not cover ${missed.join(", ")}`);
    }
  });

  check("masters: own PersistentVolumeClaim on the Redis data dir", (p) => {
    const dataDir = /^dir\s+(\S+)/m.exec(confText)?.[1] ?? "/data";
    for (const s of sets) {
      const vct = s.spec?.volumeClaimTemplates ?? [];
      const rc = s.spec?.template?.spec?.containers?.[0];
      const mount = rc?.volumeMounts?.find((m) => m.mountPath === dataDir);
      if (!mount) p.push(`${s.metadata.name}: nothing mounted on ${dataDir}`);
      else if (!vct.some((v) => v.metadata?.name === mount.name)) p.push(`${s.metadata.name}: ${dataDir} is not a volumeClaimTemplate (data would not survive a restart)`);
    }
  });

  check("masters: each behind its own headless Service, named in REDLOCK_MASTERS", (p) => {
    const listed = (env.REDLOCK_MASTERS ?? "").split(",").map((x) => x.trim()).filter(Boolean);
    const want = [];
    for (const s of sets) {
      const svc = of("Service").find((x) => x.metadata?.name === s.spec?.serviceName);
      if (!svc) { p.push(`${s.metadata.name}: serviceName ${s.spec?.serviceName} is not a Service here`); continue; }
      if (svc.spec?.clusterIP !== "None") p.push(`Service/${svc.metadata.name} is not headless (clusterIP: None)`);
      const selected = sets.filter((o) => matches({ matchLabels: svc.spec?.selector }, podLabels(o))).map((o) => o.metadata.name);
      if (selected.join() !== s.metadata.name) p.push(`Service/${svc.metadata.name} selects [${selected}], want only ${s.metadata.name}`);
      const port = svc.spec?.ports?.[0]?.port;
      want.push(`${svc.metadata.name}:${port}`);
    }
    if ([...listed].sort().join() !== [...want].sort().join()) p.push(`REDLOCK_MASTERS is [${listed}], want [${want}]`);
  });

  check("masters: config is deploy/redis-master.conf (ConfigMap identical), AOF, noeviction, no replication", (p) => {
    for (const s of sets) {
      const rc = s.spec?.template?.spec?.containers?.[0];
      const cmd = [...(rc?.command ?? []), ...(rc?.args ?? [])];
      const confPath = cmd[1];
      const vols = s.spec.template.spec.volumes ?? [];
      const mount = rc?.volumeMounts?.find((m) => confPath?.startsWith(m.mountPath.replace(/\/?$/, "/")));
      const vol = vols.find((v) => v.name === mount?.name);
      const cm = of("ConfigMap").find((x) => x.metadata?.name === vol?.configMap?.name);
      const key = confPath ? path.basename(confPath) : undefined;
      if (!cm || cm.data?.[key] === undefined) { p.push(`${s.metadata.name}: ${confPath} does not come from a ConfigMap here`); continue; }
      if (cm.data[key] !== confText) p.push(`ConfigMap/${cm.metadata.name} ${key} differs from deploy/redis-master.conf (copy it again)`);
      if (!mount.readOnly) p.push(`${s.metadata.name}: the config is not mounted readOnly`);
      const args = cmd.slice(2).join(" ").toLowerCase();
      for (const bad of ["--replicaof", "--slaveof", "--appendonly no", "--appendfsync no", "--maxmemory-policy"]) {
        if (args.includes(bad)) p.push(`${s.metadata.name}: command line overrides the config with ${bad}`);
      }
      const mm = /--maxmemory\s+(\S+)/.exec(args)?.[1];
      const limit = rc?.resources?.limits?.memory;
      if (limit && !mm) p.push(`${s.metadata.name}: memory limit ${limit} but no --maxmemory: it would be OOM-killed, not refuse writes`);
      if (limit && mm && !(redisBytes(mm) < quantityBytes(limit))) p.push(`${s.metadata.name}: --maxmemory ${mm} is not below the limit ${limit}`);
    }
    if (!/^appendonly\s+yes\s*$/m.test(confText)) p.push("redis-master.conf: appendonly is not yes");
    if (!/^maxmemory-policy\s+noeviction\s*$/m.test(confText)) p.push("redis-master.conf: maxmemory-policy is not noeviction");
    if (/^(replicaof|slaveof)\s/m.test(confText)) p.push("redis-master.conf: replicaof/slaveof set");
  });

  // Not open to strangers: the masters' password, who may reach them, and rolling updates.
  const gens = kustomization?.obj?.secretGenerator ?? [];
  /** The keys of Secret `name`: a Secret object here, or one kustomization.yaml generates. */
  const secretKeys = (name) => {
    const obj = of("Secret").find((x) => x.metadata?.name === name);
    if (obj) return new Set([...Object.keys(obj.data ?? {}), ...Object.keys(obj.stringData ?? {})]);
    const g = gens.find((x) => x.name === name);
    if (!g) return null;
    const keys = new Set();
    for (const f of g.files ?? []) keys.add(f.includes("=") ? f.split("=")[0] : path.basename(f));
    for (const l of g.literals ?? []) keys.add(l.split("=")[0]);
    return keys;
  };
  /** The Secret key an env var of container c comes from: {name, key} or null. */
  const envSecret = (c, name) => c?.env?.find((e) => e.name === name)?.valueFrom?.secretKeyRef ?? null;
  const secretRefOk = (ref, p, who) => {
    if (!ref) return false;
    const keys = secretKeys(ref.name);
    if (!keys) { p.push(`${who}: Secret ${ref.name} is neither here nor generated by kustomization.yaml`); return false; }
    if (!keys.has(ref.key)) { p.push(`${who}: Secret ${ref.name} has no key ${ref.key}`); return false; }
    return true;
  };
  let masterSecret = null; // {name, key} the masters' requirepass comes from

  check("masters: requirepass from a Secret (never in the ConfigMap); the readiness probe authenticates", (p) => {
    if (/^\s*requirepass\s/m.test(confText)) p.push("redis-master.conf sets requirepass: the password would sit in the ConfigMap");
    for (const cm of of("ConfigMap")) {
      for (const [k, v] of Object.entries(cm.data ?? {})) if (/^\s*requirepass\s/m.test(String(v))) p.push(`ConfigMap/${cm.metadata.name} ${k} sets requirepass: ConfigMaps are not secret`);
    }
    for (const s of sets) {
      const rc = s.spec?.template?.spec?.containers?.[0];
      const args = [...(rc?.command ?? []), ...(rc?.args ?? [])];
      const i = args.indexOf("--requirepass");
      const m = i >= 0 ? /^\$\((\w+)\)$/.exec(args[i + 1] ?? "") : null;
      if (i < 0) { p.push(`${s.metadata.name}: no --requirepass: any pod that reaches it may write`); continue; }
      if (!m) { p.push(`${s.metadata.name}: --requirepass ${args[i + 1] ? "is given literally" : "has no value"}; use $(VAR) with VAR from a Secret`); continue; }
      const ref = envSecret(rc, m[1]);
      if (!ref) { p.push(`${s.metadata.name}: ${m[1]} does not come from a secretKeyRef`); continue; }
      if (!secretRefOk(ref, p, s.metadata.name)) continue;
      if (masterSecret && (masterSecret.name !== ref.name || masterSecret.key !== ref.key)) p.push(`${s.metadata.name}: password from ${ref.name}/${ref.key}, another master's from ${masterSecret.name}/${masterSecret.key}`);
      masterSecret ??= ref;
      const probe = (rc.readinessProbe?.exec?.command ?? []).join(" ");
      if (probe.includes("redis-cli")) {
        const auth = envSecret(rc, "REDISCLI_AUTH");
        if (!auth || auth.name !== ref.name || auth.key !== ref.key) p.push(`${s.metadata.name}: the redis-cli probe has no REDISCLI_AUTH from ${ref.name}/${ref.key} (it would see NOAUTH)`);
        if (!probe.includes("PONG")) p.push(`${s.metadata.name}: the probe \`${probe}\` does not look for PONG (redis-cli exits 0 on NOAUTH)`);
      }
    }
  });

  check("redlockd: --redis-password-file from the masters' Secret, mounted read-only; no password in REDLOCK_MASTERS", (p) => {
    if (!c) return p.push("no redlockd container");
    const file = env.REDLOCK_REDIS_PASSWORD_FILE;
    if (/:[^:@/$]+@/.test(env.REDLOCK_MASTERS ?? "")) p.push("REDLOCK_MASTERS carries a literal password");
    if (!file) return p.push("no REDLOCK_REDIS_PASSWORD_FILE: redlockd cannot authenticate to the masters");
    const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(m.mountPath.replace(/\/?$/, "/")));
    if (!mount) return p.push(`${file} is not on a mounted volume`);
    if (!mount.readOnly) p.push(`${mount.mountPath} is not mounted readOnly`);
    const vol = (deploy.spec.template.spec.volumes ?? []).find((v) => v.name === mount.name);
    const sec = vol?.secret;
    if (!sec) return p.push(`volume ${mount.name} is not a Secret`);
    const rel = file.slice(mount.mountPath.replace(/\/?$/, "/").length);
    const item = sec.items ? sec.items.find((it) => it.path === rel) : { key: rel };
    if (!item) return p.push(`Secret volume ${mount.name} has no item at ${rel}`);
    if (!secretRefOk({ name: sec.secretName, key: item.key }, p, "redlockd")) return;
    if (masterSecret && (sec.secretName !== masterSecret.name || item.key !== masterSecret.key)) p.push(`redlockd reads ${sec.secretName}/${item.key}, the masters require ${masterSecret.name}/${masterSecret.key}`);
    const uid = deploy.spec.template.spec.securityContext?.runAsUser;
    const mode = sec.defaultMode ?? 0o644;
    if (!(mode & 0o004) && !(mode & 0o040 && deploy.spec.template.spec.securityContext?.fsGroup !== undefined) && uid !== 0) p.push(`the password file (mode ${mode.toString(8)}) is not readable by user ${uid}: set fsGroup or a group-readable defaultMode`);
  });

  check("the generated Secret's source file is git-ignored", (p) => {
    let ignore = "";
    try { ignore = fs.readFileSync(path.join(dir, ".gitignore"), "utf8"); } catch { /* none */ }
    const ignored = ignore.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    for (const g of gens) {
      for (const f of g.files ?? []) {
        const src = f.includes("=") ? f.split("=").slice(1).join("=") : f;
        if (!ignored.includes(src)) p.push(`${src} (Secret ${g.name}) is not in ${path.basename(dir)}/.gitignore: a password could be committed`);
      }
      if ((g.literals ?? []).length) p.push(`Secret ${g.name} has literals: the password would be in kustomization.yaml`);
    }
  });

  check("NetworkPolicy: only redlockd's pods reach the masters, on the Redis port only", (p) => {
    const masterLabels = sets.map(podLabels);
    const redlockdLabels = deploy ? podLabels(deploy) : {};
    const pols = of("NetworkPolicy").filter((np) => masterLabels.some((l) => matches(np.spec?.podSelector, l)));
    for (const s of sets) {
      if (!pols.some((np) => matches(np.spec?.podSelector, podLabels(s)) && (np.spec?.policyTypes ?? ["Ingress"]).includes("Ingress"))) p.push(`${s.metadata.name}: no Ingress NetworkPolicy selects its pods: any pod may reach it`);
    }
    const redisPorts = new Set(["redis", 6379]);
    for (const s of sets) for (const cp of s.spec?.template?.spec?.containers?.[0]?.ports ?? []) { redisPorts.add(cp.containerPort); if (cp.name) redisPorts.add(cp.name); }
    let admitted = false;
    for (const np of pols) {
      for (const [i, rule] of (np.spec?.ingress ?? []).entries()) {
        const at = `NetworkPolicy/${np.metadata.name} ingress[${i}]`;
        if (!rule.from?.length) { p.push(`${at}: no from: every source is allowed`); continue; }
        if (!rule.ports?.length) p.push(`${at}: no ports: every port is open`);
        for (const port of rule.ports ?? []) if (!redisPorts.has(port.port)) p.push(`${at}: port ${port.port} is not the masters' Redis port`);
        for (const peer of rule.from) {
          if (peer.ipBlock) p.push(`${at}: an ipBlock admits addresses, not redlockd's pods`);
          if (peer.namespaceSelector) p.push(`${at}: a namespaceSelector admits pods of other namespaces`);
          if (!peer.podSelector) continue;
          if (!matches(peer.podSelector, redlockdLabels)) p.push(`${at}: podSelector ${JSON.stringify(peer.podSelector)} admits pods that are not redlockd's`);
          else if ((rule.ports ?? []).some((x) => redisPorts.has(x.port))) admitted = true;
        }
      }
    }
    if (pols.length && !admitted) p.push("no rule admits redlockd's pods to the Redis port: redlockd would be locked out");
  });

  check("redlockd: rolling updates refuse no connection (maxUnavailable 0, preStop sleep within the grace period)", (p) => {
    if (!deploy || !c) return p.push("no redlockd Deployment");
    const ru = deploy.spec.strategy?.rollingUpdate;
    if ((deploy.spec.strategy?.type ?? "RollingUpdate") !== "RollingUpdate" || String(ru?.maxUnavailable ?? "25%") !== "0") p.push(`rolling update maxUnavailable ${ru?.maxUnavailable ?? "25% (default)"}, want 0`);
    const cmd = c.lifecycle?.preStop?.exec?.command ?? [];
    const secs = cmd[0] === "sleep" || cmd[0] === "/bin/sleep" ? Number(cmd[1]) : NaN;
    if (!Number.isFinite(secs)) return p.push("no preStop `sleep N`: the pod stops while load balancers still send it connections");
    if (secs < 5) p.push(`preStop sleeps ${secs} s, want >= 5 (endpoint removal takes seconds to propagate)`);
    const grace = deploy.spec.template.spec.terminationGracePeriodSeconds ?? 30;
    if (secs + 10 > grace) p.push(`preStop ${secs} s leaves ${grace - secs} s of terminationGracePeriodSeconds ${grace} to answer in-flight requests, want >= 10`);
  });

  check("kustomization.yaml lists every manifest", (p) => {
    if (!kustomization) return p.push("no kustomization.yaml");
    const listed = [...(kustomization.obj.resources ?? [])].sort();
    const files = [...new Set(docs.map((d) => d.file))].sort();
    if (listed.join() !== files.join()) p.push(`resources [${listed}] but the manifests are [${files}]`);
    for (const f of listed) if (!fs.existsSync(path.join(dir, f))) p.push(`${f} does not exist`);
  });
  return results;
}

/** All layers; returns [{name, problems}]. */
export async function runChecks({ docs, kustomization }, confText, dir = DEFAULT_DIR) {
  return [
    { name: `schema: ${docs.length} objects validate against the Kubernetes 1.27 schemas`, problems: await checkSchemas(docs) },
    { name: "strict fields: no unknown or mistyped fields (TypeScript)", problems: checkStrictFields(docs) },
    ...checkPolicy(docs, kustomization, confText, dir),
  ];
}

/** Layer 4, when kubectl is installed: `kubectl kustomize` renders the directory (with a
 * throwaway password file, as the operator writes one) into every manifest's objects plus
 * the generated Secrets.  Returns {name, problems} or null (no kubectl: skipped). */
export function checkKustomizeBuild(dir, loaded) {
  const which = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  if (which.error || which.status !== 0) return null;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "k8scheck-"));
  const problems = [];
  try {
    for (const f of fs.readdirSync(dir)) fs.copyFileSync(path.join(dir, f), path.join(tmp, f));
    for (const g of loaded.kustomization?.obj?.secretGenerator ?? []) {
      for (const f of g.files ?? []) fs.writeFileSync(path.join(tmp, f.includes("=") ? f.split("=").slice(1).join("=") : f), "throwaway-password");
    }
    const r = spawnSync("kubectl", ["kustomize", tmp], { encoding: "utf8" });
    if (r.status !== 0) {
      problems.push(`kubectl kustomize: ${(r.stderr || r.stdout).trim().split("\n").pop()}`);
    } else {
      const built = YAML.parseAllDocuments(r.stdout).map((d) => d.toJS()).filter(Boolean);
      const key = (o) => `${o.kind}/${o.metadata?.name}`;
      const got = new Set(built.map(key));
      for (const d of loaded.docs) if (!got.has(key(d.obj))) problems.push(`${key(d.obj)} is missing from the build`);
      for (const g of loaded.kustomization?.obj?.secretGenerator ?? []) {
        const sec = built.find((o) => o.kind === "Secret" && o.metadata?.name === g.name);
        if (!sec) problems.push(`Secret ${g.name} is not generated under that name (a hash suffix?)`);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return { name: "kubectl kustomize: builds every object and the generated Secret under its name", problems };
}

export const DEFAULT_TLS_DIR = path.join(ROOT, "deploy/kubernetes-tls");

/** The TLS overlay (deploy/kubernetes-tls), when kubectl is installed: built with throwaway
 * files for every generated Secret (the password, the certificates), its objects pass the
 * schema and strict-field layers, and what TLS needs holds: every master TLS-only on 6379
 * with client certificates (tls-auth-clients yes), its files and its readiness probe's from
 * the Secret redis-tls mounted read-only; redlockd on rediss://redis-N:6379 with the CA and
 * its client certificate from the Secret redlockd-redis-tls mounted read-only; both Secrets
 * generated under those names; the overlay's .gitignore keeps every certificate and key
 * file out of git.  Returns [{name, problems}] or null (no kubectl: skipped). */
/** Why this kubectl cannot build the TLS overlay, or "" if it can: its `patches` with a
 * target need kustomize >= 3.1, which kubectl embeds from 1.21 on; Debian bookworm's
 * kubernetes-client is 1.20 (kustomize 2.0.3). */
export function overlayUnbuildable() {
  const v = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  if (v.error || v.status !== 0) return "kubectl not installed";
  const m = /Minor:"(\d+)|v1\.(\d+)\./.exec(v.stdout);
  const minor = m ? Number(m[1] ?? m[2]) : 99;
  return minor < 21 ? `kubectl 1.${minor} embeds a kustomize older than 3.1, which cannot build its patches with targets: kubectl 1.21 or later` : "";
}

export async function checkTlsOverlay(overlayDir = DEFAULT_TLS_DIR, baseDir = DEFAULT_DIR) {
  if (overlayUnbuildable()) return null;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "k8scheck-tls-"));
  const name = "TLS overlay (deploy/kubernetes-tls): builds; TLS-only masters with client certificates, redlockd on rediss://, certificates from read-only Secrets";
  const problems = [];
  let built = [];
  try {
    const copy = (from, to) => {
      fs.mkdirSync(to);
      for (const f of fs.readdirSync(from)) if (fs.statSync(path.join(from, f)).isFile()) fs.copyFileSync(path.join(from, f), path.join(to, f));
    };
    copy(baseDir, path.join(tmp, path.basename(baseDir)));
    copy(overlayDir, path.join(tmp, path.basename(overlayDir)));
    const ignored = fs.existsSync(path.join(overlayDir, ".gitignore")) ? fs.readFileSync(path.join(overlayDir, ".gitignore"), "utf8") : "";
    const globs = ignored.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    const isIgnored = (f) => globs.some((g) => g === f || (g.startsWith("*") && f.endsWith(g.slice(1))));
    for (const d of [baseDir, overlayDir]) {
      const k = YAML.parse(fs.readFileSync(path.join(d, "kustomization.yaml"), "utf8"));
      for (const g of k.secretGenerator ?? []) {
        for (const f of g.files ?? []) {
          const file = f.includes("=") ? f.split("=").slice(1).join("=") : f;
          fs.writeFileSync(path.join(tmp, path.basename(d), file), "throwaway");
          if (d === overlayDir && !isIgnored(file)) problems.push(`${file} (a certificate or key) is not in the overlay's .gitignore`);
        }
      }
    }
    const r = spawnSync("kubectl", ["kustomize", path.join(tmp, path.basename(overlayDir))], { encoding: "utf8" });
    if (r.status !== 0) {
      problems.push(`kubectl kustomize: ${(r.stderr || r.stdout).trim().split("\n").pop()}`);
      return [{ name, problems }];
    }
    built = YAML.parseAllDocuments(r.stdout).map((d) => d.toJS()).filter(Boolean);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const docs = built.map((obj, index) => ({ file: "kubernetes-tls (built)", index, obj }));
  problems.push(...(await checkSchemas(docs)), ...checkStrictFields(docs));
  const secret = (n) => built.find((o) => o.kind === "Secret" && o.metadata?.name === n);
  for (const n of ["redis-tls", "redlockd-redis-tls"]) if (!secret(n)) problems.push(`Secret ${n} is not generated under that name`);
  /** The read-only mount path of Secret secretName in pod spec ps / container c, or null. */
  const mountOf = (ps, c, secretName) => {
    const vol = (ps.volumes ?? []).find((v) => v.secret?.secretName === secretName);
    const m = vol && (c.volumeMounts ?? []).find((vm) => vm.name === vol.name);
    return m && m.readOnly ? m.mountPath : null;
  };
  const under = (p, dir) => typeof p === "string" && dir && p.startsWith(dir + "/");
  const masters = built.filter((o) => o.kind === "StatefulSet" && o.metadata?.labels?.["app.kubernetes.io/name"] === "redis-master");
  if (masters.length !== 5) problems.push(`${masters.length} master StatefulSets, want 5`);
  for (const m of masters) {
    const ps = m.spec.template.spec, c = ps.containers[0], a = (c.args ?? []).map(String);
    const arg = (k) => (a.indexOf(k) >= 0 ? a[a.indexOf(k) + 1] : undefined);
    const n = m.metadata.name;
    if (arg("--port") !== "0" || arg("--tls-port") !== "6379") problems.push(`${n}: not TLS-only on 6379 (--port ${arg("--port")}, --tls-port ${arg("--tls-port")})`);
    if (arg("--tls-auth-clients") !== "yes") problems.push(`${n}: --tls-auth-clients is ${arg("--tls-auth-clients")}, want yes`);
    const dir = mountOf(ps, c, "redis-tls");
    if (!dir) problems.push(`${n}: the Secret redis-tls is not mounted read-only`);
    for (const k of ["--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file"]) if (!under(arg(k), dir)) problems.push(`${n}: ${k} ${arg(k)} is not from the Secret redis-tls`);
    const probe = (c.readinessProbe?.exec?.command ?? []).join(" ");
    if (!/redis-cli --tls/.test(probe)) problems.push(`${n}: its readiness probe does not speak TLS: ${probe}`);
  }
  const dep = built.find((o) => o.kind === "Deployment" && o.metadata?.name === "redlockd");
  if (!dep) problems.push("no Deployment redlockd");
  else {
    const ps = dep.spec.template.spec, c = ps.containers[0];
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
    const want = MASTERS.map((m) => `rediss://${m}:6379`).join(",");
    if (env.REDLOCK_MASTERS !== want) problems.push(`REDLOCK_MASTERS is ${env.REDLOCK_MASTERS}, want ${want}`);
    const dir = mountOf(ps, c, "redlockd-redis-tls");
    if (!dir) problems.push("redlockd: the Secret redlockd-redis-tls is not mounted read-only");
    for (const k of ["REDLOCK_REDIS_TLS_CA_FILE", "REDLOCK_REDIS_TLS_CERT", "REDLOCK_REDIS_TLS_KEY"]) if (!under(env[k], dir)) problems.push(`redlockd: ${k} ${env[k]} is not from the Secret redlockd-redis-tls`);
    if (env.REDLOCK_REDIS_TLS_INSECURE && !/^(0|no|false)$/.test(env.REDLOCK_REDIS_TLS_INSECURE)) problems.push("redlockd: REDLOCK_REDIS_TLS_INSECURE is on");
  }
  return [{ name, problems }];
}

async function main(argv) {
  let dir = DEFAULT_DIR, conf = DEFAULT_CONF;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--dir") dir = argv[++i];
    else if (argv[i] === "--conf") conf = argv[++i];
    else { console.error("usage: k8scheck.mjs [--dir DIR] [--conf redis-master.conf]"); return 2; }
  }
  let loaded;
  try {
    loaded = loadManifests(dir);
  } catch (e) {
    console.error(`k8s-check: ${e.message}`);
    console.log("k8s-check: 0 passed, 1 failed");
    return 1;
  }
  const results = await runChecks(loaded, fs.readFileSync(conf, "utf8"), dir);
  const build = checkKustomizeBuild(dir, loaded);
  if (build) results.push(build);
  else console.log("skip kubectl kustomize (kubectl not installed)");
  if (dir === DEFAULT_DIR) {
    const tls = await checkTlsOverlay();
    if (tls) results.push(...tls);
    else console.log(`skip the TLS overlay (${overlayUnbuildable()})`);
  }
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
  console.log(`k8s-check: ${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
