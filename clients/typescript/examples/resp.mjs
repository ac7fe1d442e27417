// resp.mjs -- a minimal Redis client (RESP over node:net) for examples/fencing.mjs: enough
// to EVAL a script and GET a key, so that the example needs no package but this one.

import net from "node:net";

/**
 * Connects to a Redis server; resolves to { call(...args), close() }.
 * @param {number} port
 * @param {string} [host]
 * @returns {Promise<{ call: (...args: Array<string | number>) => Promise<any>, close: () => void }>}
 */
export async function connect(port, host = "127.0.0.1") {
  const sock = net.connect(port, host);
  await new Promise((resolve, reject) => sock.once("connect", resolve).once("error", reject));
  let buf = Buffer.alloc(0);
  /** @type {Array<(v: unknown) => void>} */
  const waiting = [];
  sock.on("data", (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const r = parse(buf, 0);
      if (r === undefined) break;
      buf = buf.subarray(r.end);
      waiting.shift()?.(r.value);
    }
  });
  return {
    call(...args) {
      const parts = args.map((a) => String(a));
      sock.write(`*${parts.length}\r\n` + parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join(""));
      return new Promise((resolve, reject) => waiting.push((v) => (v instanceof Error ? reject(v) : resolve(v))));
    },
    close: () => sock.end(),
  };
}

/**
 * One RESP value at `at`: { value, end }, or undefined if incomplete.
 * @param {Buffer} b
 * @param {number} at
 * @returns {{ value: unknown, end: number } | undefined}
 */
function parse(b, at) {
  const nl = b.indexOf("\r\n", at);
  if (nl < 0) return undefined;
  const line = b.toString("utf8", at + 1, nl);
  switch (String.fromCharCode(b[at] ?? 0)) {
    case "+":
      return { value: line, end: nl + 2 };
    case "-":
      return { value: new Error(line), end: nl + 2 };
    case ":":
      return { value: Number(line), end: nl + 2 };
    case "$": {
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      if (b.length < nl + 2 + n + 2) return undefined;
      return { value: b.toString("utf8", nl + 2, nl + 2 + n), end: nl + 2 + n + 2 };
    }
    case "*": {
      const n = Number(line);
      const out = [];
      let end = nl + 2;
      for (let i = 0; i < n; i++) {
        const r = parse(b, end);
        if (r === undefined) return undefined;
        out.push(r.value);
        end = r.end;
      }
      return { value: n < 0 ? null : out, end };
    }
    default:
      return { value: new Error(`bad reply ${line}`), end: nl + 2 };
  }
}
