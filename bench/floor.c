/* floor [N] [P]: what two processes on 127.0.0.1 can do with no runtime at
 * all, the row bench/remote.sh sets under libvat and its peers.
 *
 * A server process and a client process, one thread each, TCP
 * with Nagle off, 64-byte records (a kind, a sequence number and a
 * value). The server adds each record's value to its count and, for a
 * call, answers with a record holding the count. The same three patterns
 * as bench/remote.c:
 *   remote_seq   N calls one at a time: write one, read its answer;
 *   remote_pipe  P calls with up to WINDOW outstanding, written and read
 *                in runs (as many whole records as one read returns);
 *   remote_cast  P one-way records, then one call whose answer must be
 *                the count after all of them.
 * Every answer is checked. Output: RESULT lines as bench/remote.c prints
 * them (rate, p50/p99 latency per call for the sequential pattern).
 * `-w W` is accepted and ignored, so the runner can pass its options to
 * every system alike.
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { RECORD = 64, WINDOW = 1000, RUN = 256 };
enum { KIND_CALL = 1, KIND_CAST = 2 };

typedef struct {
  uint32_t kind;
  uint32_t pad;
  uint64_t seq;
  int64_t value;
  char rest[RECORD - 24];
} record;

_Static_assert(sizeof(record) == RECORD, "a record is 64 bytes");

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      die("write");
    p += n;
    len -= (size_t)n;
  }
}

/* Reads at least `min` and at most `max` bytes, whole records only (a
 * record split by the stream is read to its end). Returns the bytes read;
 * 0 at end of stream. It polls, never sleeping in the kernel: a runtime
 * whose idle workers spin before they park takes no wake-up on its path
 * either, and a floor that paid one was beaten by one. */
static size_t read_records(int fd, char *buf, size_t min, size_t max) {
  size_t have = 0;
  while (have < min || have % RECORD != 0) {
    ssize_t n = recv(fd, buf + have, max - have, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
      continue;
    if (n < 0)
      die("read");
    if (n == 0)
      return 0;
    have += (size_t)n;
  }
  return have;
}

static void no_delay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    die("setsockopt");
}

static int serve(int listener) {
  int fd = accept(listener, NULL, NULL);
  if (fd < 0)
    die("accept");
  no_delay(fd);
  static record in[RUN], out[RUN];
  int64_t count = 0;
  for (;;) {
    size_t got = read_records(fd, (char *)in, RECORD, sizeof in);
    if (got == 0)
      break;
    size_t answers = 0;
    for (size_t i = 0; i < got / RECORD; i++) {
      count += in[i].value;
      if (in[i].kind == KIND_CALL)
        out[answers++] = (record){.kind = KIND_CALL, .seq = in[i].seq,
                                  .value = count};
    }
    if (answers > 0)
      write_all(fd, out, answers * RECORD);
  }
  close(fd);
  return 0;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(const char *workload, uint64_t n, double seconds,
                   double p50_us, double p99_us, bool ok) {
  printf("RESULT workload=%s workers=1 messages=%" PRIu64
         " seconds=%.3f rate=%.0f p50_us=%.1f p99_us=%.1f%s\n",
         workload, n, seconds, (double)n / seconds, p50_us, p99_us,
         ok ? "" : " ok=0");
}

/* One call at a time; the answer's count is the total of the values. */
static bool sequential(int fd, uint64_t n, int64_t *total) {
  double *lat = malloc(n * sizeof *lat);
  if (lat == NULL)
    die("malloc");
  bool ok = true;
  record r, a;
  double t0 = now();
  for (uint64_t i = 0; i < n; i++) {
    double s = now();
    r = (record){.kind = KIND_CALL, .seq = i, .value = 1};
    write_all(fd, &r, sizeof r);
    if (read_records(fd, (char *)&a, RECORD, RECORD) != RECORD)
      die("the server hung up");
    *total += 1;
    ok &= a.seq == i && a.value == *total;
    lat[i] = (now() - s) * 1e6;
  }
  double seconds = now() - t0;
  qsort(lat, n, sizeof *lat, compare_doubles);
  report("remote_seq", n, seconds, lat[n / 2], lat[n * 99 / 100], ok);
  free(lat);
  return ok;
}

/* Up to WINDOW calls outstanding, written and read in runs. */
static bool pipelined(int fd, uint64_t p, int64_t *total) {
  static record out[RUN], in[RUN];
  uint64_t sent = 0, answered = 0;
  bool ok = true;
  int64_t base = *total;
  double t0 = now();
  while (answered < p) {
    uint64_t room = WINDOW - (sent - answered), k = 0;
    while (k < room && k < RUN && sent + k < p) {
      out[k] = (record){.kind = KIND_CALL, .seq = sent + k, .value = 1};
      k++;
    }
    if (k > 0) {
      write_all(fd, out, k * RECORD);
      sent += k;
    }
    size_t got = read_records(fd, (char *)in, RECORD, sizeof in);
    if (got == 0)
      die("the server hung up");
    for (size_t i = 0; i < got / RECORD; i++, answered++)
      ok &= in[i].seq == answered &&
            in[i].value == base + (int64_t)answered + 1;
  }
  double seconds = now() - t0;
  *total += (int64_t)p;
  report("remote_pipe", p, seconds, 0, 0, ok);
  return ok;
}

/* P one-way records, then a call whose answer must count all of them. */
static bool casts(int fd, uint64_t p, int64_t *total) {
  static record out[RUN];
  record a;
  double t0 = now();
  for (uint64_t sent = 0; sent < p;) {
    uint64_t k = 0;
    while (k < RUN && sent + k < p) {
      out[k] = (record){.kind = KIND_CAST, .seq = sent + k, .value = 1};
      k++;
    }
    write_all(fd, out, k * RECORD);
    sent += k;
  }
  record r = {.kind = KIND_CALL, .seq = p, .value = 0};
  write_all(fd, &r, sizeof r);
  if (read_records(fd, (char *)&a, RECORD, RECORD) != RECORD)
    die("the server hung up");
  double seconds = now() - t0;
  *total += (int64_t)p;
  bool ok = a.value == *total;
  report("remote_cast", p, seconds, 0, 0, ok);
  return ok;
}

int main(int argc, char **argv) {
  uint64_t sizes[2] = {20000, 200000};
  int nsizes = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
      i++; /* one thread a side, whatever the runner asks */
      continue;
    }
    char *end;
    unsigned long long v = strtoull(argv[i], &end, 10);
    if (argv[i][0] == '-' || *end != '\0' || v == 0 || nsizes == 2) {
      fprintf(stderr, "usage: floor [-w W] [N] [P]  (sequential calls, "
                      "default 20000; pipelined calls and one-way sends, "
                      "default 200000)\n");
      return 2;
    }
    sizes[nsizes++] = v;
  }

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0)
    die("socket");
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, (struct sockaddr *)&addr, &len) != 0)
    die("listen");
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    die("fork");
  if (pid == 0)
    _exit(serve(listener));
  close(listener);

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
    die("connect");
  no_delay(fd);
  int64_t total = 0;
  bool ok = sequential(fd, sizes[0], &total);
  ok &= pipelined(fd, sizes[1], &total);
  ok &= casts(fd, sizes[1], &total);
  close(fd);
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "floor: the server failed\n");
    ok = false;
  }
  return ok ? 0 : 1;
}
