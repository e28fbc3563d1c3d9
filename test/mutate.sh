#!/usr/bin/env bash
# Mutation testing: does the suite catch plausible one-line bugs?
#
# Each mutation below replaces one exact line of a source file (compared
# with leading and trailing blanks ignored; the indentation is kept) by
# another. A mutation may edit a few lines (same name on several rows);
# every edit must match exactly one line, or the script stops and says
# which pattern no longer matches, so the list cannot rot silently.
#
# The mutations are applied to a scratch copy of the working tree (its
# tracked and untracked, not ignored files; no git repository) under a
# temporary directory, built there (incrementally: one build directory
# reused), and run against the suites named on their row with a time
# limit. Neither the working tree nor its .git is written to. CI runs only
# `-n` (every pattern still matches): a full run is slow.
#
# Usage: test/mutate.sh [-k] [-t SECONDS] [-j JOBS] [NAME...]
#   NAME...   only these mutations (default: all)
#   -t        time limit per mutation's test run (default 300)
#   -k        keep the scratch tree and print its path
#   -l        list the mutations and exit
#   -n        only check that every pattern matches exactly once
#   -j        ninja jobs (default 1)
# Run it niced on a shared machine: nice -n 19 test/mutate.sh
# Output: one line per mutation, "caught" or "SURVIVED", then a total.
# Exit status: 0 when every mutation was caught, 1 if any survived, 2 on
# a broken list or build.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIMIT=300
KEEP=0
JOBS=1
LIST=0
CHECK=0
while getopts "klnt:j:" opt; do
  case $opt in
  k) KEEP=1 ;;
  l) LIST=1 ;;
  n) CHECK=1 ;;
  t) LIMIT=$OPTARG ;;
  j) JOBS=$OPTARG ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))

