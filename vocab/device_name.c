/* device_name.c — device names (device_name.h). */
#include "vocab/device_name.h"
#include "vocab/limits.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* n decimal digits at s (1..4 of them, no sign), below limit. */
static int number_below(const char *s, size_t n, int limit)
{
    if (n == 0 || n > 4) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return atoi(s) < limit;
}

static int device_prefix(const char *s, size_t n)
{
    if (n == 3 && !strncmp(s, "cpu", 3)) return 1;
    return n > 5 && !strncmp(s, "cuda:", 5) && number_below(s + 5, n - 5, 1024);
}

int ms_device_name_valid(const char *s) { return s && device_prefix(s, strlen(s)); }

int ms_device_label_valid(const char *s)
{
    if (!s) return 0;
    const char *slash = strchr(s, '/');
    if (!slash) return ms_device_name_valid(s);
    return device_prefix(s, (size_t)(slash - s)) && slash[1] == 'v' &&
           number_below(slash + 2, strlen(slash + 2), MS_MAX_DEVICES);
}
