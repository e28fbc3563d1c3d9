/* Processor hints for spin-waits. */
#ifndef VAT_UTIL_CPU_H
#define VAT_UTIL_CPU_H

static inline void vat__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
