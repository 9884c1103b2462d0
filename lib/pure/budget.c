/*
 * budget.c - who may take how much of [server] max_buffered (budget.h).
 */
#include "config.h"	/* configure's switches: rebuilt when they change */
#include "budget.h"

/* The most held once a holding of n bytes of kind is admitted. */
static size_t
ceiling(size_t n, enum idem_budget_kind kind, size_t max)
{
	if (n <= IDEM_BUDGET_SMALL)
		return max;
	return kind == IDEM_BUDGET_ANSWER ? max / 4 * 3 : max / 2;
}

enum idem_budget_verdict
idem_budget_admit(size_t held, size_t n, enum idem_budget_kind kind,
    size_t max)
{
	size_t	top = ceiling(n, kind, max);

	return n <= top && held <= top - n ? IDEM_BUDGET_ADMIT :
	    IDEM_BUDGET_REFUSE;
}
