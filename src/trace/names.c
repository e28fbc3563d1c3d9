/* Names for what turns run: selectors and signals name themselves; a
 * handler function is named by its symbol. dladdr() finds exported
 * symbols (a program linked with -rdynamic, a shared library's public
 * functions); a static function, or one in a program that exports
 * nothing, is looked up in its object file's symbol table (.symtab),
 * which a program keeps unless it was stripped. Failing both, it is named
 * by object file and offset ("prog+0x1234"), which addr2line resolves.
 * Only the writer calls these, once per function. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/deliver.h"
#include "core/trace.h"
#include "trace/trace.h"

/* Whether [off, off + len) lies inside a file of `size` bytes. */
static bool inside(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

/* The function symbol of the 64-bit ELF image `map` that covers `addr`
 * (an address as the file's symbol values count). */
static bool symtab_lookup(const unsigned char *map, uint64_t size,
                          uint64_t addr, char *buf, size_t buf_size) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map;
  if (!inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size))
    return false;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(map + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
      continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (!inside(sh[i].sh_offset, sh[i].sh_size, size) ||
        !inside(str->sh_offset, str->sh_size, size))
      continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)(map + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    for (size_t k = 0; k < n; k++) {
      if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
          sym[k].st_name >= str->sh_size)
        continue;
      uint64_t lo = sym[k].st_value,
               hi = lo + (sym[k].st_size ? sym[k].st_size : 1);
      if (addr < lo || addr >= hi)
        continue;
      const char *name = (const char *)map + str->sh_offset + sym[k].st_name;
      size_t max = str->sh_size - sym[k].st_name;
      snprintf(buf, buf_size, "%.*s", (int)strnlen(name, max), name);
      return addr == lo ||
             snprintf(buf + strlen(buf), buf_size - strlen(buf), "+0x%llx",
                      (unsigned long long)(addr - lo)) > 0;
    }
  }
  return false;
}

/* `fn`'s symbol from the symbol table of `file`, loaded at `base`. */
static bool file_symbol(const char *file, const void *base, const void *fn,
                        char *buf, size_t size) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  bool found = false;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(Elf64_Ehdr)) {
    const unsigned char *map =
        mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map;
      if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
          eh->e_ident[EI_CLASS] == ELFCLASS64) {
        /* A position-independent object's symbols count from its base. */
        uint64_t addr = (uint64_t)(uintptr_t)fn;
        if (eh->e_type == ET_DYN)
          addr -= (uint64_t)(uintptr_t)base;
        found = symtab_lookup(map, (uint64_t)st.st_size, addr, buf, size);
      }
      munmap((void *)map, (size_t)st.st_size);
    }
  }
  close(fd);
  return found;
}

/* The file of the main program: dladdr names it as argv[0] had it. */
static const char *object_file(const Dl_info *info) {
  static char exe[4096];
  if (info->dli_fname != NULL && info->dli_fname[0] != '\0' &&
      strchr(info->dli_fname, '/') != NULL)
    return info->dli_fname;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return info->dli_fname;
  exe[n] = '\0';
  return exe;
}

static const char *function_name(const void *fn, char *buf, size_t size) {
  Dl_info info;
  if (dladdr((void *)fn, &info) == 0) {
    snprintf(buf, size, "%p", fn);
    return buf;
  }
  if (info.dli_sname != NULL && info.dli_saddr == fn)
    return info.dli_sname;
  const char *file = object_file(&info);
  if (file != NULL && file_symbol(file, info.dli_fbase, fn, buf, size))
    return buf;
  const char *base = file ? strrchr(file, '/') : NULL;
  snprintf(buf, size, "%s+0x%zx",
           base   ? base + 1
           : file ? file
                  : "?",
           (size_t)((const char *)fn - (const char *)info.dli_fbase));
  return buf;
}

const char *vat__trace_name(const void *what, uint32_t form, char *buf,
                            size_t size) {
  switch (form) {
  case VAT__TR_DYN:
    return vat_atom_name(what);
  case VAT__TR_SIGNAL: {
    const vat__signal_class *cls = what;
    return cls->name ? cls->name : "signal";
  }
  default:
    return function_name(what, buf, size);
  }
}
