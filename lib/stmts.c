/*
 * stmts.c - the named prepared statements of one pooled connection: which
 * SQL texts the server has already parsed and planned for it, under which
 * name.  Pure bookkeeping; the pool owns one per connection, the pipeline
 * fills it.
 */
#include "config.h"	/* configure's switches: rebuilt when they change */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stmts.h"

/* FNV-1a: the name is a function of the text, the lookup compares both. */
static uint64_t
text_hash(const char *sql)
{
	uint64_t	h = 14695981039346656037ULL;

	for (; *sql != '\0'; sql++) {
		h ^= (unsigned char)*sql;
		h *= 1099511628211ULL;
	}
	return h;
}

void
idem_stmts_name(const char *sql, char name[IDEM_STMT_NAME_LEN])
{
	snprintf(name, IDEM_STMT_NAME_LEN, "idem_%016llx",
	    (unsigned long long)text_hash(sql));
}

static int
stmts_find(const struct idem_stmts *s, const char *sql)
{
	uint64_t	h = text_hash(sql);
	unsigned	i;

	for (i = 0; i < s->n; i++)
		if (s->hash[i] == h && strcmp(s->sql[i], sql) == 0)
			return 1;
	return 0;
}

enum idem_stmt_use
idem_stmts_use(const struct idem_stmts *s, const char *sql)
{
	uint64_t	h;
	unsigned	i;

	if (!s->enabled)
		return IDEM_STMT_UNNAMED;
	if (stmts_find(s, sql))
		return IDEM_STMT_EXECUTE;
	/* Another text with the same name cannot be prepared beside it. */
	h = text_hash(sql);
	for (i = 0; i < s->n; i++)
		if (s->hash[i] == h)
			return IDEM_STMT_UNNAMED;
	return s->n < IDEM_STMTS_MAX ? IDEM_STMT_PREPARE : IDEM_STMT_UNNAMED;
}

int
idem_stmts_add(struct idem_stmts *s, const char *sql)
{
	char	*copy;

	if (s->n == IDEM_STMTS_MAX || (copy = strdup(sql)) == NULL)
		return -1;
	s->hash[s->n] = text_hash(sql);
	s->sql[s->n++] = copy;
	return 0;
}

void
idem_stmts_forget(struct idem_stmts *s)
{
	unsigned	i;

	for (i = 0; i < s->n; i++)
		free(s->sql[i]);
	s->n = 0;
}
