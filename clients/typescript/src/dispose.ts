// dispose.ts -- Symbol.asyncDispose for `await using`, on a Node.js that lacks it.
//
// Node 18.18+ and 20.4+ define Symbol.asyncDispose; TypeScript's code for `await using`
// (TypeScript >= 5.2) looks it up at run time and throws without it.  On an older Node
// this defines it as Symbol.for("Symbol.asyncDispose"), the symbol TypeScript's and
// core-js's polyfills use, so that a lock made by this package can be disposed of by
// code compiled for either.  The one side effect of importing the package.

const S = Symbol as { asyncDispose?: symbol; dispose?: symbol };
if (typeof S.asyncDispose !== "symbol") {
  Object.defineProperty(Symbol, "asyncDispose", { value: Symbol.for("Symbol.asyncDispose"), configurable: false, writable: false, enumerable: false });
}
if (typeof S.dispose !== "symbol") {
  Object.defineProperty(Symbol, "dispose", { value: Symbol.for("Symbol.dispose"), configurable: false, writable: false, enumerable: false });
}

/** Symbol.asyncDispose (the native one, or the one defined above). */
export const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose;
