// readme compiled as C++: the public headers and the program must be
// valid C++ too (the C++ half of .ci/install-check, in the build tree).
#include "../readme.c"
