// An Endo CapTP peer for libvat's interop test (test/net_endo.c).
//
//   node peer.js PORT [hold-bootstrap=N]
//
// Connects to a libvat listener on 127.0.0.1:PORT and speaks CapTP through
// @endo/captp (the version package-lock.json pins), netstring-framed as
// Endo's own writer frames it. It offers a bootstrap object the C side
// calls, and when the C side asks (runChecks) it calls the C side's
// bootstrap the other way and answers with what went wrong ([] when
// nothing did). It exits 0 once the C side disconnects, and 1 after 20 s
// whatever happens.
//
// It watches the wire for pipelining on bootstrap questions, both ways:
// calls the C side addresses to its bootstrap question before Endo has
// answered it (wireReport tells how many), and calls Endo addresses to
// its own before the C side's answer arrives (checked in runChecks). With
// hold-bootstrap=N it holds the C side's CTP_BOOTSTRAP, and what follows,
// until N calls on that question have arrived, so the C side's pipelining
// is seen whatever the timing. PEER_TRACE=1 in the environment prints each
// frame's type and ids to stderr.
import 'ses';
import net from 'node:net';

lockdown({ errorTaming: 'unsafe', overrideTaming: 'severe', consoleTaming: 'unsafe' });

await import('@endo/eventual-send/shim.js');
const { makeCapTP } = await import('@endo/captp');
const { E, Far, getInterfaceOf } = await import('@endo/far');

const port = Number(process.argv[2]);
const holdFor = Number((process.argv[3] || '').match(/^hold-bootstrap=(\d+)$/)?.[1] ?? 0);
setTimeout(() => {
  console.error('peer.js: not finished after 20 s');
  process.exit(1);
}, 20_000).unref();

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
      const json = buf.subarray(colon + 1, end).toString('utf8');
      buf = buf.subarray(end + 1);
      onFrame(JSON.parse(json));
    }
  });
};

const writeNetstring = (socket, obj) => {
  const json = Buffer.from(JSON.stringify(obj), 'utf8');
  socket.write(Buffer.concat([Buffer.from(`${json.length}:`), json, Buffer.from(',')]));
};

// What the wire showed of pipelining on bootstrap questions.
let theirBootstrapQ; // the C side's question
let theirBootstrapAnswered = false;
let callsOnTheirsEarly = 0; // calls on it, received before Endo answered
const ourBootstraps = new Map(); // Endo's question -> answered yet
const callsOnOursEarly = new Map(); // Endo's question -> calls sent before

const watchIn = obj => {
  if (process.env.PEER_TRACE) console.error("in", obj.type, obj.questionID || obj.answerID, obj.target || "");
  if (obj.type === 'CTP_BOOTSTRAP') theirBootstrapQ = obj.questionID;
  if (obj.type === 'CTP_CALL' && obj.target === theirBootstrapQ && !theirBootstrapAnswered)
    callsOnTheirsEarly += 1;
  if (obj.type === 'CTP_RETURN' && ourBootstraps.has(obj.answerID))
    ourBootstraps.set(obj.answerID, true);
};

let lastBootstrapSent;
const watchOut = obj => {
  if (process.env.PEER_TRACE) console.error("out", obj.type, obj.questionID || obj.answerID, obj.target || "");
  if (obj.type === 'CTP_RETURN' && obj.answerID === theirBootstrapQ)
    theirBootstrapAnswered = true;
  if (obj.type === 'CTP_BOOTSTRAP') {
    ourBootstraps.set(obj.questionID, false);
    lastBootstrapSent = obj.questionID;
  }
  if (obj.type === 'CTP_CALL' && ourBootstraps.get(obj.target) === false)
    callsOnOursEarly.set(obj.target, (callsOnOursEarly.get(obj.target) || 0) + 1);
};

let count = 0n;
const theCounter = Far('Counter', { incr: by => (count += by) });