# name | file | suites | exact line | replacement
# Suites are the runner's names; several separated by spaces. Lines that
# start with '#' are comments.
read -r -d '' MUTATIONS <<'EOF' || true
commit-stop-before-sends|src/core/turn.c|exits|if (t->effects_head == NULL)|if (t->stop) vat__terminate(t->worker, t->vat, t->reason); if (t->effects_head == NULL)
commit-stop-before-sends|src/core/turn.c|exits|if (t->stop) {|if (0) {
commit-skips-effects|src/core/turn.c|exits promise timer|e->commit(t, e);|(void)e;
commit-own-sends-first|src/core/turn.c|turn send|if (!took) /* others' messages that came first go first */|if (0)
failed-turn-commits|src/core/turn.c|turn exits|if (t.failed) {|if (0) {
batch-ignores-budget|src/core/turn.c|turn sched|budget--;|(void)budget;
dead-vat-runs-turns|src/core/turn.c|turn send exits|if (vat__is_dead(v))|if (0)
stop-ignored|src/core/turn.c|turn exits|turn->stop = true;|(void)turn;
# vat_fail's null check, as if it were gone (vat_stop_with has the same line).
fail-null-accepted|src/core/turn.c|turn|int vat_fail(vat_turn *turn, vat_value reason) {|int vat_fail(vat_turn *turn, vat_value reason) { if (vat__check_turn(turn) == VAT_OK && vat_is_null(reason)) { turn->failed = true; turn->reason = reason; return VAT_OK; }
exits-links-before-stop-callbacks|src/exits/exits.c|exits|if (v->ext->first_stop)|vat__xmap_each(&x0->links, notify_link, args0); vat__xmap_each(&x0->watchers, notify_watch, args0); vat__xmap_clear(&x0->links); vat__xmap_clear(&x0->watchers); if (v->ext->first_stop)
exits-links-before-stop-callbacks|src/exits/exits.c|exits|(void)reason; /* v->ext->exit_reason holds it */|(void)reason; struct vat__exits *x0 = vat__exits_of(v); void *args0[2] = {w, v};
trap-null-keeps-trapping|src/exits/exits.c|exits|vat__exits_set_trap(x, receiver);|if (receiver) vat__exits_set_trap(x, receiver);
trap-null-keeps-trapping|src/exits/exits.c|exits|x->trap_fn = receiver ? on_exit : NULL;|if (receiver) x->trap_fn = on_exit;
trap-ignores-kill|src/exits/signals.c|exits|bool kill = !s->link && vat__exits_is_kill(s->reason);|bool kill = false;
normal-exit-kills|src/exits/signals.c|exits supervisor|if (vat_reason_is_normal(s->reason) && s->from_vat != v)|if (0)
rule1-ignored|src/exits/signals.c|exits|if (x == NULL \|\| !vat__xmap_remove(&x->links, (uintptr_t)s->from_vat))|if (x != NULL) vat__xmap_remove(&x->links, (uintptr_t)s->from_vat); if (0)
demonitor-ignored|src/exits/signals.c|exits|return; /* demonitored: never fires */|;
ended-vat-keeps-its-monitors|src/exits/exits.c|exits|vat__xmap_each(&x->held, release_held, NULL);|(void)x;
monitor-null-fn-accepted|src/exits/exits.c|exits|if (target == NULL \|\| on_down == NULL \|\| id == NULL)|if (target == NULL \|\| id == NULL)
link-noproc-missing|src/exits/signals.c|exits|vat__exits_send_exit(w, s->from, target->vat, gone_reason(target));|(void)w; (void)s; (void)target;
monitor-noproc-missing|src/exits/signals.c|exits|vat__exits_send_down(w, ((watch_sig *)sig)->w, gone_reason(target));|(void)w; (void)sig; (void)target;
unlinking-ignored|src/exits/signals.c|exits|if (vat__xmap_get(&x->unlinking, (uintptr_t)s->from->vat) == NULL) {|if (1) {
dead-letter-counted-on-sender|src/core/deliver.c|send|if (w != NULL && w->sys == sys)|if (w != NULL)
dead-letter-hook-skipped|src/core/deliver.c|send|call_hook(sys, m);|(void)m;
host-send-after-close|src/core/deliver.c|system send|if (w == NULL && state != VAT__RUNNING)|if (0)
every-replays-missed|src/timer/timer.c|timer|t->deadline = now + t->period;|;
timers-fire-in-shutdown|src/timer/timer.c|timer|if (s == NULL \|\| vat__system_state(sys) != VAT__RUNNING)|if (s == NULL)
idle-fires-once|src/timer/idle.c|timer|vat_send(turn, own->idle_to, own->idle_fn, own->idle_arg);|vat_send(turn, own->idle_to, own->idle_fn, own->idle_arg); own->idle_ns = 0;
idle-never-silent|src/timer/idle.c|timer|own->silent = v->turns == own->snap ? own->silent + 1 : 0;|own->silent = own->silent + 1;
# A dead owner's timers are cancelled by its terminate hook under the
# service lock; this check only matters between the vat's `dead` flag and
# that hook, while a firing batch holds the lock (test_timer.c pauses the
# timer thread inside a batch to make that happen).
timer-dead-owner-fires|src/timer/timer.c|timer|if (vat__is_dead(t->owner)) {|if (0) {
every-zero-period|src/timer/timer.c|timer|if (!(period_s > 0))|if (period_s < 0)
promise-timeout-not-cancelled|src/promise/promise.c|promise|vat_timer_cancel(timeout);|(void)timeout;
membrane-error-unwrapped|src/lib/caps/membrane.c|caps|int rc = wrap(turn, m, vat_error_payload(v), to, &payload);|vat_value payload = vat_error_payload(v); int rc = VAT_OK;
membrane-error-unwrapped|src/lib/caps/membrane.c|caps|vat_value payload;|
membrane-record-unwrapped|src/lib/caps/membrane.c|caps|case VAT_T_RECORD: {|case VAT_T_RECORD: if (vat_type_of(v) == VAT_T_RECORD) { *out = v; return VAT_OK; } {
membrane-promise-passes|src/lib/caps/membrane.c|caps|case VAT_T_PROMISE:|case VAT_T_PROMISE: *out = v; return VAT_OK;
membrane-reuses-wrong-side|src/lib/caps/membrane.c|caps|if (p != NULL && p->side == to) {|if (p != NULL) {
revoked-membrane-relays|src/lib/caps/membrane.c|caps|if (caps__is_revoked(p->m->cell)) {|if (0) {
run-ignores-max-ns|src/loop/host.c|host|if (max_ns && vat__monotonic_ns() - start >= max_ns)|if (0)
run-ignores-max-turns|src/loop/host.c|host|if (max_turns && done >= max_turns)|if (0)
run-until-quiescent-ignores-timers|src/loop/host.c|host timer|} while ((res.more \|\| timer_due(sys)) &&|} while ((res.more) &&
advance-clock-on-real-system|src/loop/host.c|host|if (!sys->virtual_clock)|if (0)
mailbox-push-always-schedules|src/core/mailbox.c|mailbox send turn|return below == NULL;|return true;
mailbox-idle-with-mail|src/core/mailbox.c|mailbox send|if (mb->head != NULL)|if (0)
sup-intensity-off-by-one|src/lib/supervisor.c|supervisor|if (s->nstamps >= s->max_restarts)|if (s->nstamps > s->max_restarts)
sup-window-never-slides|src/lib/supervisor.c|supervisor|if (now - s->stamps[i] <= s->max_seconds)|if (1)
sup-transient-always-restarts|src/lib/supervisor.c|supervisor|return !vat_reason_is_orderly(reason);|return true;
sup-temporary-restarted-with-group|src/lib/supervisor.c|supervisor|if (!s->kids[j].removed && s->kids[j].spec.restart != VAT_TEMPORARY)|if (!s->kids[j].removed)
sup-failed-start-not-retried|src/lib/supervisor.c|supervisor|while (!start_kid(turn, k)) {|if (!start_kid(turn, k)) {
# issue: exits and counts
unlink-stale-ack-ends-unlinking|src/exits/signals.c|exits|if (x && (uintptr_t)vat__xmap_get(&x->unlinking, peer) == s->id)|if (x)
exit-never-overtakes|src/exits/signals.c|exits|return exit_ends(v, s->from_vat, s->reason, s->link);|return false;
link-exit-never-overtakes|src/exits/signals.c|exits|return exit_ends(v, from->vat, m->value, true);|return false;
host-exit-never-alerts|src/exits/exits.c|exits|if (rc == VAT_OK && vat__exits_may_end(target->vat, NULL, reason, false))|if (0)
host-monitor-unsettled-at-shutdown|src/exits/exits.c|exits|if (wa->watcher == NULL \|\| wa->watcher->vat->sys != v->sys)|if (wa->watcher != NULL && wa->watcher->vat->sys != v->sys)
muted-vat-not-unparked|src/core/deliver.c|exits|if (vat__system_state(sys) < VAT__STOPPED && vat__overload_unpark(v))|if (0)
urgent-self-send-hoisted|src/core/send.c|send|if (to->vat == turn->vat) {|if (0) {
dropped-request-uncounted|src/core/deliver.c|observe|vat__count(&w->dead_letters, 1);|if (m->fn != vat__dispatch_signal) vat__count(&w->dead_letters, 1);

# issue: API edges
promise-self-resolution-follows-itself|src/promise/promise.c|promise|if (state == ST_RESOLVED && follow == p) {|if (0) {
handed-resolver-not-owed|src/promise/request.c|promise|if (p->owner != turn->vat)|if (0)
timer-heap-skips-fourth-child|src/timer/heap.c|timer|size_t end = first + 4 < s->n ? first + 4 : s->n;|size_t end = first + 3 < s->n ? first + 3 : s->n;
sup-down-keeps-deadline-live|src/lib/supervisor.c|supervisor|k->attempt++;|(void)k;
sup-deadline-ignores-attempt|src/lib/supervisor.c|supervisor|if (k->attempt != d->attempt)|if (0)

# issue: burst memory
# Home nodes left to the collector like strays: a chunk kept by one node.
msgpool-drops-home-nodes|src/core/msgpool.c|msgpool memory|if (depot != NULL && is_home(depot, m)) {|if (0) {
# No budget: every node a home node, none ever let go.
msgpool-home-unbounded|src/core/msgpool.c|msgpool memory|return depot->pools * cap + (size_t)DEPOT_CAP * BATCH;|return SIZE_MAX;

# issue: queue bound
sender-count-never-marks|src/core/overload.c|overload|mark_overloaded(to, f);|(void)f;
queue-len-walks-counted|src/core/overload_api.c|overload|if (flags & VAT__COUNTED) {|if (0) {
# A count that stopped at a mark taken for the queue's length.
queue-len-reads-the-mark|src/core/overload.c|exits|if (!exact) {|if (0) {


# issue: backpressure promises
low-mark-releases-at-low|src/core/overload.c|overload|} else if (queued < low_of(f)) {|} else if (queued <= low_of(f)) {
send-wait-not-counted|src/core/overload.c|overload|f->waiters++;|(void)f;
urgent-mutes-sender|src/core/overload.c|overload|if (ordinary && w != NULL && t != NULL && t->worker == w && t->vat != to &&|if (w != NULL && t != NULL && t->worker == w && t->vat != to &&
hoist-tail-at-urgent|src/core/mailbox.c|overload|mb->tail = nh ? nt : ut;|mb->tail = ut;
host-send-no-wake|src/sched/place.c|overload|vat__inject_push(&s->inject, t, t, 1);|vat__inject_push(&s->inject, t, t, 1); return;
ended-vat-keeps-mutes|src/core/vat.c|overload|if (was & VAT__OVERLOADED)|if (0)
ended-vat-keeps-mutes|src/core/overload.c|overload|if (atomic_load_explicit(&v->flags, memory_order_relaxed) & VAT__OVERLOADED) {|if ((atomic_load_explicit(&v->flags, memory_order_relaxed) & (VAT__OVERLOADED \| VAT__DEAD)) == VAT__OVERLOADED) {
requeue-ignores-overload|src/sched/place.c|overload sched|(!overloaded \|\| (r->busy_len == 0 && r->next == NULL)))|true)
steal-skips-fresh|src/sched/pick.c|fresh sched|vat__task *t = steal_fresh(r, victim);|vat__task *t = NULL;
injected-share-no-wake|src/sched/pick.c|sched stress|if (n > 1) /* they were anyone's to take: let a parked runner see them */|if (0)
seeded-draw-skips-shared-queue|src/sched/pick.c|host trace|(t = vat__inject_pop(&s->inject)) != NULL;)|(t = NULL) != NULL;)
runq-overflow-count-short|src/sched/place.c|runq sched stress|vat__inject_push(&r->sched->inject, first, t, n + 1);|vat__inject_push(&r->sched->inject, first, t, n);
pick-strands-busy-vat|src/sched/pick.h|sched|return vat__take_private(r);|return NULL;
# issue: process boundary (pipelining on an answer ref)
pipe-chain-outer-answer|src/net/slots.c|net|while (net_pipe_via(value, &answer, &value))|if (net_pipe_via(value, &answer, &value))
pipe-chain-no-own-question|src/net/slots.c|net|net_pipe_parse(args, &args, &pipe);|if (!via) net_pipe_parse(args, &args, &pipe);
# issue: process boundary (a bad argument fails only its call)
bad-call-any-failure|src/net/conn.c|net|if (m.value_failed && (rc == VAT_EDECODE \|\| rc == VAT_ENOTFOUND)) {|if (rc == VAT_EDECODE \|\| rc == VAT_ENOTFOUND) {
bad-call-slot-ends|src/net/conn.c|net|if (m.value_failed && (rc == VAT_EDECODE \|\| rc == VAT_ENOTFOUND)) {|if (m.value_failed && rc == VAT_EDECODE) {
bad-result-not-broken|src/net/conn.c|net|m.is_reject = true;|m.is_reject = false;
value-failed-on-shape|src/captp/message.c|captp|m->value_failed = rc != VAT_OK && in_value;|m->value_failed = rc != VAT_OK;
value-failed-never|src/captp/value.c|net|*in_value = true;|*in_value = false;
weak-atom-link-not-registered|src/value/atom.c|value captp|GC_general_register_disappearing_link(link_of(s), a) != GC_SUCCESS) {|false) {
weak-atom-uncollectable|src/value/atom.c|value captp|weak ? GC_MALLOC_ATOMIC(size) : GC_MALLOC_ATOMIC_UNCOLLECTABLE(size);|GC_MALLOC_ATOMIC_UNCOLLECTABLE(size);
weak-atom-lookup-misses-weak|src/value/atom.c|value captp|: weak_match(s, name, len);|: NULL;
weak-atom-rebuild-leaves-links|src/value/atom.c|value captp|if (slots[i].state != SLOT_WEAK \|\| dest[i] == SIZE_MAX)|if (1)
captp-record-keys-strong|src/captp/decode.c|captp|const vat_atom *a = vat_atom_intern_weak_n(key, len);|const vat_atom *a = vat_atom_intern_n(key, len);
net-method-names-strong|src/net/calls.c|net|if ((a = vat_atom_intern_weak_n(s, len)) != NULL)|if ((a = vat_atom_intern_n(s, len)) != NULL)
trace-turn-forgets-weak-name|src/core/trace.h|trace|r->names[h & r->mask] = e->what;|(void)h;
trace-names-not-scanned|src/core/trace.c|trace|r->names = vat__oom_check(GC_MALLOC(slots * sizeof *r->names), "a trace ring");|r->names = vat__oom_check(GC_MALLOC_ATOMIC(slots * sizeof *r->names), "a trace ring"); memset(r->names, 0, slots * sizeof *r->names);
# issue: process boundary (friendlier at the edges)
iface-ignores-label|src/net/slots.c|net|*iface = iface_of(c, ref);|*iface = "Alleged: libvat";
iface-keeps-control-chars|src/net/slots.c|net|if (len == 0 \|\| at[0] < 0x20 \|\| at[0] == 0x7F) {|if (len == 0) {
iface-cache-stale|src/net/slots.c|net|if (label == c->iface_label)|if (c->iface != NULL)
refused-not-typeerror|src/net/refusals.c|net|if (code == vat_atom_refused())|if (0)
ended-not-told|src/net/refusals.c|net|if (ended_vat(reason, target))|if (0)
ended-target-unasked|src/net/refusals.c|net|return target != NULL && vat_ref_is_dead(target) &&|return false && vat_ref_is_dead(target) &&
code-not-in-message|src/net/refusals.c|net|return vat_error(code, message("", code, detail, detail_len));|return reason;
export-limit-unnamed|src/net/calls.c|net|if (rc == VAT_EBUSY) { /* max_exports: the value would export one more */|if (0) {
# The streaming encoder: each caught by the captp suite's "encoder" case
# (byte for byte against test/captp_reference.c) or its older tests.
encode-backslash-escaped-once|src/captp/out.c|captp|if (short_form == '"' \|\| short_form == '\\') {|if (short_form == '"') {
encode-surrogate-accepted|src/captp/out.c|captp|hi = 0x9f; /* surrogates */|hi = 0xbf;
encode-bad-tag-reported-first|src/captp/encode.c|captp|return rc != VAT_OK ? rc : FAIL(e, UTF8, "\"%.40s\"", tag);|return FAIL(e, UTF8, "\"%.40s\"", tag);
encode-slot-not-reused|src/captp/encode.c|captp|while (index < e->n && !(e->exported[index].type == v.type &&|while (index < e->n && index > e->n && !(e->exported[index].type == v.type &&
smallcaps-key-not-escaped|src/captp/encode_smallcaps.c|captp|bool escaped = special(s, len);|bool escaped = false;
smallcaps-string-not-escaped|src/captp/encode_smallcaps.c|captp|return text(e, special(s, len) ? "!" : "", s, len);|return text(e, "", s, len);
smallcaps-int-sign-dropped|src/captp/encode_smallcaps.c|captp|buf[--n] = i < 0 ? '-' : '+';|if (i < 0) buf[--n] = '-';
smallcaps-bigint-sign-dropped|src/captp/encode_smallcaps.c|captp|return text(e, digits[0] == '-' ? "" : "+", digits, len);|return text(e, "", digits, len);
smallcaps-qclass-in-key-order|src/captp/encode_smallcaps.c|captp|bool hilbert = vat_map_get(v, vat_atom_value(qclass), &first) == VAT_OK;|bool hilbert = false; (void)first;
smallcaps-error-message-as-message|src/captp/encode_smallcaps.c|captp|k == error_message|k == NULL
smallcaps-promise-as-ref|src/captp/encode_smallcaps.c|captp|snprintf(prefix, sizeof prefix, "%c%zu%s", v.type == VAT_T_REF ? '$' : '&',|snprintf(prefix, sizeof prefix, "%c%zu%s", '$',
smallcaps-iface-dot-dropped|src/captp/encode_smallcaps.c|captp|index, iface != NULL ? "." : "");|index, "");
smallcaps-no-hash|src/captp/encode.c|captp|TRY(e, put_char(e, '#'));|(void)0;
smallcaps-format-unchecked|src/captp/message.c|captp|if (msg->format != VAT_CAPTP_CAPDATA && msg->format != VAT_CAPTP_SMALLCAPS)|if (0)
smallcaps-format-not-told|src/captp/value.c|captp|*format = b->len > 0 && b->as.str[0] == '#' ? VAT_CAPTP_SMALLCAPS|*format = b->len > 0 && b->as.str[0] == '?' ? VAT_CAPTP_SMALLCAPS
conn-write-capdata-ignored|src/net/conn.c|net|c->format = o.write_capdata ? VAT_CAPTP_CAPDATA : VAT_CAPTP_SMALLCAPS;|c->format = VAT_CAPTP_SMALLCAPS;
conn-writes-capdata|src/net/conn.c|net|m.format = c->format;|m.format = VAT_CAPTP_CAPDATA;
send-only-never-offered|src/net/conn.c|net|.takes_send_only = true};|.takes_send_only = false};
send-only-offer-ignored|src/net/conn.c|net|c->peer_takes_send_only = true;|c->peer_takes_send_only = false;
send-only-even-to-endo|src/net/slots.c|net|bool send_only = reply == NULL && !pipelined_on && c->peer_takes_send_only;|bool send_only = reply == NULL && !pipelined_on;
send-only-pipelined-on|src/net/slots.c|net|bool send_only = reply == NULL && !pipelined_on && c->peer_takes_send_only;|bool send_only = reply == NULL && c->peer_takes_send_only;
send-only-answered|src/net/calls.c|net|if (a->qid == NULL) { /* send-only: nobody to tell, nothing to pipeline */|if (0) {
send-only-not-taken|src/net/conn.c|net|return c->open_answers + c->open_sends;|return c->open_answers;
send-only-call-refused|src/captp/message.c|captp net|bool send_only = m->type == VAT_CAPTP_CALL && id == 0;|bool send_only = false;
send-only-offer-not-written|src/captp/message.c|captp net|if (m->takes_send_only)|if (0)
send-only-offer-any-value|src/captp/message.c|captp|m->takes_send_only = takes != 0 && NODE(j, takes)->type == CAPTP__J_TRUE;|m->takes_send_only = takes != 0;
encode-real-ties-rounded-up|src/captp/real.c|captp|if (cut > 0 \|\| (cut == 0 && (q & 1)))|if (cut >= 0)
# The one-pass decoder's parser: each caught by the captp suite's "decoder"
# case (against test/captp_reference_decode.c) or its older tests.
decode-lone-low-surrogate-accepted|src/captp/json.c|captp|if (cp >= 0xdc00 && cp <= 0xdfff)|if (0)
decode-repeated-name-first-wins|src/captp/json.c|captp|out->m[i].val = k + 1; /* a repeated name: the last value wins */|(void)0;
decode-number-overflow-accepted|src/captp/json.c|captp|if (isinf(f)) {|if (0) {
decode-nul-in-key-accepted|src/captp/json.c|captp|if (ps->wrote_nul) {|if (0) {

# issue: process boundary (a hang-up's cause; a peer that never reads)
hang-up-write-error-wins|src/net/io.c|net|if ((status == UV_EPIPE \|\| status == UV_ECONNRESET) && read_the_rest(io))|if (0)
hang-up-rest-frames-dropped|src/net/io.c|net|consume(io, io->in, (size_t)n);|(void)n;
hang-up-rest-eof-ignored|src/net/io.c|net|} else if (n == 0) {|} else if (n == 0) { return false;
out-hard-limit-ignored|src/net/io.c|net|if (*queued > io->out_max)|if (0)
out-never-pauses|src/net/io.c|net|bool pause = io->paused ? h > io->out_resume : h > io->out_pause;|bool pause = false;
out-never-resumes|src/net/io.c|net|bool pause = io->paused ? h > io->out_resume : h > io->out_pause;|bool pause = io->paused \|\| h > io->out_pause;
out-pending-input-uncounted|src/net/io.c|net|return atomic_load(&io->out_answers) + atomic_load(&io->in_pending);|return atomic_load(&io->out_answers);
out-taken-frames-wake-nobody|src/net/io.c|net|wake_loop(io); /* on_wake paces the reading */|;
loop-first-post-wakes-nobody|src/net/loop.c|net|if (first)|if (0)
loop-taken-stays-queued|src/net/loop.c|net|p->queued = false;|(void)0;
write-later-frames-wake-only|src/net/io.c|net|if (first)|if (!first)
posted-share-kept|src/net/io.c|conns|release(io); /* the post's share */|(void)0;
direct-send-passes-taken-frames|src/net/io.c|net|if (!done && io->head == NULL && io->chunks_out == 0 && io->sock >= 0) {|if (!done && io->head == NULL && io->sock >= 0) {
direct-send-passes-queued-frames|src/net/io.c|net|if (!done && io->head == NULL && io->chunks_out == 0 && io->sock >= 0) {|if (!done && io->chunks_out == 0 && io->sock >= 0) {
direct-send-remainder-from-the-start|src/net/io.c|net|*data += n;|(void)0;
calls-taken-above-max-questions|src/net/conn.c|bounds|if (c->calls_taken > c->max_questions)|if (0)
calls-taken-option-ignored|src/net/conn.c|bounds|o.max_calls_taken ? o.max_calls_taken : VAT_CONN_MAX_CALLS_TAKEN;|VAT_CONN_MAX_CALLS_TAKEN;
calls-taken-only-past-max-questions|src/net/conn.c|bounds|(c->waiting != NULL \|\| peer_calls_open(c) >= c->calls_taken)) {|(c->waiting != NULL \|\| peer_calls_open(c) >= c->max_questions)) {
calls-taken-resumed-past-it|src/net/conn.c|bounds|while (c->waiting != NULL && peer_calls_open(c) < c->calls_taken) {|while (c->waiting != NULL && peer_calls_open(c) < c->max_questions) {
out-chunk-frame-at-its-start|src/net/io.c|net|memcpy(b->data + b->len, data, len);|memcpy(b->data, data, len);
out-chunk-room-unchecked|src/net/io.c|net|if (b == NULL \|\| b->cap - b->len < len) {|if (b == NULL) {
out-chunk-spare-for-any-frame|src/net/io.c|net|if (len <= OUT_CHUNK && io->spare != NULL) {|if (io->spare != NULL) {
out-chunk-answers-uncounted|src/net/io.c|net bounds|b->answers += len;|(void)b;
not-a-stream-accepted|src/net/io.c|net|bool stream = kind == UV_TCP \|\| kind == UV_NAMED_PIPE;|bool stream = true;
out-overload-end-keeps-queue|src/net/conn.c|net|c->tp->abort(c->io);|(void)c;
flow-own-calls-pause-reading|src/net/io.c|bounds|return atomic_load(&io->out_answers) + atomic_load(&io->in_pending);|return atomic_load(&io->out_queued) + atomic_load(&io->in_pending);
flow-answers-not-counted|src/net/conn.c|net bounds|flags \|= NET_WRITE_ANSWER;|(void)0;
flow-answers-never-taken-off|src/net/io.c|net bounds|atomic_fetch_sub(&io->out_answers, answers);|(void)answers;
flow-frames-past-the-limit-taken|src/net/conn.c|bounds|(c->waiting != NULL \|\| peer_calls_open(c) >= c->calls_taken)) {|(false)) {
flow-waiting-frames-not-resumed|src/net/calls.c|bounds|net_take_waiting_frames(turn, c);|(void)c;
loop-polls-for-ever|src/net/loop.c|net|polling = t - active_at < POLL_SPIN_NS;|polling = true;
spin-default-short|src/runtime/lifecycle.c|system|.spin = 512,|.spin = 64,
shutdown-quiet-ignores-late-drops|src/runtime/lifecycle.c|system|return quiet && sys->dropped_at_shutdown == 0 ? VAT_OK : VAT_ETIMEDOUT;|return quiet ? VAT_OK : VAT_ETIMEDOUT;
method-names-cache-by-length|src/net/calls.c|net|memcmp(vat_atom_name(a), s, len) == 0)|true)
frames-gathered-one-kept-past-reuse|src/net/io.c|net|if (!in_place \|\| n == RUN_MAX) {|if (n == RUN_MAX) {
frames-run-first-only|src/net/conn.c|net|for (size_t i = 0; i < run->count; i++, f = net_frames_next(f))|for (size_t i = 0; i < 1; i++, f = net_frames_next(f))
frames-last-run-kept|src/net/io.c|net|if (n > 0 && !io->finishing && !deliver(io, run, n))|if (0)
frames-before-a-bad-one-dropped|src/net/io.c|net|if (n > 0 && !deliver(io, run, n)) {|if (0) {
kept-answer-forgets-why-it-broke|src/net/calls.c|net|a->broken = !resolved;|a->broken = false;
kept-answer-drops-the-ref|src/net/calls.c|net|a->settled = value;|a->settled = vat_null();
kept-data-answer-held-whole|src/net/calls.c|net|net_table_put(&c->answers, n, &settled_to_data);|(void)n;
kept-ref-answer-as-data|src/net/calls.c|net|if (vat_value_ref(value) != NULL \|\| !resolved) {|if (!resolved) {
# The peer's calls answered through watches (watches.c): one monitor per
# called ref, answers in its list.
answer-taken-twice|src/net/calls.c|net|a->answered = true;|(void)a;
answer-pipelined-calls-dropped|src/net/calls.c|net|target_settled(turn, pc, resolved, value);|(void)pc;
answer-promise-sent-not-followed|src/net/calls.c|net|vat_promise *p = resolved ? vat_value_promise(value) : NULL;|vat_promise *p = NULL;
answer-empty-break-not-refused|src/net/calls.c|net|vat_is_null(value) ? vat_atom_value(vat_atom_refused()) : value);|value);
answer-stays-watched|src/net/calls.c|net|net_watch_remove(turn, a->watch, a);|(void)a;
watch-end-not-told|src/net/watches.c|net|net_answer_target_ended(turn, a, reason);|(void)a;
watch-end-reason-noproc|src/net/watches.c|net|return known;|return reason;
watch-never-monitors|src/net/watches.c|net|if (!w->let_go)|if (0)
watch-exports-not-callable|src/net/watches.c|net|net_table_get(&c->export_ids, key_of(w->target)) != NULL;|0;
watch-drop-kept|src/net/watches.c|net|if (w != NULL && w->waiting == NULL && !callable(w))|if (0)
name-digits-reversed|src/net/conn.c|net|s[2 + i] = digits[len - 1 - i];|s[2 + i] = digits[i];
netstring-header-digits-reversed|src/captp/netstring.c|captp|buf[i] = digits[n - 1 - i];|buf[i] = digits[i];
json-plain-quote|src/captp/json.c|captp|1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 */|1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 */
json-plain-backslash|src/captp/json.c|captp|1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50 */|1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x50 */
json-plain-controls|src/captp/json.c|captp|0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */|1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
json-plain-utf8|src/captp/json.c|captp|0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xc0 */|1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xc0 */
json-key-nul-not-flagged|src/captp/json.c|captp|ps->wrote_nul = true;|(void)ps;
json-key-nul-flag-kept|src/captp/json.c|captp|ps->wrote_nul = false;|(void)0;
# Values nobody waits for (vat_captp_slots.wants_value).
unwanted-value-decoded|src/net/slots.c|net|return net_table_get(&c->questions, net_parse(m->id, 'q', '-')) != NULL;|return true;
unwanted-value-wanted-inverted|src/net/slots.c|net|return net_table_get(&c->questions, net_parse(m->id, 'q', '-')) != NULL;|return net_table_get(&c->questions, net_parse(m->id, 'q', '-')) == NULL;
unwanted-promise-skipped|src/net/slots.c|net|return net_table_get(&c->promises, net_parse(m->id, 'p', '-')) != NULL;|return false;
unwanted-value-with-slots-skipped|src/captp/value.c|captp|if (unwanted && n == 0) {|if (unwanted) {
unwanted-answer-ignored|src/captp/message.c|captp|!slots->wants_value(slots->ctx, m);|true;
unwanted-never-asked|src/captp/message.c|captp|!slots->wants_value(slots->ctx, m);|false;
queue-len-max-walks-all|src/core/overload_api.c|overload|return vat__mailbox_peek_len(&v->mailbox, max);|return vat__mailbox_peek_len(&v->mailbox, SIZE_MAX);
queue-len-max-count-uncapped|src/core/overload_api.c|overload|return n < max ? n : max;|return n;
# Idle workers polling the host's I/O (vat/host.h), and the shared loop
# run by them (net/loop.c).
poller-wakes-itself|src/sched/park.c|sched|if (vat__polling_for == s)|if (0)
poller-never-woken|src/sched/park.c|sched|if (parked > s->polling)|if (1)
poller-left-at-shutdown|src/sched/park.c|sched|if (s->polling != 0)|if (0)
poller-never-blocks-in|src/loop/threads.c|sched|if (!acquire_alone(s, p))|if (1)
poller-sigpipe-open|src/loop/threads.c|sched|pthread_sigmask(SIG_BLOCK, &pipe, &old);|sigemptyset(&old);
poller-spin-poll-spinning|src/loop/threads.c|sched|stop_spinning(w); /* for the poll */|(void)0;
poller-spin-poll-spinning|src/loop/threads.c|sched|atomic_fetch_add_explicit(&s->spinning, 1, memory_order_seq_cst); /* again */|(void)0;
poller-waits-spinning|src/loop/threads.c|sched|stop_spinning(w); /* for the wait */|(void)0;
poller-waits-spinning|src/loop/threads.c|sched|spinning = false;|(void)0;
poller-busy-never-polls|src/loop/threads.c|net|if (++batches % POLL_EVERY_BATCHES == 0)|if (0)
# One worker of a system at a time waits for the right to poll; the others park where a send reaches them.
poller-every-worker-waits-for-the-right|src/loop/threads.c|sched|if (!acquire_alone(s, p))|if (!p->acquire(p->ctx, true))
loop-never-handed-over|src/net/loop.c|net|while (!(took = pthread_mutex_trylock(&run_mu) == 0) && thread_holds) {|while (!(took = pthread_mutex_trylock(&run_mu) == 0) && 0) {
loop-thread-never-told|src/net/loop.c|net|if (thread_waits)|if (0)
loop-never-taken-back|src/net/loop.c|net|if (since < STEP_ASIDE_NS) {|if (1) {
# A connection's counts (vat_conn_inspect).
counts-frames-in-missed|src/net/conn.c|net|net_count_add(&c->counts->frames_in, 1);|(void)0;
counts-bytes-in-payload-only|src/net/conn.c|net|vat_netstring_header(f->len, header) + f->len + 1);|f->len + 0 * vat_netstring_header(f->len, header));
counts-frames-out-missed|src/net/conn.c|net|net_count_add(&c->counts->frames_out, 1);|(void)0;
counts-questions-never-told|src/net/questions.c|net|net_count_set(&c->counts->questions, c->questions.len);|(void)c;
counts-questions-kept-at-end|src/net/conn.c|net|net_count_set(&c->counts->questions, 0);|(void)0;
counts-answers-owed-never-told|src/net/calls.c|net|net_count_set(&c->counts->answers_owed, ++c->open_answers);|++c->open_answers;
counts-answers-owed-not-lowered|src/net/calls.c|net|net_count_set(&c->counts->answers_owed, --c->open_answers);|--c->open_answers;
# A full queue's cause over a simulated link: answers on their way.
sim-answers-not-counted|src/net/simstream.c|sim_net|to->answers_on_the_way += len;|(void)0;
sim-write-answer-flag-dropped|src/net/simstream.c|sim_net|return send_seg(e->peer, SIM_DATA, (flags & NET_WRITE_ANSWER) != 0, data,|return send_seg(e->peer, SIM_DATA, false, data,
sim-answers-unread-at-any-level|src/net/simstream.c|sim_net|return e->peer->answers_on_the_way >= e->out_resume;|return true;
# The simulation harness (src/sim/): what makes its campaigns find bugs.
sim-pct-no-change-points|src/sim/choose.c|sim|if (w->change[i] == w->steps) {|if (0) {
sim-uniform-always-first|src/sim/choose.c|sim|: (uint32_t)(vat__sim_draw(&w->pick_rng) % n);|: 0;
sim-check-only-at-end|src/sim/harness.c|sim|if (sc->check && !sc->check(world, false, why, sizeof why))|if (0)
sim-stuck-counts-as-done|src/sim/harness.c|sim|if (sc->done && !sc->done(world))|if (0)
sim-fail-fault-noop|src/sim/faults.c|sim|vat__msg_set_fn(m, fail_turn);|(void)fail_turn;
sim-chooser-ignored|src/sched/pick.c|sim|if (s->det_choose == NULL)|if (1)
sim-dead-vat-victim|src/sim/faults.c|sim|if (atomic_load_explicit(&v->flags, memory_order_acquire) & VAT__DEAD)|if (0)
# Plans, shrinking, the fault kinds and the failing run's trace (src/sim/,
# and the runtime's seams they use).
sim-no-world-unreported|src/sim/harness.c|sim|no_world(w, seed, sc, *err, r);|(void)no_world;
sim-digest-kind-only|src/sim/faults.c|sim|w->digest = vat__sim_mix(w->digest, f.vat);|(void)0;
sim-digest-no-amount|src/sim/faults.c|sim_faults|w->digest = vat__sim_mix(w->digest, f.amount);|(void)0;
sim-plan-skips-not-waits|src/sim/faults.c|sim_plan|if (w->planned_done[j] \|\| p->step > w->steps \|\||if (w->planned_done[j] \|\| p->step != w->steps \|\|
sim-plan-label-first-letter|src/sim/plan.c|sim_plan|if (label != NULL && strcmp(label, p->label) == 0) {|if (label != NULL && strncmp(label, p->label, 1) == 0) {
sim-plan-trailing-text-accepted|src/sim/plan.c|sim_plan|return refuse(&r, "\";\" or the plan's end");|break;
sim-plan-delay-without-steps|src/sim/plan.c|sim_faults|if (f->kind == VAT_SIM_DELAY)|if (0)
sim-kinds-default-all|src/sim/faults.c|sim|unsigned mask =|unsigned mask = VAT_SIM_FAULTS_ALL; unsigned unused_mask =
sim-drawn-jitter-on-step-vat-only|src/sim/faults.c|sim_faults|for (uint32_t k = 1; !struck && k < w->nvats; k++) {|for (uint32_t k = 1; 0; k++) {
sim-jitter-early|src/timer/timer.c|sim_faults|first->deadline > UINT64_MAX - ns ? UINT64_MAX : first->deadline + ns;|first->deadline - ns;
sim-timeout-never|src/promise/promise.c|sim_faults|bool due = p->timeout != NULL &&|bool due = false &&
sim-stop-ignored|src/sim/harness.c|sim_faults|if (w->stop != NULL) /* even when the step ran no turn (a drop) */|if (0)
sim-delay-never-watched|src/core/deliver.c|sim_faults|to->sys != w->deliver_direct \|\||to->sys != w->sys \|\|
sim-hold-later-delay-first|src/sim/hold.c|sim_faults|if (e->from == from && e->to == to && e->until > h->until)|if (0)
sim-hold-send-overtakes-held|src/sim/hold.c|sim_faults|release(w, wk, &(which){.from = from, .to = to});|(void)0;
sim-hold-signals-attributed|src/sim/hold.c|sim_faults|turn != NULL && turn->effects_head == NULL && plain(first, last)|turn != NULL && turn->effects_head == NULL
sim-hold-kept-when-quiet|src/sim/harness.c|sim_faults|if (vat__sim_holding(w)) { /* nothing runs until they arrive */|if (0) {
sim-shrink-drops-nothing|src/sim/shrink.c|sim_plan|if (!attempt(s, &c, UINT64_MAX))|if (1)
sim-shrink-moves-nothing|src/sim/shrink.c|sim_plan|uint64_t mid = lo + (hi - lo) / 2;|uint64_t mid = hi;
sim-trace-no-fault-marker|src/sim/faults.c|sim_plan|if (ring != NULL)|if (0)
sim-trace-tracks-per-worker|src/trace/write.c|sim_plan|if (sys->trace_vat_track == NULL \|\| vat == NULL)|if (1)
# Replay across processes (test/test_sim_replay.c): the replay line, split
# as a shell splits it, runs the same run in another process.
sim-replay-plan-unquoted|src/sim/harness.c|sim_replay|"VAT_SIM_SEED=%" PRIu64 " VAT_SIM_PLAN='%s'\n# scenario %s, "|"VAT_SIM_SEED=%" PRIu64 " VAT_SIM_PLAN=%s\n# scenario %s, "
sim-replay-env-plan-ignored|src/sim/harness.c|sim_replay|const char *plan = getenv("VAT_SIM_PLAN");|const char *plan = NULL;
sim-replay-env-seed-ignored|src/sim/harness.c|sim_replay|if (env != NULL && *env != '\0') {|if (0) {
sim-replay-label-with-quotes|src/sim/plan.c|sim_replay|(c >= '0' && c <= '9') \|\| c == '_' \|\| c == '.' \|\| c == '-';|(c >= '0' && c <= '9') \|\| c == '_' \|\| c == '.' \|\| c == '-' \|\| c == '\'' \|\| c == '$';
sim-replay-label-shared|src/sim/plan.c|sim_replay|if (j != i && other != NULL && strcmp(other, label) == 0)|if (0)
# A deterministic system's trace in virtual time, the same in every replay.
trace-virtual-turns-share-instant|src/core/trace.h|trace sim_replay|r->virtual_next = t + 1;|r->virtual_next = t;
trace-virtual-turns-real-clock|src/core/trace.h|trace sim_replay|if (r->virtual_now != NULL) { /* `left` stays 0: every turn reads it */|if (0) {
trace-virtual-clock-unread|src/core/trace.c|trace sim_replay|if (sys->virtual_clock)|if (0)
trace-virtual-between-turns-real|src/core/trace.c|trace sim_replay|if (r->virtual_now != NULL)|if (0)
trace-virtual-start-real|src/trace/config.c|trace sim_replay|sys->virtual_clock|false
trace-virtual-scaled|src/trace/write.c|trace sim_replay|if (w->virtual_time) /* ticks are the virtual clock's nanoseconds */|if (0)
trace-refs-by-address|src/trace/write.c|trace sim_replay|unsigned n = w->virtual_time && p ? ordinal_of(&w->refs, p) : 0;|unsigned n = 0;
trace-refs-one-number|src/trace/write.c|sim_plan|o->nums[h] = (unsigned)++o->n;|o->nums[h] = 1; o->n++;
trace-flow-ids-tagged|src/trace/write.c|sim_replay|id &= ~tag;|(void)tag;
# The fixed programs of test/test_sim_bugs.c: each fix undone must fail its campaign.
sim-bugs-2pc-no-monitor|test/test_sim_bugs.c|sim_bugs|expect_vat_ok(vat_monitor(turn, w->coord, coordinator_down, &id));|(void)coordinator_down, (void)id;
sim-bugs-election-no-quorum|test/test_sim_bugs.c|sim_bugs|if (++n->votes >= MAJORITY)|if (++n->votes >= 1)
sim-bugs-election-votes-twice|test/test_sim_bugs.c|sim_bugs|if (n->voted < 0) {|if (1) {
sim-bugs-cache-ignores-version|test/test_sim_bugs.c|sim_bugs|if (w->versioned && c->version <= w->cache_version)|if (0)
# Worlds of several systems (src/sim/machines.c): one step among every system's
# ready vats, one clock, crashes, event sources.
sim-machines-step-in-the-wrong-system|src/sim/machines.c|sim_machines|while (end[i] <= k)|while (end[i] < k)
sim-machines-faults-skip-the-world|src/sim/machines.c|sim_machines|vat__sim_faults_step(w, vat__vat_of(ready[k]), index);|(void)index;
sim-machines-first-system-keeps-its-chooser|src/sim/machines.c|sim_machines|m->sys[i]->sched.det_choose = follow;|if (i > 0) m->sys[i]->sched.det_choose = follow;
sim-machines-crash-never-strikes|src/sim/machines.c|sim_machines|if (!down(m, i) && m->crash_at[i] <= now) {|if (0) {
sim-machines-drawn-crash-at-once|src/sim/machines.c|sim_machines|uint64_t window = vat__sim_draw(&m->machine_rng) % o->crash_window_ns;|uint64_t window = vat__sim_draw(&m->machine_rng) % 1;
sim-machines-source-not-in-digest|src/sim/machines.c|sim_machines|m->w->digest = vat__sim_mix(vat__sim_mix(m->w->digest, now), h);|(void)h;
sim-machines-clocks-apart|src/sim/machines.c|sim_machines|vat_system_advance_clock(m->sys[i], ns);|if (i == 0) vat_system_advance_clock(m->sys[i], ns);
sim-machines-delay-first-system-only|src/sim/machines.c|sim_world_faults|if (m->w->watching) /* delay faults may strike its vats too */|if (0)
sim-machines-stop-the-first-system|src/sim/faults.c|sim_world_faults|w->stop = v->sys;|w->stop = w->sys;
sim-machines-stop-ends-the-world|src/sim/machines.c|sim_world_faults|if (w->stop != NULL) { /* even when the step ran no turn (a drop) */|if (0) {
sim-machines-stopped-still-steps|src/sim/machines.c|sim_world_faults|return m->crashed[i] \|\| m->stopped[i];|return m->crashed[i];
sim-machines-stop-not-silent|src/sim/machines.c|sim_net|went_down(m, i, "stop");|note(m, "stop");
# Faults at a time (src/sim/timed.c): crashes and sources' faults in the plan.
sim-timed-never-fired|src/sim/machines.c|sim_machines sim_net|again = vat__sim_timed_fire(m->w, now);|again = false;
sim-timed-not-awaited|src/sim/machines.c|sim_net|if (vat__sim_timed_next(w) < fault)|if (0)
sim-machines-name-m-number|src/sim/machines.c|sim_machines|bool digits = n > 1 && name[0] == 'm';|bool digits = false;
sim-machines-name-twice|src/sim/machines.c|sim_machines|(o->name != NULL && named(m, o->name) >= 0))|(0))
sim-source-fault-crash-word|src/sim/machines.c|sim_machines|strncmp(text, "crash ", 6) == 0 \|\| vat_sim_source_find(sys, src) == NULL)|vat_sim_source_find(sys, src) == NULL)
sim-timed-ties-reversed|src/sim/timed.c|sim_net|while (*p != NULL && (*p)->at <= at)|while (*p != NULL && (*p)->at < at)
sim-timed-plan-ignored|src/sim/timed.c|sim_net|if (p->text != NULL)|if (0)
sim-timed-drawn-under-plan|src/sim/timed.c|sim_machines sim_net|if (w->plan != NULL)|if (0)
sim-timed-struck-counted-missed|src/sim/timed.c|sim_net|w->planned_done[d->plan_index] = 1;|(void)d;
sim-timed-crash-unknown|src/sim/timed.c|sim_machines sim_net|if (d->src == NULL &&|if (0 &&
sim-faults-timed-as-step|src/sim/faults.c|sim_net sim_plan|if (p->text != NULL) /* at a time: timed.c */|if (0)
sim-plan-no-at|src/sim/plan.c|sim_plan|if (word(r, "at"))|if (0)
sim-plan-timed-listed-last|src/sim/plan.c|sim_plan|(step == w->nfaults \|\| w->timed[time].after <= step);|(step == w->nfaults);
sim-plan-text-quote|src/sim/plan.c|sim_plan sim_machines|if (text[k] < ' ' \|\| text[k] > '~' \|\| text[k] == ';' \|\| text[k] == '\'')|if (text[k] < ' ' \|\| text[k] > '~' \|\| text[k] == ';')
sim-time-always-ns|src/sim/plan.c|sim_plan|size_t i = 0;|size_t i = 3;
sim-plan-timed-not-shrunk|src/sim/plan.c|sim_net|for (unsigned i = 0; i < w->ntimed; i++)|for (unsigned i = 0; i < w->ntimed && 0; i++)
sim-shrink-time-not-moved|src/sim/shrink.c|sim_net|c.faults[j].at = where;|(void)where;
sim-net-link-name-prefix|src/net/simnet.c|sim_net|return strlen(name) == len && memcmp(name, s, len) == 0;|return memcmp(name, s, len) == 0;
sim-net-partition-text-trailing|src/net/simnet.c|sim_net|*after != '\0' \|\| duration == 0)|duration == 0)
sim-net-faults-not-in-plan|src/net/simnet.c|sim_net|int rc = vat_sim_source_fault(n->sys, &net_source, at, text);|int rc = plan_fault(n, l, (int)kind, at, duration);
# The simulated network (src/net/simstream.c, simnet.c) and its bug program.
sim-net-send-bypasses-transport|src/net/conn.c|sim_net|int wrote = c->tp->write(c->io, frame, len, flags, &queued);|int wrote = net_io_write(c->io, frame, len, flags, &queued);
sim-net-no-latency|src/net/simstream.c|sim_net|uint64_t at = sim_link_now(to->link) + o->latency_ns;|uint64_t at = sim_link_now(to->link);
sim-net-no-jitter|src/net/simstream.c|sim_net|at += sim_link_draw(to->link) % (o->jitter_ns + 1);|(void)0;
sim-net-partition-lets-through|src/net/simstream.c|sim_net|return e->head->at > healed ? e->head->at : healed;|return e->head->at;
sim-net-reset-unheard|src/net/simstream.c|sim_net|if (!e->gone) /* a reset it had not heard of */|if (0)
sim-net-out-max-ignored|src/net/simstream.c|sim_net|if (*queued > e->out_max)|if (0)
sim-net-crash-not-silent|src/net/simstream.c|sim_net|e->frozen = true;|(void)e;
sim-net-frames-uncounted|src/net/simstream.c|sim_net|e->in_pending += len;|(void)len;
sim-net-partition-noop|src/net/simnet.c|sim_net|if (healed > l->healed_at)|if (0)
sim-net-disconnect-noop|src/net/simnet.c|sim_net|sim_end_reset(e);|(void)e;
sim-net-dial-through-partitions|src/net/simnet.c|sim_net|bool blocked = machine_down(d->to) \|\| l->healed_at > now;|bool blocked = machine_down(d->to);
sim-net-faults-at-the-start|src/net/simnet.c|sim_net|uint64_t at = sim_link_now(l) + sim_link_draw(l) % o->fault_window_ns;|uint64_t at = sim_link_now(l);
sim-net-bytes-not-in-digest|src/net/simnet.c|sim_net|h = mix(h, sim_end_deliver(n->busy.ends[i], now));|sim_end_deliver(n->busy.ends[i], now);
sim-net-bank-not-idempotent|test/test_sim_net.c|sim_net|if (!(b->fixed && id == b->applied_id)) {|if (1) {
# The seam between the connection vat and its I/O (src/net/transport.c).
transport-frame-done-lost|src/net/transport.c|bounds|net_io_frame_done(io, len);|(void)io, (void)len;
sim-bugs-calls-not-reentrant|test/test_sim_bugs.c|sim_bugs|if (v->busy && (kind == R_SUM \|\| !v->world->reentrant)) {|if (v->busy) {
sim-bank-no-monitor|examples/bank_accounts.c|sim|vat_host_send(b->acct[i], watch_peer, NULL);|(void)watch_peer;
sim-locks-reversed|test/test_sim.c|sim|bool reverse = i == 1 && !ordered;|bool reverse = i == 1;
# Parallel campaigns (src/sim/parallel.c): the result is the serial one.
sim-parallel-not-the-lowest|src/sim/parallel.c|sim_campaign|(!e->found \|\| h.index < e->index))|(!e->found \|\| h.index > e->index))
sim-parallel-totals-of-one-seed|src/sim/parallel.c|sim_campaign|out->total_turns = turns;|(void)turns;
sim-parallel-death-ignored|src/sim/parallel.c|sim_campaign|.found = true, .died = true, .index = running - 1, .status = status[i]};|.found = false, .died = true, .index = running - 1, .status = status[i]};
sim-parallel-nondeterminism-hidden|src/sim/parallel.c|sim_campaign|not_deterministic(&e, rc, &here, out);|*out = here;
sim-parallel-totals-by-seed-not-chunk|src/sim/parallel.c|sim_campaign|for (uint64_t k = 0; k < c->nchunks && k * c->chunk <= upto; k++) {|for (uint64_t k = 0; k < c->nchunks && k <= upto; k++) {
# The progress line (src/sim/progress.c): a terminal only, a few times a second, erased.
sim-progress-not-only-a-terminal|src/sim/progress.c|sim_campaign|if (total < 2 \|\| off \|\| fd < 0 \|\| isatty(fd) != 1)|if (total < 2 \|\| off \|\| fd < 0)
sim-progress-at-once|src/sim/progress.c|sim_campaign|p->next_ns = p->start_ns + (at_once ? 0 : FIRST_DRAW_NS);|p->next_ns = p->start_ns;
sim-progress-every-update|src/sim/progress.c|sim_campaign|p->next_ns = now + REDRAW_NS;|p->next_ns = now;
sim-progress-not-erased|src/sim/progress.c|sim_campaign|put(p->fd, "\r\033[K", 4);|(void)0;
sim-progress-off-ignored|src/sim/progress.c|sim_campaign|bool off = env != NULL && strcmp(env, "0") == 0;|bool off = false;
sim-progress-percent-rounds-up|src/sim/progress.c|sim_campaign|if (pct >= 100 && seeds < total)|if (0)
sim-progress-serial-never-drawn|src/sim/harness.c|sim_campaign|vat__sim_progress_update(progress, out->seeds_run, out->total_turns, 0);|(void)progress;
sim-progress-parallel-never-drawn|src/sim/parallel.c|sim_campaign|draw(c, p);|(void)draw;
# Parallel campaigns with plans, shrinking and the failing run's trace: the
# failing seed, run again here, is shrunk and traced as a serial one.
sim-parallel-not-settled|src/sim/parallel.c|sim_campaign|c->seeds->settle(c->seeds->ctx, &here);|(void)here;
sim-parallel-rerun-trusted|src/sim/parallel.c|sim_campaign|if (rc != their_rc)|if (here != NULL) return true; if (rc != their_rc)
sim-parallel-jobs-zero-serial|src/sim/parallel.c|sim_campaign|if (o->jobs != 0)|if (1)
sim-parallel-last-not-sent|src/sim/parallel.c|sim_campaign|if (i == c->count - 1 && !send_report(fd, REPORT_LAST, rc, i, &r))|if (0)
sim-parallel-plan-dropped|src/sim/harness.c|sim_campaign|c->last = vat__sim_run_seed(c->sc, c->o, c->plan, seed, vat__sim_trace_env,|c->last = vat__sim_run_seed(c->sc, c->o, NULL, seed, vat__sim_trace_env,
sim-serial-not-settled|src/sim/harness.c|sim_plan|settle(c, out);|(void)settle;
sim-plan-read-after-clear|src/sim/harness.c|sim_plan|rc = read_plan(env_plan, o, &plan, why, sizeof why);|memset(out, 0, sizeof *out); rc = read_plan(env_plan, o, &plan, why, sizeof why);
# The sixth program (test/test_sim_bugs.c, calls) and the bank example.
sim-bugs-calls-queue-not-drained|test/test_sim_bugs.c|sim_bugs|while (!v->busy && v->queued > 0) { /* a sum makes it busy again */|while (0) {
sim-bugs-calls-wrong-sum|test/test_sim_bugs.c|sim_bugs|vat_resolve(turn, v->sum_reply, vat_int(w->value[v->index] + peer)));|vat_resolve(turn, v->sum_reply, vat_int(w->value[v->index])));
sim-bank-refunds-the-wrong-transfers|examples/bank_accounts.c|sim|if (t->from == a->index && t->state == T_IN_FLIGHT) {|if (t->to == a->index && t->state == T_IN_FLIGHT) {
net-handshake-not-armed|src/net/timeouts.c|bounds|if (c->handshake_timeout_s > 0)|if (c->handshake_timeout_s < 0)
net-idle-while-peer-waits|src/net/timeouts.c|bounds|if (c->heard_since_tick \|\| c->open_answers > 0 \|\| io.reading_paused \|\||if (c->heard_since_tick \|\| io.reading_paused \|\|
net-place-never-left|src/net/conn.c|bounds|net_places_leave(c->places);|(void)c->places;
net-cap-off-by-one|src/net/socket.c|bounds|if (p->max != 0 && n >= p->max) {|if (p->max != 0 && n > p->max) {
# issue: process boundary (a send that ends the connection: answered once, its cause)
net-full-request-answered-twice|src/net/slots.c|net|if (c->ended)|if (0)
net-full-cause-always-the-peer|src/net/conn.c|net|c->tp->answers_unread(c->io)|true
net-full-cause-never-the-peer|src/net/conn.c|net|c->tp->answers_unread(c->io)|false
# issue: process boundary (a broken exported promise settles as an answer does)
settle-promise-reason-as-is|src/net/calls.c|net|m->value = resolved ? value : net_exception(value, target);|m->value = value;
settle-promise-sent-as-is|src/net/slots.c|net|net_send_outcome(turn, e->c, &m, resolved, value, NULL);|m.value = value; m.is_reject = !resolved; net_send(turn, e->c, &m, NULL);
settle-unsendable-detail-raw|src/net/calls.c|net|*d = '?';|(void)d;
# issue: process boundary (an answer ref's question lives as long as the ref)
pipes-never-swept|src/net/pipe.c|net|e->live = e->ref != NULL;|e->live = true;
pipes-links-never-cleared|src/net/pipe.c|net|GC_general_register_disappearing_link(&e->ref, obj) == GC_NO_MEMORY)|false)
pipes-sweep-drops-live|src/net/pipe.c|net|if (e->live && !net_table_put(&k->refs, e->key, e))|if (false && !net_table_put(&k->refs, e->key, e))
pipes-stale-entry-matches|src/net/pipe.c|net|return e != NULL && e->ref == (void *)answer ? e->q : 0;|return e != NULL ? e->q : 0;
# issue: process boundary (promises of vat/net.h no test held before)
net-closed-of-null-crashes|src/net/conn.c|net|return conn ? conn->closed : NULL;|return conn->closed;
net-pipeline-null-args-taken|src/net/pipe.c|net|if (target == NULL \|\| method == NULL \|\| out == NULL \|\| answer_out == NULL)|if (target == NULL)
net-port-of-null-crashes|src/net/socket.c|net|return l ? l->port : 0;|return l->port;
net-conn-label-ignored|src/net/conn.c|net|def.label = o.label;|(void)0;
net-conn-label-default-lost|src/net/conn.c|net|.label = "captp",|.label = NULL,
net-payload-not-wrapped-in-a-list|src/net/slots.c|net|args = vat_list(&args, 1);|(void)0;
net-relayed-error-fields-dropped|src/net/refusals.c|net|} else if (vat_type_of(payload) != VAT_T_NULL) {|} else if (0) {
# issue: held items (sim harness edges)
# A stop in a world of one system reads stopped, as in a world of two.
sim-stop-alone-unmarked|src/sim/machines.c|sim_faults|m->stopped[i] = true;|m->stopped[i] = m->n > 1;
# A fault at a time's trace mark names no vat (never "(nil)").
sim-timed-fault-nil-vat|src/trace/write.c|sim_machines|if (e->vat != NULL) /* a fault at a time strikes a machine, no vat */|if (1)
# VAT_TRACE=FILE: one file; shrinking's runs and other machines trace nothing.
sim-trace-env-every-world|src/sim/harness.c|sim_machines|return trace_path != NULL ? "" : vat__trace_off; /* "": written below */|return trace_path != NULL ? "" : NULL;
sim-trace-env-other-machines|src/sim/machines.c|sim_machines|cfg.trace_path = vat__trace_off; /* the world's trace is its first system's */|cfg.trace_path = NULL;
# A seed's bounds on real time and memory, from the options or the environment.
sim-bound-time-unchecked|src/sim/bounds.c|sim_campaign|vat__monotonic_ns() - m->started_ns > o->max_seed_time_ns) {|false) {
sim-bound-memory-unchecked|src/sim/bounds.c|sim_campaign|now - m->memory_then > o->max_seed_memory) {|false) {
sim-bound-failure-shrunk|src/sim/harness.c|sim_campaign|if (vat__sim_over_bound(out->verdict))|if (0)
sim-bound-env-ignored|src/sim/harness.c|sim_campaign|int rc = vat__sim_bounds_from_env(&bounded, why, sizeof why);|int rc = VAT_OK;
# The replay: its first line the assignments alone; no "rate 0" when faults at a time struck.
sim-replay-prose-on-first-line|src/sim/harness.c|sim_machines sim_campaign|"VAT_SIM_SEED=%" PRIu64 "\n# scenario %s, %s, %s; in code: "|"VAT_SIM_SEED=%" PRIu64 " (scenario %s, %s, %s; in code: "
sim-replay-claims-rate-0|src/sim/harness.c|sim_machines|if (o->fault_rate > 0) {|if (1) {
# Every EINVAL says why; an empty VAT_SIM_PLAN counts as unset.
sim-einval-silent|src/sim/harness.c|sim_plan|return refuse(why, size, "fault_rate %g is outside [0, 1]", o->fault_rate);|return VAT_EINVAL;
sim-seed-einval-silent|src/sim/harness.c|sim_plan|if (out != NULL) {|if (0) {
sim-empty-plan-read|src/sim/harness.c|sim_plan|const char *text = env != NULL && *env != '\0' ? env : o->plan;|const char *text = env != NULL ? env : o->plan;
# VAT_SIM_SEED is decimal as the replay line prints it, even after a 0.
sim-seed-read-as-octal|src/sim/harness.c|sim|unsigned long long seed = strtoull(env, &end, hex ? 16 : 10);|unsigned long long seed = strtoull(env, &end, 0);
# issue: held items (tests that missed bugs)
promise-callee-end-breaks-followed|src/promise/promise.c|promise|vat__promise_settle(items[i], ST_BROKEN, reason, NULL, false);|vat__promise_settle(items[i], ST_BROKEN, reason, NULL, true);
promise-timed-out-waiter-left-as-tail|src/promise/promise.c|promise|p->tail = prev;|;
overload-own-low-default-half|src/core/overload.c|overload|ov->low = ov->high / 4 ? ov->high / 4 : 1;|ov->low = ov->high / 2 ? ov->high / 2 : 1;
overload-own-low-equal-high-refused|src/core/overload.c|overload|return ov->low <= ov->high ? VAT_OK : VAT_EINVAL;|return ov->low < ov->high ? VAT_OK : VAT_EINVAL;
sim-machine-name-32-taken|src/sim/machines.c|sim_machines|if (n == 0 \|\| n >= NAME_SIZE)|if (n == 0 \|\| n > NAME_SIZE)
sim-later-crash-replaces-earlier|src/sim/machines.c|sim_machines|if (!down(m, i) && at_ns < m->crash_at[i])|if (!down(m, i))
net-method-names-cache-ignores-length|src/net/calls.c|net|if (a != NULL && vat_atom_len(a) == len &&|if (a != NULL &&
net-read-resumes-below-pause|src/net/io.c|bounds|io->out_resume = out_pause / 2;|io->out_resume = out_pause;
net-read-resumes-at-a-quarter|src/net/io.c|bounds|io->out_resume = out_pause / 2;|io->out_resume = out_pause / 4;
net-read-resumes-below-half-only|src/net/io.c|bounds|bool pause = io->paused ? h > io->out_resume : h > io->out_pause;|bool pause = io->paused ? h >= io->out_resume : h > io->out_pause;
# PCT's change points: each lowers its vat below those of earlier steps
# (the draw in step order), and they fall on steps 1 to k.
sim-pct-change-points-unsorted|src/sim/choose.c|sim|sort_steps(w->change, w->nchange);|(void)sort_steps;
sim-pct-later-lowered-above|src/sim/choose.c|sim|w->prio[idx[k]] = VAT__SIM_MAX_DEPTH - i; /* below every vat's */|w->prio[idx[k]] = 1 + i;
sim-pct-change-points-from-0|src/sim/choose.c|sim|w->change[i] = 1 + vat__sim_draw(&w->pick_rng) % o->pct_steps;|w->change[i] = vat__sim_draw(&w->pick_rng) % o->pct_steps;
sim-pct-change-points-past-k|src/sim/choose.c|sim|w->change[i] = 1 + vat__sim_draw(&w->pick_rng) % o->pct_steps;|w->change[i] = 1 + vat__sim_draw(&w->pick_rng) % (o->pct_steps + 1);
# issue: held items (the simulated network's edges)
sim-net-idle-ends-walked|src/net/simnet.c|sim_net|if (e->head != NULL)|if (1)
sim-net-conn-label-captp|src/net/simnet.c|sim_net|if (lo.label == NULL) {|if (0) {
sim-net-link-one-order|src/net/simnet.c|sim_net|(is_named(l->b, name, first) && is_named(l->a, dash + 1, second)))|0)
sim-plan-fault-missed-not-refused|src/sim/timed.c|sim_net|if (rc != VAT_OK && d->plan_index >= 0 && w->refused == NULL)|if (0)
sim-plan-names-nothing-as-no-form|src/sim/machines.c|sim_net|return rc == VAT_OK ? VAT_OK : VAT_ENOTFOUND;|return rc == VAT_OK ? VAT_OK : VAT_EINVAL;
sim-net-dial-opened-not-called|src/net/simnet.c|sim_net|d->opened(d->opened_ctx, d->from, conn);|(void)0;
EOF

rows() { printf '%s\n' "$MUTATIONS" | grep -v -e '^$' -e '^#'; }

if [[ $LIST == 1 ]]; then
  rows | cut -d'|' -f1 | uniq
  exit 0
fi

# Splits a row into the array F; "\|" in a row is a literal bar.
split_row() {
  local r=${1//\\|/$'\x1f'}
  IFS='|' read -r -a F <<<"$r"
  local i
  for i in "${!F[@]}"; do F[i]=${F[i]//$'\x1f'/|}; done
}

# Applies one edit to $1/$file, checking the line matches exactly once.
apply_edit() {
  local tree=$1 file=$2 old=$3 new=$4
  python3 - "$tree/$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].strip(), sys.argv[3]
lines = open(path).read().split("\n")
hits = [i for i, l in enumerate(lines) if l.strip() == old]
if len(hits) != 1:
    sys.exit(f"{path}: {len(hits)} lines match {old!r} (want exactly 1)")
i = hits[0]
indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
lines[i] = indent + new
open(path, "w").write("\n".join(lines))
PY
}

# Everything below runs from main, read whole before it starts: editing
# this file during a run cannot change the run. (Not indented: heredocs.)
main() {
local names=("$@")
if [[ ${#names[@]} == 0 ]]; then
  mapfile -t names < <(rows | cut -d'|' -f1 | uniq)
fi

# Every edit must match, in the working tree, before anything runs: one
# pass over the rows (a python3 per row took two minutes).
python3 - "$ROOT" "${names[@]}" 3< <(rows) <<'PY' || exit 2
import os, sys
root, names = sys.argv[1], set(sys.argv[2:])
found, lines, bad = set(), {}, []
for row in os.fdopen(3):
    f = [x.replace("\x1f", "|") for x in row.rstrip("\n").replace("\\|", "\x1f").split("|")]
    if f[0] not in names:
        continue
    found.add(f[0])
    path = os.path.join(root, f[1])
    if path not in lines:
        lines[path] = [l.strip() for l in open(path).read().split("\n")]
    n = lines[path].count(f[3].strip())
    if n != 1:
        bad.append(f"{path}: {n} lines match {f[3].strip()!r} (want exactly 1)")
bad += [f"no mutation named {n}" for n in sorted(names - found)]
if bad:
    sys.exit("\n".join(bad))
PY

if [[ $CHECK == 1 ]]; then
  echo "${#names[@]} mutations, every pattern matches once"
  exit 0
fi

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/vat-mutate.XXXXXX")
TREE=$SCRATCH/tree
cleanup() {
  if [[ $KEEP == 1 ]]; then
    echo "scratch tree kept: $TREE"
  else
    rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT

# The scratch tree gets the working tree's files, committed or not, from a
# clone or from an unpacked tarball (test/tree_files.sh).
mkdir -p "$TREE"
bash "$ROOT/test/tree_files.sh" "$ROOT" |
  (cd "$ROOT" && xargs -0 -r cp --parents -t "$TREE")

echo "building the unmutated tree in $TREE/build"
meson setup "$TREE/build" "$TREE" -Dbuildtype=debugoptimized \
  -Dlibuv_example=disabled >"$SCRATCH/setup.log" 2>&1 ||
  { cat "$SCRATCH/setup.log"; exit 2; }
ninja -j "$JOBS" -C "$TREE/build" test/vat-tests >"$SCRATCH/build.log" 2>&1 ||
  { tail -30 "$SCRATCH/build.log"; exit 2; }

caught=0
survived=0
broken=0
for name in "${names[@]}"; do
  files=()
  suites=""
  while IFS= read -r row; do
    split_row "$row"
    [[ ${F[0]} == "$name" ]] || continue
    suites=${F[2]}
    files+=("${F[1]}")
    apply_edit "$TREE" "${F[1]}" "${F[3]}" "${F[4]-}"
  done < <(rows)
  log=$SCRATCH/$name.log
  verdict=""
  if ! ninja -j "$JOBS" -C "$TREE/build" test/vat-tests >"$log" 2>&1; then
    verdict="build-failed"
    broken=$((broken + 1))
  else
    # shellcheck disable=SC2086
    if (cd "$TREE" && CK_DEFAULT_TIMEOUT=$LIMIT timeout --kill-after=10 \
      "$LIMIT" build/test/vat-tests $suites) >>"$log" 2>&1; then
      verdict="SURVIVED"
      survived=$((survived + 1))
    else
      verdict="caught"
      caught=$((caught + 1))
    fi
  fi
  first_failure=$(grep -m1 -E ':[FE]:' "$log" || true)
  printf '%-40s %-12s %s\n' "$name" "$verdict" "${first_failure#"$TREE"/}"
  for f in $(printf '%s\n' "${files[@]}" | sort -u); do
    cp "$ROOT/$f" "$TREE/$f"
  done
done
total=$((caught + survived + broken))
echo "total: $total, caught $caught, survived $survived, did not build $broken"
[[ $broken == 0 ]] || exit 2
[[ $survived == 0 ]]
}

main "$@"
