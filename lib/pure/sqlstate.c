/*
 * sqlstate.c - which PostgreSQL errors are the database's passing state
 * rather than the request's fault: those a retry of the same request may
 * get past, answered 503 with Retry-After and nothing stored.
 */
#include <string.h>

#include "private.h"

int
idem_sqlstate_transient(const char *st)
{
	/* Whole classes: the connection (08), insufficient resources (53),
	 * operator intervention (57: 57014 statement timeout or cancel,
	 * 57P01 shutdown), transaction rollback (40: 40001 serialization
	 * failure, 40P01 deadlock). */
	static const char *const classes[] = { "08", "53", "57", "40" };
	/* And single codes of other classes: 55P03 lock timeout (lock_
	 * timeout, NOWAIT). */
	static const char *const codes[] = { "55P03" };
	size_t	i;

	if (st == NULL || strlen(st) != 5)
		return 0;
	for (i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strncmp(st, classes[i], 2) == 0)
			return 1;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(st, codes[i]) == 0)
			return 1;
	return 0;
}
