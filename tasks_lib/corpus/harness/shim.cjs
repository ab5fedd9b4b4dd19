'use strict';
// The jail's Node shim: serves the judge's requests on the code under test (Node built-ins only).
//
// Usage: `node shim.cjs 3<&0 </dev/null 1>&2` (post_turn.jail_argv), with the workspace as cwd, in
// the attempt's sandbox (the attempt's uid, the workspace, a scratch folder shared with the judge;
// never the post-turn tests, the nonce or the judge's result channel). The same JSON-lines protocol
// as `shim.py`: one request per line, one JSON answer per line, both on fd 3 (the runner's socket);
// fd 0 is /dev/null and fd 1 the jail's stderr, so neither what the code under test prints (with
// `process.stdout` or from a child with inherited stdio) nor a child reading stdin can touch the
// channel (without fd 3, stdin and stdout are the channel, as for shim.py). Nothing is ever
// evaluated: a target names a module and a property path, never code.
//
// Targets: `"MODULE:prop.path"`, split at the last colon. MODULE is `globalThis` (the globals:
// `globalThis:Date`), a built-in (`node:path:`, note the final colon), or a workspace path
// (`src`, `lib/client.js`, `.` for the package's main), loaded with require (import() for ESM).
// A function reached through a property path is bound to its owner, so `get(map, "get")` calls
// as `map.get`. Or a handle `{"$handle": id}`.
//
// Requests (`op`): `call` (`new: true` constructs with JS `new` and always answers a handle;
// `keep: true` answers a handle; `stdout: true` captures what process.stdout receives), `get`,
// `value`, `recorder` (every method records {name, args} and returns `returns`; with `clock`, a
// clock handle, each record also has `at`, the clock's time), `const`, `clock` (a virtual clock:
// `now()` its milliseconds from `start`, `sleep(ms)` advances it, `date()` a Date of it) and
// `run` (`argv`, `cwd`, `stdin`, `timeout`: {status, stdout, stderr}). A promise is awaited
// before it is answered. Answers: {"value": v} for a JSON value (undefined as null), {"handle": id,
// "type": name} for anything else, {"error": name, "message": text} for a throw.

const net = require('node:net');
const path = require('node:path');
const readline = require('node:readline');
const { spawnSync } = require('node:child_process');
const { constants } = require('node:os');

const MAX_TEXT = 1 << 20; // characters of a command's stdout or stderr answered
const WORKSPACE = process.cwd();
const handles = new Map();
const recorders = new WeakMap();

function keep(obj) {
  const ident = handles.size + 1;
  handles.set(ident, obj);
  const type = obj === null || obj === undefined ? String(obj)
    : (typeof obj === 'function' ? 'function' : (obj.constructor && obj.constructor.name) || typeof obj);
  return { handle: ident, type };
}

function plain(obj, depth = 0) {
  // [true, JSON form] when obj is made of JSON values (undefined as null); [false] otherwise
  if (depth > 50) return [false];
  if (obj === null || obj === undefined) return [true, null];
  if (typeof obj === 'boolean' || typeof obj === 'string') return [true, obj];
  if (typeof obj === 'number') return Number.isFinite(obj) ? [true, obj] : [false];
  if (Array.isArray(obj)) {
    const out = [];
    for (const item of obj) {
      const [ok, v] = plain(item, depth + 1);
      if (!ok) return [false];
      out.push(v);
    }
    return [true, out];
  }
  if (typeof obj === 'object') {
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) return [false];
    const out = {};
    for (const [k, item] of Object.entries(obj)) {
      const [ok, v] = plain(item, depth + 1);
      if (!ok) return [false];
      out[k] = v;
    }
    return [true, out];
  }
  return [false];
}

function loose(obj, depth = 0) {
  // a recorded call as JSON: JSON values as they are, a Date as its ISO text, anything else as its name
  const [ok, v] = plain(obj);
  if (ok) return v;
  if (depth > 20) return '[deep]';
  if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? 'Invalid Date' : obj.toISOString();
  if (Array.isArray(obj)) return obj.map((item) => loose(item, depth + 1));
  if (obj && typeof obj === 'object' && Object.getPrototypeOf(obj) === Object.prototype) {
    return Object.fromEntries(Object.entries(obj).map(([k, item]) => [k, loose(item, depth + 1)]));
  }
  return `[${typeof obj === 'function' ? 'function' : (obj && obj.constructor && obj.constructor.name) || typeof obj}]`;
}

function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === '$handle') {
      if (!handles.has(Number(value.$handle))) throw new RangeError(`no handle ${value.$handle}`);
      return handles.get(Number(value.$handle));
    }
    return Object.fromEntries(keys.map((k) => [k, decode(value[k])]));
  }
  return value;
}

async function load(spec) {
  if (spec === 'globalThis') return globalThis;
  if (spec.startsWith('node:')) return require(spec);
  const file = path.resolve(WORKSPACE, spec);
  try {
    return require(file);
  } catch (error) {
    if (error && error.code === 'ERR_REQUIRE_ESM') return import(require('node:url').pathToFileURL(file).href);
    throw error;
  }
}

async function target(name) {
  if (name && typeof name === 'object') return decode(name);
  const text = String(name);
  const cut = text.lastIndexOf(':');
  if (cut < 0) throw new TypeError(`a target is "module:prop.path" or a handle, not ${JSON.stringify(text)}`);
  let obj = await load(text.slice(0, cut));
  let owner;
  for (const part of text.slice(cut + 1).split('.').filter(Boolean)) {
    owner = obj;
    obj = obj[part];
  }
  return typeof obj === 'function' && owner !== undefined && owner !== globalThis ? bind(obj, owner) : obj;
}

