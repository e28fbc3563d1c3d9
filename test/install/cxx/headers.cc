// The public headers in C++11, the oldest C++ they promise to serve: every
// declaration links as C (extern "C"), and the version agrees.
#include <cstdio>
#include <cstring>

#include <vat.h>

int main() {
  if (std::strcmp(vat_version(), VAT_VERSION_STRING) != 0)
    return 1;
  if (vat_init() != VAT_OK)
    return 1;
  std::printf("%s\n", vat_strerror(VAT_EINVAL));
  return 0;
}
