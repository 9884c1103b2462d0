/*
 * stubs.h - what a test registers only to have one: a handler that does
 * nothing and a member check that refuses "zzz".  For the unit tests and
 * the fuzz harnesses of the router and of request bodies.
 */
#ifndef IDEM_STUBS_H
#define IDEM_STUBS_H

#include <stdio.h>
#include <string.h>

#include "internal.h"

static inline int
nop(idem_req *req, void *arg)
{
	(void)req;
	(void)arg;
	return 0;
}

/* A string member's check: "zzz" is refused, "must not be zzz". */
static inline int
not_zzz(yajl_val v, char *why, size_t whylen)
{
	if (strcmp(v->u.string, "zzz") != 0)
		return 0;
	snprintf(why, whylen, "must not be zzz");
	return -1;
}

#endif
