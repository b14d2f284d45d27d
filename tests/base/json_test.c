/*
 * json_test.c: numbers in the JSON reports.  Counters are uint64_t and can
 * exceed what a long long holds: the writer checks the range before it
 * converts (a cast past it is undefined behaviour; UBSan's
 * float-cast-overflow, on in the sanitizer build, fails it).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "testlib.h"

static void number(double v, char *out, size_t n)
{
    FILE *f = fmemopen(out, n, "w");
    json_write_number(f, v);
    fclose(f);
}

TEST(numbers_past_long_long_are_written_without_overflow)
{
    char s[64];
    number((double)UINT64_MAX, s, sizeof s);
    ASSERT_STR_CONTAINS(s, "1.8446744073709552e+19");
    number(-1e300, s, sizeof s);
    ASSERT_STR_CONTAINS(s, "-1e+300");
    number(123456789.0, s, sizeof s);
    ASSERT(strcmp(s, "123456789") == 0);
    number(NAN, s, sizeof s);
    ASSERT(strcmp(s, "null") == 0);
    number(2.5, s, sizeof s);
    ASSERT(strcmp(s, "2.5") == 0);
}

int main(void)
{
    return RUN_TESTS();
}
