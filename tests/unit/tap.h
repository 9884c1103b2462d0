/*
 * tap.h - a minimal TAP producer for the unit tests: every check prints
 * "ok N - name" or "not ok N - name", tests/run counts them.
 */
#ifndef IDEM_TAP_H
#define IDEM_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define TAP_OK(cond, ...) do {						\
	int tap_c_ = (cond) ? 1 : 0;					\
	printf("%sok %d - ", tap_c_ ? "" : "not ", ++tap_n);		\
	printf(__VA_ARGS__);						\
	printf("\n");							\
	if (!tap_c_) {							\
		tap_failed++;						\
		printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
	}								\
} while (0)

#define TAP_STREQ(got, want, ...) do {					\
	const char *tap_g_ = (got), *tap_w_ = (want);			\
	int tap_e_ = tap_g_ != NULL && tap_w_ != NULL &&		\
	    strcmp(tap_g_, tap_w_) == 0;				\
	TAP_OK(tap_e_, __VA_ARGS__);					\
	if (!tap_e_)							\
		printf("#   got  '%s'\n#   want '%s'\n",		\
		    tap_g_ ? tap_g_ : "(null)", tap_w_ ? tap_w_ : "(null)"); \
} while (0)

/* Print the plan and return the exit status for main(). */
#define TAP_DONE() (printf("1..%d\n", tap_n), tap_failed ? 1 : 0)

#endif
