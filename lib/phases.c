/*
 * phases.c - a phased handler as a table of {recovery point, phase}: the
 * library resumes at the stored point and commits each phase with the
 * next entry's point, instead of the handler switching on point names.
 */
#include <string.h>

#include "private.h"

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
		rc = table[i].fn(req, arg);
		if (rc == -1)
			return -1;
		if (rc == IDEM_PHASE_END || table[i + 1].point == NULL)
			return 0;	/* the response is set (or the 500) */
		if (idem_txn_phased(req) &&
		    idem_req_phase_commit(req, table[i + 1].point) == -1)
			return -1;
	}
	return 0;
}
