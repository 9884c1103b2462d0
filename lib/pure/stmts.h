/*
 * stmts.h - the named prepared statements of one database connection
 * (stmts.c).  Depends on nothing else of idem.
 */
#ifndef IDEM_STMTS_H
#define IDEM_STMTS_H

#include <stdint.h>

/* A connection prepares at most this many texts; the rest run unnamed. */
#define IDEM_STMTS_MAX		64
#define IDEM_STMT_NAME_LEN	22	/* "idem_" + 16 hex digits + NUL */

/*
 * The statements the server holds for one connection.  enabled is 0 where
 * statements must stay unnamed ([database] prepared_statements = off, or a
 * pooler that multiplexes sessions was detected).  always is 1 for
 * prepared_statements = on: a session that lost its statements prepares
 * them again instead of giving them up.  The server forgets them when the
 * session ends: forget them here when it is reset.
 */
struct idem_stmts {
	int		 enabled;
	int		 always;
	unsigned	 n;
	uint64_t	 hash[IDEM_STMTS_MAX];
	char		*sql[IDEM_STMTS_MAX];
};

/* What to send for one statement. */
enum idem_stmt_use {
	IDEM_STMT_UNNAMED,	/* PQsendQueryParams: parsed and planned */
	IDEM_STMT_PREPARE,	/* PQsendPrepare, then execute it by name */
	IDEM_STMT_EXECUTE,	/* PQsendQueryPrepared: prepared before */
};

/*
 * What to send for sql, and (unless IDEM_STMT_UNNAMED) its name in name:
 * a function of the text alone.  No side effects.
 */
enum idem_stmt_use idem_stmts_use(const struct idem_stmts *s, const char *sql,
	    char name[IDEM_STMT_NAME_LEN]);
/* Remember that the server prepared sql: 0, or -1 (full, out of memory). */
int	idem_stmts_add(struct idem_stmts *s, const char *sql);
/* The session ended: nothing is prepared any more (enabled is kept). */
void	idem_stmts_forget(struct idem_stmts *s);

#endif
