/*
 * test_fields.c - the header-field list (lib/pure/fields.h) that the HTTP
 * client and libidem_test read "Name: value" lines into: what each line
 * becomes, and the lookup by name in any case.
 */
#include <stdio.h>
#include <string.h>

#include "fields.h"
#include "tap.h"

static const struct {
	const char		*line;
	enum idem_fields_rc	 want;
	const char		*name, *value;	/* when added */
} rows[] = {
	{ "Content-Type: application/json", IDEM_FIELDS_ADDED,
	  "Content-Type", "application/json" },
	{ "Retry-After:5", IDEM_FIELDS_ADDED, "Retry-After", "5" },
	{ "X-Pad: \t  both sides \t ", IDEM_FIELDS_ADDED, "X-Pad",
	  "both sides" },
	{ "X-Empty:", IDEM_FIELDS_ADDED, "X-Empty", "" },
	{ "X-Blank:   ", IDEM_FIELDS_ADDED, "X-Blank", "" },
	{ "Location: /v1/a:b", IDEM_FIELDS_ADDED, "Location", "/v1/a:b" },
	{ "", IDEM_FIELDS_NOT_A_FIELD, NULL, NULL },
	{ "no colon here", IDEM_FIELDS_NOT_A_FIELD, NULL, NULL },
	{ ": no name", IDEM_FIELDS_NOT_A_FIELD, NULL, NULL },
};

int
main(void)
{
	struct idem_fields	 f = { NULL, 0 };
	size_t			 i, n = 0;
	enum idem_fields_rc	 rc;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rc = idem_fields_add_line(&f, rows[i].line,
		    strlen(rows[i].line));
		TAP_OK(rc == rows[i].want, "row %zu '%s': verdict %d (want %d)",
		    i, rows[i].line, (int)rc, (int)rows[i].want);
		if (rows[i].want != IDEM_FIELDS_ADDED)
			continue;
		n++;
		TAP_OK(f.n == n, "row %zu: %zu fields (want %zu)", i, f.n, n);
		if (f.n != n)
			continue;
		TAP_STREQ(f.v[n - 1].name, rows[i].name, "row %zu: name", i);
		TAP_STREQ(f.v[n - 1].value, rows[i].value, "row %zu: value",
		    i);
	}
	/* The line is not read past its length. */
	rc = idem_fields_add_line(&f, "X-Cut: yes\r\nX-Next: no", 10);
	TAP_OK(rc == IDEM_FIELDS_ADDED && strcmp(f.v[f.n - 1].value, "yes")
	    == 0, "a line of 10 bytes: value 'yes' only");
	TAP_STREQ(idem_fields_get(&f, "content-type"), "application/json",
	    "lookup in another case");
	TAP_STREQ(idem_fields_get(&f, "RETRY-AFTER"), "5",
	    "lookup in upper case");
	TAP_OK(idem_fields_get(&f, "X-Next") == NULL,
	    "a field past the line's length is not there");
	TAP_OK(idem_fields_get(&f, NULL) == NULL, "NULL name: NULL");
	TAP_OK(idem_fields_add_line(&f, "Retry-After: 9", 14) ==
	    IDEM_FIELDS_ADDED && strcmp(idem_fields_get(&f, "retry-after"),
	    "5") == 0, "a repeated name: the first one is found");
	idem_fields_free(&f);
	TAP_OK(f.n == 0 && f.v == NULL, "freed: empty again");
	TAP_OK(idem_fields_get(&f, "Retry-After") == NULL,
	    "an empty list finds nothing");
	idem_fields_free(&f);
	TAP_OK(f.n == 0, "freed twice: still empty");
	return TAP_DONE();
}
