/*
 * routes.h - the one route table of the request and router fuzz
 * harnesses: the payments sample's routes, which have every shape the
 * router knows (literal, parameter, parameter then literal, two methods on
 * one path).
 */
#ifndef FUZZ_ROUTES_H
#define FUZZ_ROUTES_H

#include <stdlib.h>

#include "internal.h"

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

static int
fuzz_handler(idem_req *req, void *arg)
{
	(void)req;
	(void)arg;
	return 0;
}

/* Add the table to r (each route's arg: its entry); aborts on failure. */
static void
fuzz_routes_add(struct idem_router *r)
{
	size_t	i;

	for (i = 0; i < FUZZ_NROUTES; i++)
		if (idem_router_add(r, fuzz_routes[i].method,
		    fuzz_routes[i].pattern, 0, fuzz_handler,
		    (void *)(uintptr_t)&fuzz_routes[i]) == -1)
			abort();
}

#endif
