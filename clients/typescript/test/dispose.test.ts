// dispose.test.ts -- `await using` on every Node.js the package supports: dist/dispose.js
// defines Symbol.asyncDispose (and Symbol.dispose) as Symbol.for("Symbol.asyncDispose")
// where the runtime lacks them (Node before 18.18 / 20.4), as TypeScript's and core-js's
// polyfills do, and leaves a native one alone.  A fresh vm context has neither symbol, so
// the polyfill is run there.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import vm from "node:vm";

import { Lock, LockSet, Permit } from "@redlockd/client";

const source = readFileSync(new URL("../../dist/dispose.js", import.meta.url), "utf8").replace(/^export .*$/m, "");

test("where Symbol.asyncDispose is missing, importing the package defines it", () => {
  const ctx = vm.createContext({});
  assert.equal(vm.runInContext("typeof Symbol.asyncDispose", ctx), "undefined", "a vm context lacks it (else this test shows nothing)");
  vm.runInContext(source, ctx);
  assert.equal(vm.runInContext("typeof Symbol.asyncDispose", ctx), "symbol");
  assert.equal(vm.runInContext('Symbol.asyncDispose === Symbol.for("Symbol.asyncDispose")', ctx), true);
  assert.equal(vm.runInContext('Symbol.dispose === Symbol.for("Symbol.dispose")', ctx), true);
});

test("where it exists, the native symbol is kept, and locks are disposable by it", () => {
  const native = Symbol.asyncDispose;
  const ctx = vm.createContext({});
  vm.runInContext("Symbol.asyncDispose = undefined; Object.defineProperty(Symbol, 'asyncDispose', { value: Symbol('mine') })", ctx);
  vm.runInContext(source, ctx);
  assert.equal(vm.runInContext("Symbol.asyncDispose.description", ctx), "mine");
  assert.equal(Symbol.asyncDispose, native);
  for (const k of [Lock, Permit, LockSet]) assert.equal(typeof k.prototype[Symbol.asyncDispose], "function", k.name);
});
