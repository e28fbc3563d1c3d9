// Records the frames two real Endo CapTP endpoints exchange over TCP on
// 127.0.0.1, as the corpus libvat's wire-format tests and fuzzers read.
//
//   node record.js [OUT_DIR]       (default: ../corpus)
//
// Both endpoints are @endo/captp's makeCapTP (the version package-lock.json
// pins), each behind its own socket; each side frames what CapTP hands it
// as a netstring of JSON, the way Endo's own netstring writer does. Every
// frame is written, byte for byte as it crossed the socket, to
// OUT_DIR/frames/NNN-<from>-<type>.ns. The exchange exercises every
// passable kind, calls, returns, exceptions, promises resolved and
// rejected later, pipelining and the disconnect.
//
// It also writes OUT_DIR/smallcaps/NNN.json: the same values marshalled by
// @endo/marshal in the smallcaps body format (CapTP itself sends capdata),
// as {"body","slots"} objects.
//
// Bounded: it listens on 127.0.0.1 only, on a port the kernel picks, and
// exits with an error after 20 s whatever happens.
import 'ses';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

lockdown({ errorTaming: 'unsafe', overrideTaming: 'severe', consoleTaming: 'unsafe' });

await import('@endo/eventual-send/shim.js');
const { makeCapTP, makeMarshal, makeTagged } = await import('@endo/captp');
const { E, Far, passStyleOf } = await import('@endo/far');

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(process.argv[2] ?? path.join(here, '..', 'corpus'));
const framesDir = path.join(outDir, 'frames');
const smallcapsDir = path.join(outDir, 'smallcaps');
for (const dir of [framesDir, smallcapsDir]) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
}

const deadline = setTimeout(() => {
  console.error('record.js: not finished after 20 s');
  process.exit(1);
}, 20_000);

let frameCount = 0;
const record = (from, bytes) => {
  const type = JSON.parse(bytes.toString('utf8').replace(/^\d+:/, '').slice(0, -1)).type;
  const name = `${String(frameCount).padStart(3, '0')}-${from}-${type}.ns`;
  frameCount += 1;
  fs.writeFileSync(path.join(framesDir, name), bytes);
};

// A netstring reader on a socket: calls onFrame(rawBytes, json) per frame.
const readNetstrings = (socket, onFrame) => {
  let buf = Buffer.alloc(0);
  socket.on('data', chunk => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const colon = buf.indexOf(0x3a);
      if (colon < 0) return;
      const len = Number(buf.subarray(0, colon).toString('ascii'));
      const end = colon + 1 + len;
      if (buf.length < end + 1) return;
      if (buf[end] !== 0x2c) throw Error('bad netstring');
      const raw = buf.subarray(0, end + 1);
      const json = buf.subarray(colon + 1, end).toString('utf8');
      buf = buf.subarray(end + 1);
      onFrame(Buffer.from(raw), json);
    }
  });
};

const writeNetstring = (socket, obj) => {
  const json = Buffer.from(JSON.stringify(obj), 'utf8');
  socket.write(Buffer.concat([Buffer.from(`${json.length}:`), json, Buffer.from(',')]));
};

// Every passable kind CapData carries, in one record.
const counter = Far('Counter', {
  incr: n => n + 1n,
});
const allKinds = harden({
  nul: null,
  undef: undefined,
  yes: true,
  no: false,
  int: 42,
  neg: -7,
  float: 1.5,
  tiny: 5e-324,
  big: 1e300,
  negZero: -0,
  nan: NaN,
  inf: Infinity,
  ninf: -Infinity,
  bigint: 12345678901234567890n,
  smallBigint: -3n,
  str: 'héllo, wörld ✓ 𝄞',
  empty: '',
  bangStr: '!not special',
  hashStr: '#hash',
  symbol: Symbol.for('ok'),
  asyncIter: Symbol.asyncIterator,
  list: [1, 'two', [3n], {}],
  emptyList: [],
  nested: { a: { b: { c: [null] } } },
  set: makeTagged('copySet', harden(['a', 'b'])),
  set1: makeTagged('copySet', harden(['only'])),
  bag: makeTagged('copyBag', harden([['x', 2n]])),
  map: makeTagged('copyMap', harden({ keys: [3n, 1n], values: ['c', 'a'] })),
  point: makeTagged('point', harden([1, 2])),
  remotable: counter,
  again: counter,
  error: harden(TypeError('bad thing')),
});

