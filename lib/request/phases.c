/*
 * phases.c - a phased handler as a table of {recovery point, phase}: the
 * library resumes at the stored point and commits each phase with the
 * next entry's point, instead of the handler switching on point names.
 */
#include <string.h>

#include "private.h"

enum idem_phase_step
idem_phase_step(int rc, int has_response, int last)
{
	if (rc == -1)
		return IDEM_STEP_FAIL;
	/* Anything but NEXT is a handler's return: the response is set. */
	if (rc != IDEM_PHASE_NEXT || last)
		return IDEM_STEP_END;
	/* NEXT with a response set would let the next phase replace it. */
	return has_response ? IDEM_STEP_END_MISUSED : IDEM_STEP_NEXT;
}

int
idem_req_phases(idem_req *req, const struct idem_phase *table, void *arg)
{
	const char	*rp = idem_req_recovery_point(req);
	size_t		 i = 0;
	int		 rc;

	if (table == NULL || table[0].point == NULL)
		return -1;
	/* Atomic routes have no point: all phases, one transaction. */
	if (rp != NULL) {
		while (table[i].point != NULL && strcmp(table[i].point, rp) != 0)
			i++;
		if (table[i].point == NULL) {
			idem_log(IDEM_LOG_ERROR, "recovery point \"%.64s\" is "
			    "not in the route's phase table", rp);
			return -1;
		}
	}
	for (; table[i].point != NULL; i++) {
		/* A phase starts only on a lease still proven ours. */
		if (idem_req_lease_check(req) != IDEM_LEASE_SURE)
			return -1;
		rc = table[i].fn(req, arg);
		switch (idem_phase_step(rc, req->status != 0,
		    table[i + 1].point == NULL)) {
		case IDEM_STEP_FAIL:
			return -1;
		case IDEM_STEP_END_MISUSED:
			idem_log(IDEM_LOG_WARN, "phase \"%.64s\" set a %d "
			    "response and returned IDEM_PHASE_NEXT: the response "
			    "ends the request", table[i].point, req->status);
			return 0;
		case IDEM_STEP_END:
			return 0;	/* the response is set (or the 500) */
		case IDEM_STEP_NEXT:
			break;
		}
		if (idem_txn_phased(req) &&
		    idem_req_phase_commit(req, table[i + 1].point) == -1)
			return -1;
	}
	return 0;
}
