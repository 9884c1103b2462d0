/*
 * listen.c - a listening socket from an address as the config writes it,
 * for the FastCGI runtime and the metrics listener alike (so that neither
 * depends on the other).  A unix socket is private: created under a umask
 * that leaves it to its owner, then given [server|metrics] socket_group
 * and socket_mode (default 0660), so no other local user can connect at
 * any moment.  A socket inherited from the web server (fd 0, systemd) is
 * not made here and is left as it is.
 */
#include <sys/stat.h>

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

/* A group by name or number: 0, or -1. */
static int
group_id(const char *name, gid_t *gid)
{
	struct group	*gr;
	char		*end;
	unsigned long	 n;

	if ((gr = getgrnam(name)) != NULL) {
		*gid = gr->gr_gid;
		return 0;
	}
	errno = 0;
	n = strtoul(name, &end, 10);
	if (name[0] < '0' || name[0] > '9' || *end != '\0' || errno != 0)
		return -1;
	*gid = (gid_t)n;
	return 0;
}

int
idem_listen_addr(const char *addr, unsigned mode, const char *group)
{
	mode_t	 old;
	gid_t	 gid = (gid_t)-1;
	int	 fd, local;

	if (strncmp(addr, "unix:", 5) == 0)
		addr += 5;
	local = addr[0] == '/' || addr[0] == '.';
	if (local && group != NULL && group_id(group, &gid) == -1) {
		idem_log(IDEM_LOG_ERROR, "runtime: %s: no group %s", addr,
		    group);
		return -1;
	}
	/* Single-threaded still (before the workers): the umask is ours. */
	old = umask(0177);
	fd = FCGX_OpenSocket(addr, 128);
	umask(old);
	if (fd < 0) {
		idem_log(IDEM_LOG_ERROR, "runtime: cannot listen on %s", addr);
		return -1;
	}
	if (!local)
		return fd;
	/* Group first: the mode then opens it to that group only. */
	if ((gid != (gid_t)-1 && chown(addr, (uid_t)-1, gid) == -1) ||
	    chmod(addr, (mode_t)mode) == -1) {
		idem_log(IDEM_LOG_ERROR, "runtime: %s: cannot set group %s, "
		    "mode %04o: %s", addr, group != NULL ? group : "-", mode,
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}
