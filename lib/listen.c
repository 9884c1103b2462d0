/*
 * listen.c - a listening socket from an address as the config writes it,
 * for the FastCGI runtime and the metrics listener alike (so that neither
 * depends on the other).
 */
#include <sys/stat.h>

#include <string.h>

#include "private.h"

int
idem_listen_addr(const char *addr)
{
	int	fd;

	if (strncmp(addr, "unix:", 5) == 0)
		addr += 5;
	if ((fd = FCGX_OpenSocket(addr, 128)) < 0) {
		idem_log(IDEM_LOG_ERROR, "runtime: cannot listen on %s", addr);
		return -1;
	}
	/* Web servers run as another user (www-data). */
	if (addr[0] == '/' || addr[0] == '.')
		chmod(addr, 0666);
	return fd;
}
