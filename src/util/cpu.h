/* Processor hints: spin-waits, the cache line, and where the hot path's
 * code goes. */
#ifndef VAT_UTIL_CPU_H
#define VAT_UTIL_CPU_H

static inline void vat__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* What two threads' fields are kept apart by, so that neither takes the
 * other's line away. */
#define VAT__CACHE_LINE 64

/* The functions every message passes through (send, commit, deliver,
 * mailbox, run loop, scheduler) are placed together in .text.hot. Without
 * it their placement follows the source file order, and the same
 * instructions ran up to a fifth slower or faster after files moved:
 * measured speed then depends on where the linker happened to put them. */
#if defined(__GNUC__)
#define VAT__HOT __attribute__((hot))
#else
#define VAT__HOT
#endif

#endif
