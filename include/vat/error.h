/* libvat — error codes.
 *
 * Every public function that can fail returns VAT_OK (0) or one negative
 * VAT_E* code from the list below. The list is the single source of truth:
 * vat_strerror() and vat_err_name() are generated from it.
 */
#ifndef VAT_ERROR_H
#define VAT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#define VAT_ERRNO_MAP(X)                                                       \
  X(EINVAL, -1, "invalid argument")                                            \
  X(ENOTINTURN, -2, "call is only valid inside a turn of the calling vat")     \
  X(EINTURN, -3, "call may not be made from inside a turn")                    \
  X(ENOTREGISTERED, -4, "calling thread is not registered with the library")   \
  X(ENOTINIT, -5, "vat_init() has not been called")                            \
  X(ECLOSED, -6, "system is shutting down or destroyed")                       \
  X(ETURNFAILED, -7, "the current turn has already failed")                    \
  X(ETIMEDOUT, -8, "deadline passed")                                          \
  X(ENOMEM, -9, "out of memory")                                               \
  X(EBUSY, -10, "resource busy")                                               \
  X(ENOTSUP, -11, "operation not supported in this configuration")             \
  X(ENOTFOUND, -12, "no such item")                                            \
  X(ETYPE, -13, "value has the wrong type")                                    \
  X(EBROKEN, -14, "promise broken")                                            \
  X(EGCCONFIG, -15,                                                            \
    "the collector's interior-pointer recognition is off; libvat needs it "    \
    "(do not call GC_set_all_interior_pointers(0))")                           \
  X(EIO, -16, "input/output error (errno says which)")                         \
  X(EAGAIN, -17, "the target is overloaded; try again later")                   \
  /* CapTP's wire format (vat/captp.h) numbers its codes from -40. */          \
  X(EFRAME, -40, "malformed netstring frame")                                  \
  X(EFRAMESIZE, -41, "frame larger than the configured maximum")               \
  X(EDECODE, -42, "malformed CapTP message or CapData value")                  \
  X(EENCODE, -43, "value has no CapData form")

/** Error codes. VAT_OK is success; every error is negative. */
typedef enum vat_errno {
  VAT_OK = 0,
#define VAT__ERRNO_ENUM(name, value, text) VAT_##name = (value),
  VAT_ERRNO_MAP(VAT__ERRNO_ENUM)
#undef VAT__ERRNO_ENUM
} vat_errno;

/** A human-readable message for an error code ("unknown error" for codes not
 *  in the list). Any thread; never NULL; the string is static. */
const char *vat_strerror(int err);

/** The symbolic name of an error code ("VAT_EINVAL"), or "VAT_UNKNOWN".
 *  Any thread; never NULL; the string is static. */
const char *vat_err_name(int err);

#ifdef __cplusplus
}
#endif

#endif