// The C side's calls to Endo, answered the ways Endo answers.
const makeBootstrap = (getC) =>
  Far('EndoBootstrap', {
    add: (a, b) => a + b,
    echo: x => x,
    fail: () => {
      throw TypeError('bad thing');
    },
    later: () => new Promise(resolve => setTimeout(() => resolve('later'), 10)),
    rejectLater: () =>
      new Promise((_, reject) => setTimeout(() => reject(RangeError('rejected later')), 10)),
    // A promise inside the answer, rejected later as rejectLater is.
    pendingReject: () =>
      harden([new Promise((_, reject) => setTimeout(() => reject(RangeError('rejected later')), 10))]),
    never: () => new Promise(() => {}),
    // A promise inside the answer, settled later: CTP_RESOLVE.
    pending: () =>
      harden([new Promise(resolve => setTimeout(() => resolve('p later'), 10))]),
    // Waits for a promise of the C side's, passed inside a list.
    awaitIt: async list => `got ${await list[0]}`,
    // Disconnects (CTP_DISCONNECT) once this answer is on its way.
    hangUp: () => {
      setTimeout(() => capTP.abort(Error('hanging up')), 10);
      return 'bye';
    },
    getCounter: () => theCounter,
    makeAdder: base => Far('Adder', { plus: x => base + x }),
    wireReport: () =>
      harden({ callsOnYourBootstrapBeforeItsAnswer: BigInt(callsOnTheirsEarly) }),
    same: x => x,
    callBack: ref => E(ref).ping('from endo'),
    // Endo calls the C side, and reports what went wrong.
    runChecks: async () => {
      const c = getC();
      const problems = [];
      const check = (what, ok) => {
        if (!ok) problems.push(what);
      };
      try {
        check('add', (await E(c).add(40n, 2n)) === 42n);
        const kinds = harden({
          nul: null,
          yes: true,
          int: 7n,
          big: -12345678901234567890n,
          float: 1.5,
          str: 'héllo ✓ 𝄞',
          list: [1, 'two', [3n]],
          sym: Symbol.for('sym'),
          undef: undefined,
        });
        const back = await E(c).echo(kinds);
        check(`echo ${JSON.stringify(back, (k, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? String(v) : v))}`,
          back.nul === null && back.yes === true && back.int === 7n &&
          back.big === -12345678901234567890n && back.float === 1.5 &&
          back.str === kinds.str && back.list[2][0] === 3n &&
          back.sym === Symbol.for('sym') && back.undef === undefined &&
          'undef' in back);
        // Errors thrown on the C side arrive as rejections.
        const err = await E(c).fail().then(() => null, e => e);
        check(`fail: ${err}`, err && err.name === 'RangeError' && err.message === 'too big');
        // A C object passed back and forth keeps its identity.
        const self1 = await E(c).self();
        const self2 = await E(c).self();
        check('self identity', self1 === self2);
        const again = await E(c).echo(self1);
        check('echo of the C object', again === self1);
        // An Endo object called back from C.
        const pong = await E(c).call_back(Far('Pinged', { ping: s => `pong: ${s}` }));
        check(`call_back: ${pong}`, pong === 'pong: from server');
        // An Endo object sent to C and back is the same object.
        const mine = Far('Mine', {});
        check('Endo identity', (await E(c).echo(mine)) === mine);
        // A promise of the C side's, settled after the answer.
        const [soon] = await E(c).defer('soon');
        check('defer', (await soon) === 'soon');
        const [broken] = await E(c).defer_break('no');
        check('defer_break', (await broken.then(() => null, e => e)) instanceof Error);
        // A promise of the C side's broken with a libvat reason JS has no
        // name for rejects as an answer broken with it does: an Error
        // whose name and message tell the reasons apart.
        for (const kind of ['refused', 'killed', 'custom', 'value']) {
          const answered = await E(c).fail_with(kind).then(() => null, e => e);
          const [later] = await E(c).defer_with(kind);
          const settled = await later.then(() => null, e => e);
          check(`defer_with ${kind}: ${String(settled)}, fail_with: ${String(answered)}`,
            answered instanceof Error && settled instanceof Error &&
            settled.name === answered.name && settled.message === answered.message);
        }
        const refusedLater = await E(c).defer_with('refused').then(([p]) => p).then(() => null, e => e);
        check(`defer_with refused: ${refusedLater}`, refusedLater instanceof TypeError &&
          refusedLater.message === 'refused: echo');
        // Pipelined on an unanswered question.
        const sum = await E(E(c).self()).add(2n, 3n);
        check('pipelined', sum === 5n);
        // A JS string with a lone surrogate has no UTF-8 form: that call
        // fails alone, and the connection goes on.
        const lone = await E(c).echo('a\ud800b').then(() => null, e => e);
        check(`lone surrogate: ${lone}`, lone instanceof Error && lone.name === 'TypeError');
        check('a call after the lone surrogate', (await E(c).add(1n, 2n)) === 3n);
        // The C side's refs name their vat's label.
        const served = await c;
        check(`iface: ${getInterfaceOf(served)}`,
          getInterfaceOf(served) === 'Alleged: libvat-served');
        // Refusals a caller tells apart by name and message: a revoked
        // caretaker (JS has no name for it: Error, its message says so),
        // and a method a facet does not let through (TypeError).
        const revoked = await E(E(c).revoked()).add(1n, 2n).then(() => null, e => e);
        check(`revoked: ${revoked}`, revoked instanceof Error &&
          revoked.name === 'Error' && revoked.message === 'revoked');
        const facet = await E(c).facet();
        check('a facet lets add through', (await E(facet).add(1n, 2n)) === 3n);
        const refused = await E(facet).echo(1n).then(() => null, e => e);
        check(`refused: ${refused}`, refused instanceof TypeError &&
          refused.name === 'TypeError' && refused.message === 'refused: echo');
        // Pipelined on the C side's bootstrap question before its answer.
        // E(getBootstrap()) waits for the answer (getBootstrap is async: its
        // promise adopts the question's only once that settles), so the
        // calls go through CapTP's remote kit for the question itself.
        const freshBootstrap = capTP.getBootstrap();
        const bootQ = lastBootstrapSent;
        const { promise: onQuestion } = capTP.makeRemoteKit(bootQ);
        const viaBootstrap = E(onQuestion).add(1n, 2n);
        const chained = E(E(onQuestion).self()).add(3n, 4n);
        check('pipelined on the bootstrap', (await viaBootstrap) === 3n);
        check('pipelined on self() of the bootstrap', (await chained) === 7n);
        const early = callsOnOursEarly.get(bootQ) || 0;
        check(`calls on the bootstrap question ${bootQ} before its answer: ${early}`,
          early === 2);
        check('the bootstrap, awaited', (await E(freshBootstrap).add(5n, 6n)) === 11n);
      } catch (e) {
        problems.push(`threw: ${e}`);
      }
      return harden(problems);
    },
  });

