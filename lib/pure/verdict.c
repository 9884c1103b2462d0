/*
 * verdict.c - the exactly-once decision: what a request to an idempotent
 * route does, given what flight 1 found.  Pure; the SQL that produces the
 * row (idem_claim(), sql/) and the I/O around it are in idempotency.c.
 */
#include "internal.h"

enum idem_verdict
idem_claim_verdict(const struct idem_claim_row *row, int phased)
{
	if (!row->tenant_ok)
		return IDEM_V_UNAUTHORIZED;
	/*
	 * The route remembers keys past their expiry and this request was
	 * executed under this key before: it is not executed again, and its
	 * answer is gone.  idem_claim() says so only when nothing live holds
	 * the key (and then tries no lock), so it goes before the rest.
	 */
	if (row->remembered)
		return IDEM_V_EXPIRED;
	/* Another request holds the key's lock: it is deciding or running. */
	if (row->lock_tried && !row->lock_got)
		return IDEM_V_IN_FLIGHT;
	if (phased ? row->inserted : row->lock_got && row->claimed)
		return IDEM_V_EXECUTE;
	if (phased && row->taken)
		return IDEM_V_RESUME;
	/* Allowed to write, yet nothing written: only a writer that ignores
	 * the lock can cause that. */
	if (row->lock_got && row->claimed)
		return IDEM_V_RACED;
	if (!row->has_record)
		return IDEM_V_RACED;
	if (!row->same_request)
		return IDEM_V_REUSED;
	if (row->completed)
		return IDEM_V_REPLAY;
	/* In progress: its owner's lease is live, or another request took
	 * the lapsed one over first. */
	return IDEM_V_IN_FLIGHT;
}
