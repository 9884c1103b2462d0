/*
 * test_confdoc.c - idem.conf(5) and the parser agree: every key the
 * parser reads in a built-in section (idem_cfg_key_nth(), from its own
 * tables) has an ".It Ic KEY No =" item under that section's ".Ss" in
 * man/idem.conf.5 ($srcdir), and every such item is a key the parser
 * takes ("[section] key = x" gives no "unknown key/section" error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "tap.h"

#define DOC_KEYS_MAX	256

struct doc_key {
	char	section[32];
	char	key[64];
};

/* The section an ".Ss" line opens: "[server]" -> server, "[route \(dq"
 * -> route; "" for any other (Application sections). */
static void
section_of(const char *line, char *out, size_t outlen)
{
	size_t	n;

	out[0] = '\0';
	if (strncmp(line, ".Ss [", 5) != 0)
		return;
	n = strcspn(line + 5, "] \\\n");
	if (n < outlen)
		snprintf(out, outlen, "%.*s", (int)n, line + 5);
}

/* The keys of idem.conf(5): each "Ic KEY No =" of an ".It" line. */
static size_t
doc_keys(const char *path, struct doc_key *keys, size_t max)
{
	FILE	*f = fopen(path, "r");
	char	 line[1024], sect[32] = "", *p, *e;
	size_t	 n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, ".Sh", 3) == 0 || strncmp(line, ".Ss", 3) == 0)
			section_of(line, sect, sizeof(sect));
		if (sect[0] == '\0' || strncmp(line, ".It ", 4) != 0)
			continue;
		for (p = line; (p = strstr(p, "Ic ")) != NULL; p = e) {
			p += 3;
			e = p + strcspn(p, " \n");
			if (strncmp(e, " No =", 5) != 0 || n == max ||
			    (size_t)(e - p) >= sizeof(keys[n].key))
				continue;
			snprintf(keys[n].section, sizeof(keys[n].section), "%s",
			    sect);
			snprintf(keys[n].key, sizeof(keys[n].key), "%.*s",
			    (int)(e - p), p);
			n++;
		}
	}
	fclose(f);
	return n;
}

/* Does the parser take [section] key?  Its value may be wrong ("x"):
 * only an unknown key or section is not taking it. */
static int
parser_takes(const char *section, const char *key, char *err, size_t len)
{
	struct idem_cfg	 cfg;
	char		 text[256];
	int		 rc;

	if (strcmp(section, "route") == 0)
		snprintf(text, sizeof(text), "[route \"POST /x\"]\n%s = x\n",
		    key);
	else if (strcmp(section, "inbox") == 0)
		snprintf(text, sizeof(text), "[inbox \"x\"]\n%s = x\n", key);
	else
		snprintf(text, sizeof(text), "[%s]\n%s = x\n", section, key);
	idem_cfg_init(&cfg);
	err[0] = '\0';
	rc = idem_cfg_parse(&cfg, "t.ini", text, strlen(text), err, len);
	idem_cfg_free(&cfg);
	return rc == 0 || (strstr(err, "unknown key") == NULL &&
	    strstr(err, "unknown section") == NULL);
}

int
main(void)
{
	static struct doc_key	 doc[DOC_KEYS_MAX];
	const char		*srcdir = getenv("srcdir"), *s, *k;
	char			 path[1024], err[512];
	size_t			 ndoc, i, j, ncode = 0;

	snprintf(path, sizeof(path), "%s/man/idem.conf.5",
	    srcdir != NULL ? srcdir : ".");
	ndoc = doc_keys(path, doc, DOC_KEYS_MAX);
	TAP_OK(ndoc > 0, "%s: %lu keys documented", path,
	    (unsigned long)ndoc);
	/* Every key of the code in the page, under its section. */
	for (i = 0; idem_cfg_key_nth(i, &s, &k); i++, ncode++) {
		for (j = 0; j < ndoc; j++)
			if (strcmp(doc[j].section, s) == 0 &&
			    strcmp(doc[j].key, k) == 0)
				break;
		TAP_OK(j < ndoc, "[%s] %s: in idem.conf(5)", s, k);
	}
	TAP_OK(ncode > 0, "the parser reads %lu keys", (unsigned long)ncode);
	/* Every key of the page read by the parser, and it says so. */
	for (j = 0; j < ndoc; j++) {
		TAP_OK(parser_takes(doc[j].section, doc[j].key, err,
		    sizeof(err)), "[%s] %s of idem.conf(5): a key of the "
		    "parser (%s)", doc[j].section, doc[j].key, err);
		for (i = 0; idem_cfg_key_nth(i, &s, &k); i++)
			if (strcmp(doc[j].section, s) == 0 &&
			    strcmp(doc[j].key, k) == 0)
				break;
		TAP_OK(idem_cfg_key_nth(i, &s, &k),
		    "[%s] %s of idem.conf(5): among idem_cfg_key_nth()'s",
		    doc[j].section, doc[j].key);
	}
	/* ... and the check can fail: a key the parser does not know. */
	TAP_OK(!parser_takes("server", "no_such_key", err, sizeof(err)),
	    "[server] no_such_key is not taken (%s)", err);
	return TAP_DONE();
}
