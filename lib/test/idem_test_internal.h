/*
 * idem_test_internal.h - what libidem_test's own files share, exported by
 * none of them (lib/test/idem_test.sym lists what is).
 */
#ifndef IDEM_TEST_INTERNAL_H
#define IDEM_TEST_INTERNAL_H

#include <stddef.h>

/* fmt into err, when err has room (idem_test_http.c). */
void	idem_test_seterr(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif /* IDEM_TEST_INTERNAL_H */
