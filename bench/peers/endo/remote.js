// The Endo peer of bench/remote.c: two Endo CapTP endpoints (the
// @endo/captp package-lock.json pins), in two Node processes, over
// 127.0.0.1 TCP, netstring-framed as libvat frames CapTP.
//
//   node remote.js [N] [P]
//
// The process forks a server that offers a counter as its bootstrap object
// (incr(by) answers the new count); it connects and calls it: N calls one
// at a time (round trips/s, p50/p99 latency), then P calls with up to
// 1,000 outstanding (calls/s), then P one-way sends (E.sendOnly) and one
// call whose answer must be the count after all of them (sends/s). Every
// answer is checked; three RESULT lines as bench/remote prints them.
import 'ses';
import net from 'node:net';
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';

lockdown({ errorTaming: 'unsafe', overrideTaming: 'severe', consoleTaming: 'unsafe' });

await import('@endo/eventual-send/shim.js');
const { makeCapTP } = await import('@endo/captp');
const { E, Far } = await import('@endo/far');

const WINDOW = 1000;

const usage = code => {
  (code ? console.error : console.log)(
    'usage: remote.js [N] [P]  (sequential calls, default 20000; pipelined calls and one-way sends, default 200000)',
  );
  process.exit(code);
};

const readNetstrings = (socket, onFrame) => {
  let buf = Buffer.alloc(0);
  socket.on('data', chunk => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
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
  const json = JSON.stringify(obj);
  socket.write(`${Buffer.byteLength(json)}:${json},`);
};

const connect = (socket, name, bootstrap) => {
  const ctp = makeCapTP(name, obj => writeNetstring(socket, obj), bootstrap, {
    onReject: () => {},
  });
  readNetstrings(socket, obj => ctp.dispatch(obj));
  socket.on('error', () => {});
  return ctp;
};

const serve = () => {
  let n = 0;
  const counter = Far('Counter', {
    incr: by => {
      n += by;
      return n;
    },
  });
  const server = net.createServer(socket => {
    socket.setNoDelay(true);
    connect(socket, 'server', counter);
    socket.on('close', () => process.exit(0));
  });
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
};

const quantile = (sorted, q) => sorted[Math.floor(sorted.length * q)];

const report = (workload, n, seconds, latencies, ok) => {
  latencies.sort((a, b) => a - b);
  console.log(
    `RESULT workload=${workload} workers=1 messages=${n} seconds=${seconds.toFixed(3)}` +
      ` rate=${Math.round(n / seconds)} p50_us=${(quantile(latencies, 0.5) * 1e3).toFixed(1)}` +
      ` p99_us=${(quantile(latencies, 0.99) * 1e3).toFixed(1)}` +
      ` peak_rss_mb=${Math.round(process.resourceUsage().maxRSS / 1024)}${ok ? '' : ' ok=0'}`,
  );
};

const sequential = async (counter, n) => {
  const lat = new Array(n);
  let ok = true;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    const v = await E(counter).incr(1);
    lat[i] = performance.now() - s;
    if (v !== i + 1) ok = false;
  }
  return { seconds: (performance.now() - t0) / 1e3, lat, ok };
};

const pipelined = (counter, p, base) =>
  new Promise(resolve => {
    const lat = new Array(p);
    let sent = 0;
    let answered = 0;
    let sum = 0;
    let ok = true;
    const t0 = performance.now();
    const sendOne = () => {
      const i = sent++;
      const s = performance.now();
      E(counter)
        .incr(1)
        .then(
          v => {
            sum += v;
            return v;
          },
          () => {
            ok = false;
          },
        )
        .then(() => {
          lat[i] = performance.now() - s;
          answered++;
          if (answered === p) {
            // The counts base+1 .. base+p, each answered once.
            const want = (p * (2 * base + p + 1)) / 2;
            resolve({ seconds: (performance.now() - t0) / 1e3, lat, ok: ok && sum === want });
          } else if (sent < p) sendOne();
        });
    };
    while (sent < WINDOW && sent < p) sendOne();
  });

// CapTP 4.5 has no call without an answer: E.sendOnly drops the promise,
// the server still answers.
const oneWay = async (counter, p, base) => {
  const t0 = performance.now();
  for (let i = 0; i < p; i++) E.sendOnly(counter).incr(1);
  const v = await E(counter).incr(0);
  return { seconds: (performance.now() - t0) / 1e3, lat: [0], ok: v === base + p };
};

const call = async (n, p) => {
  const child = fork(new URL(import.meta.url).pathname, ['--serve'], { stdio: 'inherit' });
  const port = await new Promise(resolve => child.once('message', resolve));
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => {
    socket.on('connect', resolve);
    socket.on('error', reject);
  });
  socket.setNoDelay(true);
  const ctp = connect(socket, 'client', undefined);
  const counter = await ctp.getBootstrap();
  const seq = await sequential(counter, n);
  const pipe = await pipelined(counter, p, n);
  const cast = await oneWay(counter, p, n + p);
  console.log(
    `remote: ${n} sequential calls in ${seq.seconds.toFixed(3)} s: ${Math.round(n / seq.seconds)} round trips/s`,
  );
  console.log(
    `remote: ${p} pipelined calls (${WINDOW} outstanding) in ${pipe.seconds.toFixed(3)} s: ${Math.round(p / pipe.seconds)} calls/s`,
  );
  report('remote_seq', n, seq.seconds, seq.lat, seq.ok);
  console.log(
    `remote: ${p} one-way sends, then a call, in ${cast.seconds.toFixed(3)} s: ${Math.round(p / cast.seconds)} sends/s`,
  );
  report('remote_pipe', p, pipe.seconds, pipe.lat, pipe.ok);
  report('remote_cast', p, cast.seconds, cast.lat, cast.ok);
  ctp.abort();
  socket.end();
  await new Promise(resolve => child.once('exit', resolve));
  process.exit(seq.ok && pipe.ok && cast.ok ? 0 : 1);
};

const args = process.argv.slice(2);
if (args[0] === '--serve') serve();
else {
  if (args.includes('-h') || args.includes('--help')) usage(0);
  // -w W: Node runs CapTP on one thread whatever W is.
  if (args[0] === '-w') args.splice(0, 2);
  const sizes = args.map(Number);
  if (sizes.length > 2 || sizes.some(s => !Number.isSafeInteger(s) || s <= 0)) usage(2);
  await call(sizes[0] ?? 20000, sizes[1] ?? 200000);
}
