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

enum idem_stmt_use
idem_stmts_use(const struct idem_stmts *s, const char *sql,
    char name[IDEM_STMT_NAME_LEN])
{
	uint64_t	h;
	unsigned	i, k;

	if (!s->enabled)
		return IDEM_STMT_UNNAMED;
	h = text_hash(sql);
	for (i = 0; i < s->n; i++)
		if (s->hash[i] == h) {
			/* Another text of the same name cannot be prepared
			 * beside it: that one runs unnamed. */
			if (strcmp(s->sql[i], sql) != 0)
				return IDEM_STMT_UNNAMED;
			break;
		}
	if (i == s->n && s->n == IDEM_STMTS_MAX)
		return IDEM_STMT_UNNAMED;
	/* "idem_" and 16 hex digits, without printf (every statement). */
	memcpy(name, "idem_", 5);
	for (k = 0; k < 16; k++)
		name[5 + k] = "0123456789abcdef"[(h >> (60 - 4 * k)) & 0xf];
	name[21] = '\0';
	return i < s->n ? IDEM_STMT_EXECUTE : IDEM_STMT_PREPARE;
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