const socket = net.connect(port, '127.0.0.1');
await new Promise((resolve, reject) => {
  socket.on('connect', resolve);
  socket.on('error', reject);
});
let capTP;
const bootstrap = makeBootstrap(() => capTP.getBootstrap());
capTP = makeCapTP('endo', obj => {
  watchOut(obj);
  writeNetstring(socket, obj);
}, bootstrap, {
  onReject: () => {},
});
const receive = obj => capTP.dispatch(obj);
// Frames held (hold-bootstrap=N), then given to CapTP one per event-loop
// turn, as a stream reader would, until none are left: Endo records its
// bootstrap answer a few microtasks after the CTP_BOOTSTRAP, and a call
// on that question dispatched in the same tick finds no answer yet.
let held = holdFor > 0 ? [] : null;
const queue = [];
let pumping = false;
const pump = async () => {
  pumping = true;
  while (queue.length > 0) {
    receive(queue.shift());
    await new Promise(resolve => setImmediate(resolve));
  }
  pumping = false;
};
readNetstrings(socket, obj => {
  watchIn(obj); // as it arrives, before any answer Endo sends to it
  if (held) {
    held.push(obj);
    const boot = held.find(f => f.type === 'CTP_BOOTSTRAP');
    const onBoot = boot
      ? held.filter(f => f.type === 'CTP_CALL' && f.target === boot.questionID)
      : [];
    if (onBoot.length >= holdFor) {
      queue.push(...held);
      held = null;
      pump();
    }
  } else if (pumping) {
    queue.push(obj);
  } else {
    receive(obj);
  }
});
socket.on('error', () => {});
socket.on('close', () => process.exit(0));
