/*
 * test_phases.c - what a phase's return means (idem_phase_step()): a
 * handler's 0 after a response ends the request, so does NEXT after a
 * response; only NEXT without one, before the last phase, goes on.
 */
#include "private.h"
#include "tap.h"

int
main(void)
{
	static const struct {
		int			rc, has_response, last;
		enum idem_phase_step	want;
		const char		*what;
	} t[] = {
		{ IDEM_PHASE_NEXT, 0, 0, IDEM_STEP_NEXT, "NEXT, no response" },
		{ IDEM_PHASE_NEXT, 1, 0, IDEM_STEP_END_MISUSED,
		    "NEXT after a response" },
		{ IDEM_PHASE_NEXT, 0, 1, IDEM_STEP_END, "NEXT from the last" },
		{ IDEM_PHASE_NEXT, 1, 1, IDEM_STEP_END,
		    "NEXT from the last, with a response" },
		{ 0, 1, 0, IDEM_STEP_END, "0 (return idem_resp_problem())" },
		{ 0, 0, 0, IDEM_STEP_END, "0 without a response (a 500)" },
		{ IDEM_PHASE_END, 1, 0, IDEM_STEP_END, "END" },
		{ -1, 0, 0, IDEM_STEP_FAIL, "-1" },
		{ -1, 1, 0, IDEM_STEP_FAIL, "-1 after a response" },
		{ -1, 0, 1, IDEM_STEP_FAIL, "-1 from the last" },
	};
	size_t	i;

	TAP_OK(IDEM_PHASE_NEXT != 0 && IDEM_PHASE_NEXT != IDEM_PHASE_END &&
	    IDEM_PHASE_NEXT != -1, "IDEM_PHASE_NEXT is none of a handler's "
	    "returns");
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		TAP_OK(idem_phase_step(t[i].rc, t[i].has_response, t[i].last) ==
		    t[i].want, "%s", t[i].what);
	return TAP_DONE();
}