function bind(fn, owner) {
  // a method keeps its owner; a class stays constructible (a bound function is)
  return /^class[\s{]/.test(Function.prototype.toString.call(fn)) ? fn : fn.bind(owner);
}

function answer(obj) {
  const [ok, v] = plain(obj);
  return ok ? { value: v } : keep(obj);
}

function recorder(returns, clock) {
  const calls = [];
  const proxy = new Proxy({}, {
    get(_, name) {
      if (typeof name !== 'string' || name === 'then') return undefined;
      return (...args) => {
        calls.push(clock ? { name, args: loose(args), at: clock.now() } : { name, args: loose(args) });
        return returns;
      };
    },
  });
  recorders.set(proxy, calls);
  return proxy;
}

function virtualClock(start) {
  let now = Number(start) || 0;
  return { now: () => now, sleep: async (ms) => { now += Number(ms) || 0; }, date: () => new Date(now) };
}

function run(request) {
  const argv = (request.argv || []).map(String);
  if (argv.length === 0) return { error: 'ValueError', message: 'run needs an argv' };
  const done = spawnSync(argv[0], argv.slice(1), {
    cwd: String(request.cwd || '.'), input: String(request.stdin || ''), timeout: Number(request.timeout || 60) * 1000,
    maxBuffer: 64 << 20, encoding: 'utf8',
  });
  if (done.error && done.error.code === 'ETIMEDOUT') return { status: 124, stdout: '', stderr: '[jail: timed out]' };
  if (done.error) return { status: 127, stdout: '', stderr: `[jail: ${done.error.message}]` };
  const status = done.status !== null ? done.status : -(constants.signals[done.signal] || 0);
  return { status, stdout: String(done.stdout).slice(0, MAX_TEXT), stderr: String(done.stderr).slice(0, MAX_TEXT) };
}

async function capture(thunk) {
  const chunks = [];
  const write = process.stdout.write;
  process.stdout.write = (chunk, ...rest) => {
    chunks.push(String(chunk));
    const done = rest.find((r) => typeof r === 'function');
    if (done) done();
    return true;
  };
  try {
    return [await thunk(), chunks.join('')];
  } finally {
    process.stdout.write = write;
  }
}

async function handle(request) {
  const op = request.op;
  if (op === 'call') {
    const fn = await target(request.target);
    const args = decode(request.args || []);
    if (request.new) return keep(new fn(...args));
    if (typeof fn !== 'function') throw new TypeError(`${loose(fn)} is not a function`);
    if (request.stdout) {
      const [result, out] = await capture(async () => fn(...args));
      return { ...answer(result), stdout: out };
    }
    const result = await fn(...args);
    return request.keep ? keep(result) : answer(result);
  }
  if (op === 'get') {
    const obj = await target(request.target);
    if (!request.attr) return answer(obj);
    const attr = obj[String(request.attr)];
    return answer(typeof attr === 'function' ? bind(attr, obj) : attr);
  }
  if (op === 'value') {
    const obj = await target(request.target);
    if (recorders.has(obj)) return { value: recorders.get(obj) };
    const [ok, v] = plain(obj);
    return ok ? { value: v } : { error: 'TypeError', message: `a ${loose(obj)} is not a JSON value` };
  }
  if (op === 'recorder') return keep(recorder(decode(request.returns), request.clock ? decode(request.clock) : null));
  if (op === 'const') {
    const v = decode(request.value);
    return keep(() => v);
  }
  if (op === 'clock') return keep(virtualClock(request.start));
  if (op === 'run') return run(request);
  return { error: 'ValueError', message: `unknown op ${JSON.stringify(op)}` };
}

let answers; // the original process.stdout.write: only this process answers on stdout

function reply(obj) {
  let text;
  try {
    text = JSON.stringify(obj);
  } catch (error) {
    text = JSON.stringify({ error: 'TypeError', message: `answer is not JSON: ${error.message}` });
  }
  return new Promise((resolve) => { answers(`${text}\n`, resolve); });
}

function channel() {
  // fd 3 when the launcher moved the channel there (post_turn.jail_argv), else stdin and stdout
  try {
    const socket = new net.Socket({ fd: 3, readable: true, writable: true });
    return { input: socket, write: (text, done) => socket.write(text, done) };
  } catch (error) {
    return { input: process.stdin, write: process.stdout.write.bind(process.stdout) };
  }
}

async function main() {
  // what the code under test prints goes to stderr; only this process writes answers on the channel
  const { input, write } = channel();
  answers = write;
  process.stdout.write = process.stderr.write.bind(process.stderr);
  const lines = readline.createInterface({ input, crlfDelay: Infinity });
  for await (const line of lines) {
    let request;
    try {
      request = JSON.parse(line);
    } catch (error) {
      await reply({ error: 'ValueError', message: `request is not JSON: ${error.message}` });
      continue;
    }
    try {
      await reply(await handle(request));
    } catch (error) {
      const name = error && error.constructor && error.constructor.name ? error.constructor.name : 'Error';
      await reply({ error: name, message: String(error && error.message !== undefined ? error.message : error).slice(0, 2000) });
    }
  }
}

process.on('unhandledRejection', (error) => process.stderr.write(`[jail: unhandled rejection: ${error}]\n`));
main().then(() => process.exit(0));
