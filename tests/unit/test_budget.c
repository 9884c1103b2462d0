/*
 * test_budget.c - who may take how much of [server] max_buffered
 * (lib/pure/budget.c), one table row per case.
 */
#include "budget.h"
#include "tap.h"

#define KIB	((size_t)1024)
#define MIB	(1024 * KIB)

static const struct {
	size_t			 held, n;
	enum idem_budget_kind	 kind;
	size_t			 max;
	enum idem_budget_verdict want;
	const char		*why;
} cases[] = {
	{ 0, 31, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a small body, nothing held" },
	{ 32 * MIB - 31, 31, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a small body fills the budget exactly" },
	{ 32 * MIB - 30, 31, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "a small body one byte over" },
	{ 16 * MIB, 64 * KIB, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "64 KiB is small: past half the budget" },
	{ 0, 64 * KIB + 1, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a large body, nothing held" },
	{ 15 * MIB, MIB, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a large body up to half" },
	{ 15 * MIB + 1, MIB, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "a large body past half" },
	{ 16 * MIB, MIB, IDEM_BUDGET_ANSWER, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a large answer past half" },
	{ 23 * MIB, MIB, IDEM_BUDGET_ANSWER, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a large answer up to three quarters" },
	{ 23 * MIB + 1, MIB, IDEM_BUDGET_ANSWER, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "a large answer past three quarters" },
	{ 31 * MIB, 2 * KIB, IDEM_BUDGET_ANSWER, 32 * MIB, IDEM_BUDGET_ADMIT,
	  "a small answer past three quarters" },
	{ 0, 17 * MIB, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "a body over half, alone" },
	{ 0, 33 * MIB, IDEM_BUDGET_ANSWER, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "an answer over the budget, alone" },
	{ 40 * MIB, 1, IDEM_BUDGET_BODY, 32 * MIB, IDEM_BUDGET_REFUSE,
	  "held already over (no wrap)" },
	{ (size_t)-1, (size_t)-1, IDEM_BUDGET_ANSWER, (size_t)-1,
	  IDEM_BUDGET_REFUSE, "the largest values (no wrap)" },
	{ 0, 0, IDEM_BUDGET_BODY, 0, IDEM_BUDGET_ADMIT,
	  "nothing into nothing" },
};

int
main(void)
{
	size_t	i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		TAP_OK(idem_budget_admit(cases[i].held, cases[i].n,
		    cases[i].kind, cases[i].max) == cases[i].want,
		    "budget: %s -> %s", cases[i].why,
		    cases[i].want == IDEM_BUDGET_ADMIT ? "admit" : "refuse");
	return TAP_DONE();
}