// The server's bootstrap object.
const makeServerBootstrap = () => {
  let later;
  const laterP = new Promise(resolve => {
    later = resolve;
  });
  let laterRej;
  const rejP = new Promise((_, reject) => {
    laterRej = reject;
  });
  rejP.catch(() => {});
  return Far('Bootstrap', {
    echo: x => x,
    allKinds: () => allKinds,
    add: (a, b) => a + b,
    fail: () => {
      throw RangeError('out of range on purpose');
    },
    getCounter: () => counter,
    makeChild: name =>
      Far('Child', {
        hello: greeting => `${greeting}, ${name}`,
      }),
    // Promises that settle later: the caller receives them inside a
    // record, so they travel as promise slots and settle by CTP_RESOLVE.
    pending: () => harden({ laterP, rejP }),
    settle: () => {
      later(harden({ done: true, n: 7n }));
      laterRej(harden(Error('rejected later')));
      return 'settled';
    },
    callMeBack: cb => E(cb).ping('from server'),
  });
};

const server = net.createServer(socket => {
  const capTP = makeCapTP('server', obj => writeNetstring(socket, obj), makeServerBootstrap(), {
    onReject: () => {},
  });
  readNetstrings(socket, (raw, json) => {
    record('client', raw);
    capTP.dispatch(JSON.parse(json));
  });
  socket.on('error', () => {});
});

await new Promise(resolve => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();

const socket = net.connect(port, '127.0.0.1');
await new Promise(resolve => socket.on('connect', resolve));
const client = makeCapTP('client', obj => writeNetstring(socket, obj), Far('ClientBootstrap', {}), {
  onReject: () => {},
});
readNetstrings(socket, (raw, json) => {
  record('server', raw);
  client.dispatch(JSON.parse(json));
});

const bs = client.getBootstrap();
// Pipelined on the bootstrap question before it is answered.
const child = E(bs).makeChild('pipelined');
const greeting = E(child).hello('hi');
const echoed = await E(bs).echo(allKinds);
const kinds = await E(bs).allKinds();
if (kinds.str !== allKinds.str) throw Error('round trip lost a string');
await greeting;
const sum = await E(bs).add(1, 2);
const counterRef = await E(bs).getCounter();
await E(counterRef).incr(41n);
await E(E(bs).getCounter()).incr(1n); // pipelined on an answer
await E(bs).fail().catch(() => {});
await E(bs).nonexistent().catch(() => {});
const { laterP, rejP } = await E(bs).pending();
await E(bs).settle();
await laterP;
await rejP.catch(() => {});
const pong = await E(bs).callMeBack(Far('Callback', { ping: s => `pong: ${s}` }));
await E(bs).echo(harden([echoed.remotable, echoed.error, sum, pong]));
// A promise passed as an argument, resolved after the call.
let resolveArg;
const argP = new Promise(resolve => {
  resolveArg = resolve;
});
const echoedP = E(bs).echo(harden([argP]));
resolveArg('resolved argument');
await echoedP;
client.abort(harden(Error('recording done')));
await new Promise(resolve => setTimeout(resolve, 200));
socket.destroy();
server.close();

// Smallcaps bodies of the same values, from Endo's own marshaller.
const slotOf = new Map();
const { serialize } = makeMarshal(
  val => {
    const kind = passStyleOf(val) === 'promise' ? 'p' : 'o';
    if (!slotOf.has(val)) slotOf.set(val, `${kind}+${slotOf.size + 1}`);
    return slotOf.get(val);
  },
  undefined,
  { serializeBodyFormat: 'smallcaps', errorTagging: 'off' },
);
const smallcapsSamples = [
  allKinds,
  harden(['method', [1, 2n, 'x']]),
  harden(Error('plain')),
  harden({ '!bang': '$dollar', '#': '%percent' }),
  harden([Promise.resolve(1)]),
];
smallcapsSamples.forEach((v, i) => {
  const name = `${String(i).padStart(3, '0')}.json`;
  fs.writeFileSync(path.join(smallcapsDir, name), `${JSON.stringify(serialize(v))}\n`);
});

clearTimeout(deadline);
console.log(`recorded ${frameCount} frames and ${smallcapsSamples.length} smallcaps bodies in ${outDir}`);
process.exit(0);
