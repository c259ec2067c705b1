/* glibc's fortified fprintf, which Debian's libunwind.a (built for glibc with _FORTIFY_SOURCE) calls in its
 * debug logging; musl has no __*_chk functions. Linked into the static server only (scripts/musl/setup.sh). */
#include <stdarg.h>
#include <stdio.h>

int __fprintf_chk(FILE *f, int flag, const char *fmt, ...) {
  (void)flag;
  va_list ap;
  va_start(ap, fmt);
  int n = vfprintf(f, fmt, ap);
  va_end(ap);
  return n;
}
