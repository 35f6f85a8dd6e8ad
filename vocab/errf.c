/* errf.c — ms_errf (errf.h). */
#include "vocab/errf.h"

#include <stdarg.h>
#include <stdio.h>

int ms_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
