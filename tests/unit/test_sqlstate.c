/*
 * test_sqlstate.c - which SQLSTATEs are the database's passing state
 * (idem_sqlstate_transient()): a retry may succeed, the answer is 503.
 */
#include "private.h"
#include "tap.h"

int
main(void)
{
	static const struct {
		const char	*st;
		int		 want;
	} t[] = {
		{ "57014", 1 },		/* statement timeout, query canceled */
		{ "55P03", 1 },		/* lock timeout */
		{ "40001", 1 },		/* serialization failure */
		{ "40P01", 1 },		/* deadlock */
		{ "08006", 1 },		/* connection failure */
		{ "53300", 1 },		/* too many connections */
		{ "57P01", 1 },		/* admin shutdown */
		{ "55000", 0 },		/* object not in prerequisite state */
		{ "55006", 0 },		/* object in use */
		{ "23505", 0 },		/* unique violation */
		{ "22P02", 0 },		/* invalid text representation */
		{ "42P01", 0 },		/* undefined table */
		{ "P0001", 0 },		/* raise_exception */
		{ "", 0 },
		{ "4000", 0 },
		{ "400011", 0 },
		{ NULL, 0 },
	};
	size_t	i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		TAP_OK(idem_sqlstate_transient(t[i].st) == t[i].want,
		    "%s: %s", t[i].st != NULL ? t[i].st : "NULL",
		    t[i].want ? "transient" : "not transient");
	return TAP_DONE();
}
