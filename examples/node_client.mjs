// The Node side of examples/node_client.c: an Endo program that uses a C
// object over CapTP and hands it an object of its own to call back.
//
//   node examples/node_client.mjs PORT
//
// Connects to the C server on 127.0.0.1:PORT and speaks CapTP through
// @endo/captp, netstring-framed. The packages are those test/captp/endo
// pins (its package-lock.json); `npm ci` there brings them. Every line
// it prints starts with "client:"; the C side's start with "server:". It
// hangs up when done, and gives up after 20 s whatever happens.
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// Resolves a package from test/captp/endo/node_modules and imports its
// ES module entry (not the CommonJS one require would pick: the packages
// share one `ses`, and it must be the one @endo/errors imports).
const pinned = createRequire(new URL('../test/captp/endo/package.json', import.meta.url));
const load = (name, sub = '.') => {
  const manifest = pinned.resolve(`${name}/package.json`);
  const entry = pinned(manifest).exports[sub];
  const file = typeof entry === 'string' ? entry : entry.import.default;
  return import(pathToFileURL(path.join(path.dirname(manifest), file)).href);
};

await load('ses');
lockdown({ errorTaming: 'unsafe', overrideTaming: 'severe', consoleTaming: 'unsafe' });
await load('@endo/eventual-send', './shim.js');
const { makeCapTP } = await load('@endo/captp');
const { E, Far } = await load('@endo/far');

setTimeout(() => {
  console.error('node_client.mjs: not finished after 20 s');
  process.exit(1);
}, 20_000).unref();

// CapTP messages travel as netstrings: `<length>:<JSON>,`.
const readNetstrings = (socket, onFrame) => {
  let buf = Buffer.alloc(0);
  socket.on('data', chunk => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const colon = buf.indexOf(0x3a);
      if (colon < 0) return;
      const end = colon + 1 + Number(buf.subarray(0, colon).toString('ascii'));
      if (buf.length < end + 1) return;
      onFrame(JSON.parse(buf.subarray(colon + 1, end).toString('utf8')));
      buf = buf.subarray(end + 1);
    }
  });
};

const writeNetstring = (socket, obj) => {
  const json = Buffer.from(JSON.stringify(obj), 'utf8');
  socket.write(Buffer.concat([Buffer.from(`${json.length}:`), json, Buffer.from(',')]));
};

const log = text => console.log(`client: ${text}`);
// Values shown the same way whatever their kind (JSON has no bigint).
const show = v =>
  JSON.stringify(v, (_k, x) =>
    typeof x === 'bigint' ? `${x}n` : typeof x === 'symbol' ? String(x) : x);

const socket = net.connect(Number(process.argv[2]), '127.0.0.1');
await new Promise((resolve, reject) => {
  socket.on('connect', resolve);
  socket.on('error', reject);
});
// No bootstrap of our own: the C side gets our objects through calls.
// Rejections are reported where they are awaited, not logged again.
const capTP = makeCapTP('node-client', obj => writeNetstring(socket, obj), undefined, {
  onReject: () => {},
});
readNetstrings(socket, obj => capTP.dispatch(obj));
socket.on('error', () => {});
socket.on('close', () => process.exit(0));

// The C kitchen's bootstrap object, a promise until it is answered.
const kitchen = capTP.getBootstrap();
log(`hello("node") -> ${show(await E(kitchen).hello('node'))}`);
log(`add(40n, 2n) -> ${show(await E(kitchen).add(40n, 2n))}`);

// Several kinds of value, there and back.
const sample = harden({
  count: 7n,
  ratio: 0.25,
  ok: true,
  nothing: null,
  text: 'héllo ✓',
  list: [1n, 'two', [3.5]],
  sym: Symbol.for('spicy'),
});
log(`describe(${show(sample)})`);
log(`  -> ${await E(kitchen).describe(sample)}`);
log(`menu() -> ${show(await E(kitchen).menu())}`);

// An error thrown on the C side arrives as a rejection.
await E(kitchen)
  .order('unicorn')
  .then(
    () => log('order("unicorn") was taken?'),
    e => log(`order("unicorn") failed: ${e.name}: ${e.message}`),
  );

// A Node object the C side calls back.
let notes = 0;
const listener = Far('Listener', {
  notify: text => {
    notes += 1;
    log(`  listener: ${text}`);
    return `thanks #${notes}`;
  },
});
log(`subscribe(listener) -> ${show(await E(kitchen).subscribe(listener))}`);
log(`echo(listener) is the same object: ${(await E(kitchen).echo(listener)) === listener}`);

// A promise the C side resolves later, inside the answer. (Nothing is
// printed before it settles: the kitchen's call back comes meanwhile.)
const { number, ready } = await E(kitchen).order('soup');
const dish = await ready;
log(`order("soup") -> ticket ${number}, and a promise resolved to ${show(dish)}`);

// Pipelined: a call sent to the answer of a call not answered yet.
log(`pipelined self().hello("again") -> ${show(await E(E(kitchen).self()).hello('again'))}`);

log('done; hanging up');
capTP.abort(Error('done'));
socket.end();
