/*
 * test_stmts.c - the prepared-statement bookkeeping of one connection
 * (lib/pure/stmts.c): what to send for a text, as a table of situations.
 */
#include <stdio.h>
#include <string.h>

#include "stmts.h"
#include "tap.h"

static const char *const names[] = { "unnamed", "prepare", "execute" };

int
main(void)
{
	struct idem_stmts	 s;
	char			 a[IDEM_STMT_NAME_LEN], b[IDEM_STMT_NAME_LEN];
	char			 sql[64], name[IDEM_STMT_NAME_LEN];
	unsigned		 i;
	static const struct {
		int		 enabled;
		const char	*added;		/* prepared before, or NULL */
		const char	*sql;
		enum idem_stmt_use want;
	} t[] = {
		{ 0, NULL, "SELECT $1", IDEM_STMT_UNNAMED },
		{ 0, "SELECT $1", "SELECT $1", IDEM_STMT_UNNAMED },
		{ 1, NULL, "SELECT $1", IDEM_STMT_PREPARE },
		{ 1, "SELECT $1", "SELECT $1", IDEM_STMT_EXECUTE },
		{ 1, "SELECT $1", "SELECT $2", IDEM_STMT_PREPARE },
		{ 1, "SELECT $1", "SELECT $1 ", IDEM_STMT_PREPARE },
	};

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(&s, 0, sizeof(s));
		s.enabled = t[i].enabled;
		if (t[i].added != NULL)
			idem_stmts_add(&s, t[i].added);
		TAP_STREQ(names[idem_stmts_use(&s, t[i].sql, name)],
		    names[t[i].want], "enabled %d, prepared '%s': '%s' is %s",
		    t[i].enabled, t[i].added ? t[i].added : "", t[i].sql,
		    names[t[i].want]);
		idem_stmts_forget(&s);
	}

	/* The name is the text's: the same in every connection and run. */
	memset(&s, 0, sizeof(s));
	s.enabled = 1;
	idem_stmts_use(&s, "SELECT $1", a);
	idem_stmts_add(&s, "SELECT $1");
	TAP_OK(idem_stmts_use(&s, "SELECT $1", b) == IDEM_STMT_EXECUTE,
	    "executed by name once prepared");
	TAP_STREQ(b, a, "a text has one name (%s)", a);
	idem_stmts_forget(&s);
	idem_stmts_use(&s, "SELECT $2", b);
	TAP_OK(strcmp(a, b) != 0, "another text, another name (%s)", b);
	TAP_OK(strlen(a) == IDEM_STMT_NAME_LEN - 1 &&
	    strncmp(a, "idem_", 5) == 0, "idem_ and 16 hex digits");

	/* Full: the rest run unnamed, nothing is forgotten. */
	memset(&s, 0, sizeof(s));
	s.enabled = 1;
	for (i = 0; i < IDEM_STMTS_MAX; i++) {
		snprintf(sql, sizeof(sql), "SELECT %u + $1", i);
		idem_stmts_add(&s, sql);
	}
	TAP_OK(idem_stmts_add(&s, "SELECT $1") == -1, "a full table refuses");
	TAP_STREQ(names[idem_stmts_use(&s, "SELECT $1", name)], "unnamed",
	    "a new text on a full connection runs unnamed");
	TAP_STREQ(names[idem_stmts_use(&s, "SELECT 0 + $1", name)], "execute",
	    "the first text is still prepared");
	idem_stmts_forget(&s);
	TAP_OK(s.n == 0 && s.enabled, "forget: nothing prepared, still enabled");
	TAP_STREQ(names[idem_stmts_use(&s, "SELECT 0 + $1", name)], "prepare",
	    "after forget, prepared again");
	return TAP_DONE();
}
