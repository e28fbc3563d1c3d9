// CAF 0.17 peer of the libvat benchmark suite: event-based actors, one
// workload per executable name (build.sh links ring, counter, ... to one binary).
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace caf;
using std::int64_t;

using tok_atom = atom_constant<atom("tok")>;
using done_atom = atom_constant<atom("done")>;
using next_atom = atom_constant<atom("next")>;
using add_atom = atom_constant<atom("add")>;
using get_atom = atom_constant<atom("get")>;
using msg_atom = atom_constant<atom("msg")>;
using sum_atom = atom_constant<atom("sum")>;
using die_atom = atom_constant<atom("die")>;
using last_atom = atom_constant<atom("last")>;
using ping_atom = atom_constant<atom("ping")>;
using pong_atom = atom_constant<atom("pong")>;

namespace {

using clk = std::chrono::steady_clock;
double since(clk::time_point t0) {
  return std::chrono::duration<double>(clk::now() - t0).count();
}

std::string name;
int workers;

// Prints the RESULT line (messages < 0 / setup < 0 leave keys out) and ends
// the process without tearing down actors that are still alive.
[[noreturn]] void report(int64_t messages, double secs, double setup, bool ok) {
  std::printf("RESULT workload=%s workers=%d", name.c_str(), workers);
  if (messages >= 0)
    std::printf(" messages=%lld", static_cast<long long>(messages));
  std::printf(" seconds=%.6f", secs);
  if (messages >= 0 && secs > 0)
    std::printf(" rate=%.0f", messages / secs);
  if (setup >= 0)
    std::printf(" setup_seconds=%.6f", setup);
  std::printf("%s\n", ok ? "" : " ok=0");
  std::fflush(stdout);
  std::_Exit(ok ? 0 : 1);
}

actor handle(local_actor* self) { return actor_cast<actor>(self); }

// Knobs for sweeps (README.md): environment variable, or the default.
int64_t knob(const char* var, int64_t def) {
  const char* s = std::getenv(var);
  return s && *s ? std::strtoll(s, nullptr, 10) : def;
}

// Flow control for the many-to-one workloads, as libvat's counter and fanin
// do it: after each window of W messages the sender asks the receiver for
// its count (a request) and sends the next window when an answer comes, so
// at most two windows are in flight. W = 0 sends everything at once.
// VATPEER_WINDOW sets W; 256, the default, was the fastest of the sweep
// (README.md): sending all of a million adds in one turn made the counter
// 1.6x slower, its mailbox growing to the whole million.
// `send(i)` sends message i (1..total); `done(count)` gets the last answer.
struct window_state {
  int64_t sent = 0, pending = 0;
};

void send_window(stateful_actor<window_state>* self, actor to, int64_t total, int64_t w,
                 std::function<void(int64_t)> send, std::function<void(int64_t)> done) {
  auto& st = self->state;
  int64_t stop = w > 0 ? std::min(total, st.sent + w) : total;
  while (st.sent < stop)
    send(++st.sent);
  ++st.pending;
  self->request(to, infinite, get_atom::value).then([=](int64_t count) {
    auto& st = self->state;
    --st.pending;
    if (st.sent < total)
      send_window(self, to, total, w, send, done);
    else if (st.pending == 0)
      done(count);
  });
}

behavior windowed_sender(stateful_actor<window_state>* self, actor to, int64_t total,
                         int64_t w, std::function<void(int64_t)> send,
                         std::function<void(int64_t)> done) {
  send_window(self, to, total, w, send, done);
  if (w > 0 && self->state.sent < total)
    send_window(self, to, total, w, send, done);
  return {};
}

// -- ring N M -----------------------------------------------------------------

behavior ring_node(event_based_actor* self, actor next, int64_t n, actor driver) {
  return {[=](tok_atom, int64_t id, int64_t hops) {
    if (hops == n)
      self->send(driver, done_atom::value, id, hops);
    else
      self->send(next, tok_atom::value, id, hops + 1);
  }};
}

// The first node learns its successor last, once the ring is built.
behavior ring_first(event_based_actor* self, int64_t n, actor driver) {
  return {[=](next_atom, actor next) {
    self->become(ring_node(self, next, n, driver));
  }};
}

void ring(actor_system& sys, std::vector<int64_t> sz) {
  int64_t n = sz[0], m = sz[1], step = n / m;
  scoped_actor self{sys};
  auto t0 = clk::now();
  // Spawned lazily (no first turn until a message comes) unless
  // VATPEER_CAF_LAZY=0.
  auto spawn_node = [&](auto&&... xs) {
    return knob("VATPEER_CAF_LAZY", 1) ? sys.spawn<lazy_init>(xs...) : sys.spawn(xs...);
  };
  auto first = spawn_node(ring_first, n, actor{self});
  std::vector<actor> entries(m);
  entries[0] = first;
  actor next = first;
  for (int64_t i = n - 1; i > 0; --i) {
    next = spawn_node(ring_node, next, n, actor{self});
    if (i % step == 0 && i / step < m)
      entries[i / step] = next;
  }
  self->send(first, next_atom::value, next);
  double setup = since(t0);
  std::printf("ring: %lld actors spawned in %.3f s\n", (long long) n, setup);
  t0 = clk::now();
  for (int64_t j = 0; j < m; ++j)
    self->send(entries[j], tok_atom::value, j, int64_t{0});
  std::vector<bool> seen(m);
  bool ok = true;
  for (int64_t j = 0; j < m; ++j)
    self->receive([&](done_atom, int64_t id, int64_t hops) {
      ok = ok && hops == n && !seen[id];
      seen[id] = true;
    });
  double secs = since(t0);
  std::printf("ring: %lld tokens x %lld hops in %.3f s\n", (long long) m, (long long) n, secs);
  report(n * m, secs, setup, ok);
}

// -- counter K ------------------------------------------------------------------

struct count_state { int64_t n = 0; };

behavior counter_actor(stateful_actor<count_state>* self) {
  return {[=](add_atom, int64_t x) { self->state.n += x; },
          [=](get_atom) { return self->state.n; }};
}

void counter(actor_system& sys, std::vector<int64_t> sz) {
  int64_t k = sz[0];
  scoped_actor self{sys};
  actor main{self};
  auto t0 = clk::now();
  auto c = sys.spawn(counter_actor);
  sys.spawn([=](stateful_actor<window_state>* d) {
    return windowed_sender(
      d, c, k, knob("VATPEER_WINDOW", 256),
      [=](int64_t) { d->send(c, add_atom::value, int64_t{100}); },
      [=](int64_t v) {
        d->send(main, done_atom::value, v);
        d->send_exit(c, exit_reason::user_shutdown);
        d->quit();
      });
  });
  int64_t got = 0;
  self->receive([&](done_atom, int64_t v) { got = v; });
  double secs = since(t0);
  std::printf("counter: %lld adds, count %lld\n", (long long) k, (long long) got);
  report(k, secs, -1, got == 100 * k);
}

// -- fanin P K --------------------------------------------------------------------

struct fanin_state { int64_t count = 0, sum = 0; };

behavior consumer(stateful_actor<fanin_state>* self, int64_t total, actor main) {
  return {[=](msg_atom, int64_t v) {
            auto& s = self->state;
            s.sum += v;
            if (++s.count == total)
              self->send(main, done_atom::value, s.count, s.sum);
          },
          [=](get_atom) { return self->state.count; }};
}

behavior producer(stateful_actor<window_state>* self, actor to, int64_t k) {
  return windowed_sender(
    self, to, k, knob("VATPEER_WINDOW", 256),
    [=](int64_t i) { self->send(to, msg_atom::value, i); }, [=](int64_t) { self->quit(); });
}

void fanin(actor_system& sys, std::vector<int64_t> sz) {
  int64_t p = sz[0], k = sz[1];
  scoped_actor self{sys};
  auto t0 = clk::now();
  auto c = sys.spawn(consumer, p * k, actor{self});
  for (int64_t i = 0; i < p; ++i)
    sys.spawn(producer, c, k);
  int64_t count = 0, sum = 0;
  self->receive([&](done_atom, int64_t n, int64_t s) { count = n, sum = s; });
  double secs = since(t0);
  anon_send_exit(c, exit_reason::user_shutdown);
  std::printf("fanin: %lld messages, sum %lld\n", (long long) count, (long long) sum);
  report(p * k, secs, -1, count == p * k && sum == p * k * (k + 1) / 2);
}

// -- selfsend A K ---------------------------------------------------------------

struct self_state { int64_t received = 0; };

behavior self_sender(stateful_actor<self_state>* self, int64_t k, actor main) {
  self->send(self, msg_atom::value, int64_t{0});
  return {[=](msg_atom, int64_t v) {
    if (++self->state.received == k) {
      self->send(main, done_atom::value, k);
      self->quit();
    } else {
      self->send(self, msg_atom::value, v + 1);
    }
  }};
}

void selfsend(actor_system& sys, std::vector<int64_t> sz) {
  int64_t a = sz[0], k = sz[1], total = 0;
  scoped_actor self{sys};
  auto t0 = clk::now();
  for (int64_t i = 0; i < a; ++i)
    sys.spawn(self_sender, k, actor{self});
  for (int64_t i = 0; i < a; ++i)
    self->receive([&](done_atom, int64_t r) { total += r; });
  double secs = since(t0);
  std::printf("selfsend: %lld actors, %lld messages\n", (long long) a, (long long) total);
  report(a * k, secs, -1, total == a * k);
}

// -- skynet -----------------------------------------------------------------------

struct sky_state { int64_t sum = 0; int replies = 0; };

behavior skynet_node(stateful_actor<sky_state>* self, actor parent, int64_t num, int64_t size) {
  if (size == 1) {
    self->send(parent, sum_atom::value, num);
    return {}; // a leaf is done after its first turn
  }
  auto step = size / 10;
  for (int64_t i = 0; i < 10; ++i)
    self->spawn(skynet_node, handle(self), num + i * step, step);
  return {[=](sum_atom, int64_t v) {
    self->state.sum += v;
    if (++self->state.replies == 10) {
      self->send(parent, sum_atom::value, self->state.sum);
      self->quit();
    }
  }};
}

// skynet L: L leaves (a power of ten), L + L/10 + ... + 1 actors.
void skynet(actor_system& sys, std::vector<int64_t> sz) {
  int64_t l = sz[0];
  scoped_actor self{sys};
  auto t0 = clk::now();
  sys.spawn(skynet_node, actor{self}, int64_t{0}, l);
  int64_t sum = 0;
  self->receive([&](sum_atom, int64_t v) { sum = v; });
  double secs = since(t0);
  std::printf("skynet: sum %lld in %.3f s\n", (long long) sum, secs);
  report((10 * l - 1) / 9, secs, -1, sum == l * (l - 1) / 2);
}

// -- chain N ------------------------------------------------------------------------

// Each node spawns the rest of the chain linked to itself; the last reports.
// A node holds its neighbours: an actor that nobody refers to is collected
// (exit reason "unreachable") before the exit signal reaches it.
behavior chain_node(event_based_actor* self, actor prev, int64_t left, actor main) {
  actor next;
  if (left == 0)
    self->send(main, last_atom::value, handle(self));
  else
    next = self->spawn<linked>(chain_node, handle(self), left - 1, main);
  return {[=](die_atom) {
    (void) prev, (void) next;
    self->quit(exit_reason::user_shutdown);
  }};
}

void chain(actor_system& sys, std::vector<int64_t> sz) {
  int64_t n = sz[0];
  scoped_actor self{sys};
  auto t0 = clk::now();
  auto first = sys.spawn(chain_node, actor{}, n - 1, actor{self});
  actor last;
  self->receive([&](last_atom, actor l) { last = l; });
  self->monitor(last);
  double setup = since(t0);
  std::printf("chain: %lld actors spawned in %.3f s\n", (long long) n, setup);
  t0 = clk::now();
  self->send(first, die_atom::value);
  error reason;
  self->receive([&](down_msg& dm) { reason = dm.reason; });
  double secs = since(t0);
  std::printf("chain: last of %lld dead (%s) after %.3f s\n", (long long) n,
              to_string(reason).c_str(), secs);
  report(n, secs, setup, reason == exit_reason::user_shutdown);
}

// -- pingpong R -------------------------------------------------------------------

behavior ponger(event_based_actor* self) {
  return {[=](ping_atom, int64_t v) {
    self->send(actor_cast<actor>(self->current_sender()), pong_atom::value, v);
  }};
}

behavior pinger(event_based_actor* self, actor pong, int64_t r, actor main) {
  self->send(pong, ping_atom::value, int64_t{0});
  return {[=](pong_atom, int64_t v) {
    if (v + 1 == r) {
      self->send(main, done_atom::value, v + 1);
      self->send_exit(pong, exit_reason::user_shutdown);
      self->quit();
    } else {
      self->send(pong, ping_atom::value, v + 1);
    }
  }};
}

void pingpong(actor_system& sys, std::vector<int64_t> sz) {
  int64_t r = sz[0], got = 0;
  scoped_actor self{sys};
  auto t0 = clk::now();
  sys.spawn(pinger, sys.spawn(ponger), r, actor{self});
  self->receive([&](done_atom, int64_t v) { got = v; });
  double secs = since(t0);
  std::printf("pingpong: %lld round trips\n", (long long) got);
  report(r, secs, -1, got == r);
}

// -- spawn N --------------------------------------------------------------------

void one_turn(event_based_actor*) {
  // no behavior: the actor stops normally after this first turn
}

void spawn_n(actor_system& sys, std::vector<int64_t> sz) {
  int64_t n = sz[0];
  auto t0 = clk::now();
  for (int64_t i = 0; i < n; ++i)
    sys.spawn(one_turn);
  sys.await_all_actors_done();
  double secs = since(t0);
  std::printf("spawn: %lld actors gone in %.3f s\n", (long long) n, secs);
  report(n, secs, -1, true);
}

// -- flood N ----------------------------------------------------------------------

// The consumer's work per message, the same in every program of the flood
// workload: 28 rounds of xorshift32 (13, 17, 5) over the value's low 32
// bits, about 100 ns (see bench/flood.c).
uint32_t flood_work(int64_t v) {
  auto x = static_cast<uint32_t>(v);
  for (int i = 0; i < 28; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
  }
  return x;
}

struct flood_state { int64_t count = 0, sum = 0; uint32_t digest = 0; };

behavior flood_consumer(stateful_actor<flood_state>* self, int64_t n, actor main) {
  return {[=](msg_atom, int64_t v) {
    auto& s = self->state;
    s.digest ^= flood_work(v);
    s.sum += v;
    if (++s.count == n) {
      self->send(main, done_atom::value, s.count, s.sum, int64_t{s.digest});
      self->quit();
    }
  }};
}

struct producer_state { int64_t next = 1; };

// Sends 1..n, `slice` per turn with a message to itself in between (0: all
// of them in its first turn, as fanin's producers do).
behavior flood_producer(stateful_actor<producer_state>* self, actor to, int64_t n,
                        int64_t slice) {
  self->send(self, next_atom::value);
  return {[=](next_atom) {
    auto& next = self->state.next;
    int64_t stop = slice > 0 && next + slice <= n ? next + slice : n + 1;
    for (; next < stop; ++next)
      self->send(to, msg_atom::value, next);
    if (next <= n)
      self->send(self, next_atom::value);
    else
      self->quit();
  }};
}

void flood(actor_system& sys, std::vector<int64_t> sz) {
  int64_t n = sz[0];
  // 1,000 per turn was faster than all in one turn (README.md's sweep).
  int64_t slice = knob("VATPEER_FLOOD_SLICE", 1000);
  scoped_actor self{sys};
  auto t0 = clk::now();
  auto c = sys.spawn(flood_consumer, n, actor{self});
  sys.spawn(flood_producer, c, n, slice);
  int64_t count = 0, sum = 0, digest = 0;
  self->receive([&](done_atom, int64_t k, int64_t s, int64_t d) {
    count = k, sum = s, digest = d;
  });
  double secs = since(t0);
  std::printf("flood: %lld messages, sum %lld, digest %08llx, slice %lld\n",
              (long long) count, (long long) sum, (long long) digest, (long long) slice);
  report(n, secs, -1, count == n && sum == n * (n + 1) / 2);
}

struct workload {
  std::vector<const char*> names;
  std::vector<int64_t> defs;
  void (*run)(actor_system&, std::vector<int64_t>);
};

const std::map<std::string, workload> workloads = {
  {"ring", {{"N", "M"}, {1000000, 200}, ring}},
  {"counter", {{"K"}, {3000000}, counter}},
  {"fanin", {{"P", "K"}, {4, 1000000}, fanin}},
  {"selfsend", {{"A", "K"}, {8, 10000000}, selfsend}},
  {"skynet", {{"L"}, {1000000}, skynet}},
  {"chain", {{"N"}, {100000}, chain}},
  {"pingpong", {{"R"}, {1000000}, pingpong}},
  {"spawn", {{"N"}, {1000000}, spawn_n}},
  {"flood", {{"N"}, {10000000}, flood}},
};

[[noreturn]] void usage(const workload& w, int code) {
  std::printf("usage: %s [-w W]", name.c_str());
  for (auto n : w.names)
    std::printf(" %s", n);
  std::printf("\n  -w W  worker threads (scheduler.max-threads), default %u\n",
              std::thread::hardware_concurrency());
  for (size_t i = 0; i < w.names.size(); ++i)
    std::printf("  %s     default %lld\n", w.names[i], (long long) w.defs[i]);
  std::exit(code);
}

bool positive(const char* s, int64_t& out) {
  char* end;
  long long v = std::strtoll(s, &end, 10);
  out = v;
  return *s && !*end && v > 0;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  name = args.empty() ? argv[0] : argv[0];
  name = name.substr(name.find_last_of('/') + 1);
  if (!workloads.count(name)) {
    if (args.empty() || !workloads.count(args[0])) {
      std::printf("usage: vatpeer-caf WORKLOAD [-w W] SIZES...  (ring counter fanin "
                  "selfsend skynet chain pingpong spawn flood)\n");
      return 2;
    }
    name = args[0];
    args.erase(args.begin());
  }
  const workload& w = workloads.at(name);
  workers = static_cast<int>(std::thread::hardware_concurrency());
  size_t i = 0;
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help"))
    usage(w, 0);
  if (!args.empty() && args[0] == "-w") {
    int64_t v;
    if (args.size() < 2 || !positive(args[1].c_str(), v))
      usage(w, 2);
    workers = static_cast<int>(v);
    i = 2;
  }
  if (args.size() - i > w.defs.size())
    usage(w, 2);
  auto sizes = w.defs;
  for (size_t j = 0; i + j < args.size(); ++j)
    if (!positive(args[i + j].c_str(), sizes[j]))
      usage(w, 2);
  if (name == "skynet") {
    int64_t p = 1;
    while (p < sizes[0])
      p *= 10;
    if (p != sizes[0]) {
      std::printf("skynet: L must be a power of ten\n");
      usage(w, 2);
    }
  }
  if (name == "ring" && sizes[1] > sizes[0]) {
    std::printf("ring: M must not exceed N\n");
    usage(w, 2);
  }
  actor_system_config cfg;
  cfg.set("scheduler.max-threads", workers);
  // Scheduler knobs for sweeps (README.md); unset, CAF's defaults.
  if (const char* policy = std::getenv("VATPEER_CAF_POLICY"))
    cfg.set("scheduler.policy", atom_from_string(policy));
  if (int64_t t = knob("VATPEER_CAF_THROUGHPUT", 0); t > 0)
    cfg.set("scheduler.max-throughput", static_cast<size_t>(t));
  // VATPEER_CAF_SET="key=N,key=N": other numeric settings, e.g. the work
  // stealing's polling (work-stealing.aggressive-poll-attempts=N); a key
  // ending in -duration takes microseconds.
  if (const char* set = std::getenv("VATPEER_CAF_SET")) {
    std::string all = set;
    for (size_t at = 0; at < all.size();) {
      size_t end = all.find(',', at), eq = all.find('=', at);
      if (end == std::string::npos)
        end = all.size();
      if (eq < end) {
        std::string key = all.substr(at, eq - at);
        auto v = std::strtoll(all.substr(eq + 1, end - eq - 1).c_str(), nullptr, 10);
        if (key.size() > 9 && key.compare(key.size() - 9, 9, "-duration") == 0)
          cfg.set(key, timespan{std::chrono::microseconds{v}});
        else
          cfg.set(key, static_cast<size_t>(v));
      }
      at = end + 1;
    }
  }
  actor_system sys{cfg};
  w.run(sys, sizes);
}
