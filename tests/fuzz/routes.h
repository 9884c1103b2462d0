/*
 * routes.h - the one route table of the request and router fuzz
 * harnesses: the payments sample's routes, which have every shape the
 * router knows (literal, parameter, parameter then literal, two methods on
 * one path).
 */
#ifndef FUZZ_ROUTES_H
#define FUZZ_ROUTES_H

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../unit/stubs.h"

static const struct fuzz_route {
	const char	*method, *pattern;
} fuzz_routes[] = {
	{ "POST", "/v1/payments" },
	{ "GET", "/v1/payments" },
	{ "GET", "/v1/payments/:id" },
	{ "POST", "/v1/payments/:id/refunds" },
	{ "GET", "/healthz" },
};
#define FUZZ_NROUTES	(sizeof(fuzz_routes) / sizeof(fuzz_routes[0]))

/* Add the table to r (each route's arg: its entry); aborts on failure. */
static void
fuzz_routes_add(struct idem_router *r)
{
	size_t	i;

	for (i = 0; i < FUZZ_NROUTES; i++)
		if (idem_router_add(r, fuzz_routes[i].method,
		    fuzz_routes[i].pattern, 0, nop,
		    (void *)(uintptr_t)&fuzz_routes[i]) == -1)
			abort();
}

/* The harness's router: the table above, added once. */
static struct idem_router	 router;

int	LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_routes_add(&router);
	return 0;
}

/* p's n bytes as a string; aborts when out of memory. */
static char *
dupn(const void *p, size_t n)
{
	char	*s;

	if ((s = malloc(n + 1)) == NULL)
		abort();
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

#endif
