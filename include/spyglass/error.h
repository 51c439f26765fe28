/* error.h — spyglass error codes.
 *
 * Every call that can fail returns int: 0 (or a non-negative count) on
 * success, a negative SPY_E* code on failure. System failures are negated
 * errno values; protocol failures have codes of their own below -1000.
 * spy_strerror() and spy_err_name() accept any int and never return NULL.
 */
#ifndef SPYGLASS_ERROR_H
#define SPYGLASS_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define SPY_ERRNO_MAP(X)                                                       \
  X(EPERM, -EPERM, "operation not permitted")                                  \
  X(ENOENT, -ENOENT, "no such file or directory")                              \
  X(EINTR, -EINTR, "interrupted system call")                                  \
  X(EIO, -EIO, "i/o error")                                                    \
  X(EAGAIN, -EAGAIN, "resource temporarily unavailable")                       \
  X(ENOMEM, -ENOMEM, "out of memory")                                          \
  X(EACCES, -EACCES, "permission denied")                                      \
  X(EBUSY, -EBUSY, "resource busy")                                            \
  X(EEXIST, -EEXIST, "already exists")                                         \
  X(ENOTDIR, -ENOTDIR, "not a directory")                                      \
  X(EINVAL, -EINVAL, "invalid argument")                                       \
  X(EMFILE, -EMFILE, "too many open files")                                    \
  X(ENOSPC, -ENOSPC, "no space left")                                          \
  X(EPIPE, -EPIPE, "broken pipe")                                              \
  X(ERANGE, -ERANGE, "value out of range")                                     \
  X(ENAMETOOLONG, -ENAMETOOLONG, "name too long")                              \
  X(ENOSYS, -ENOSYS, "function not implemented")                               \
  X(ENOTSUP, -ENOTSUP, "operation not supported")                              \
  X(ENOBUFS, -ENOBUFS, "no buffer space available")                            \
  X(ECONNREFUSED, -ECONNREFUSED, "connection refused")                         \
  X(ECONNRESET, -ECONNRESET, "connection reset by peer")                       \
  X(ETIMEDOUT, -ETIMEDOUT, "timed out")                                        \
  X(ECANCELED, -ECANCELED, "operation canceled")

#define SPY_PROTO_MAP(X)                                                       \
  X(ETRUNCATED, -1001, "frame or section truncated")                           \
  X(ETOOBIG, -1002, "frame over the size limit")                               \
  X(EBADTYPE, -1003, "unknown message type")                                   \
  X(EBADSECTION, -1004, "bad section length")                                  \
  X(EBADVERSION, -1005, "protocol version mismatch")                           \
  X(EBADVALUE, -1006, "malformed value in section")                            \
  X(EBADHEADER, -1007, "malformed frame header")                               \
  X(ENOSECTION, -1008, "required section missing")                             \
  X(EOWNER, -1009, "runtime directory has the wrong owner or mode")            \
  X(EGONE, -1010, "peer is gone")                                              \
  X(ECLOSED, -1011, "handle is closed")                                        \
  X(EOVERRUN, -1012, "reader fell behind and lost frames")                     \
  X(EPOOLEMPTY, -1013, "buffer pool empty")                                    \
  X(EBADSCHEMA, -1014, "store schema is newer than this reader")               \
  X(EBADSEGMENT, -1015, "shared segment is malformed")

enum spy_errno {
#define SPY_ERR_ENUM(name, value, msg) SPY_##name = (value),
  SPY_ERRNO_MAP(SPY_ERR_ENUM) SPY_PROTO_MAP(SPY_ERR_ENUM)
#undef SPY_ERR_ENUM
      SPY_OK = 0
};

/* A human-readable message for err ("success" for 0, "unknown error N"
 * style text for codes it does not know). Never NULL; the string is static
 * for known codes and thread-local for unknown ones. Thread-safe. */
const char *spy_strerror(int err);

/* The symbolic name of err without the SPY_ prefix ("ETRUNCATED"), "OK"
 * for 0, "UNKNOWN" for codes it does not know. Never NULL, static. */
const char *spy_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
