/*
 * userconf.h - the database and the configuration file of the programs
 * that link libidem_test as a user's test does (r_harness, r_doubles).
 */
#ifndef USERCONF_H
#define USERCONF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* IDEM_REGRESS_CONNINFO; when unset, the program skips (exits 0). */
static const char *
userconf_conninfo(void)
{
	const char	*conninfo = getenv("IDEM_REGRESS_CONNINFO");

	if (conninfo == NULL || *conninfo == '\0') {
		printf("1..0 # SKIP IDEM_REGRESS_CONNINFO is not set\n");
		exit(0);
	}
	return conninfo;
}

/* A new file under $TMPDIR named after tag (its path into path) with fmt
 * and its arguments; bails out when it cannot be written. */
static void __attribute__((format(printf, 4, 5)))
userconf_write(char *path, size_t len, const char *tag, const char *fmt, ...)
{
	const char	*tmp = getenv("TMPDIR");
	va_list		 ap;
	FILE		*f;
	int		 fd;

	snprintf(path, len, "%s/idem-%s-XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : P_tmpdir, tag);
	if ((fd = mkstemp(path)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		printf("Bail out! cannot write a config\n");
		exit(1);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

#endif
