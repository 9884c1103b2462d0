/*
 * peer.h - who may connect: the pure decisions behind the listeners'
 * guards (a TCP peer's address against an allow list, a unix-socket
 * peer's uid against [metrics] allow_uid, a socket file's mode as the
 * config writes it).  No sockets are read here: callers pass what
 * accept() and SO_PEERCRED returned.
 */
#ifndef IDEM_PEER_H
#define IDEM_PEER_H

#include <sys/types.h>
#include <sys/socket.h>

enum idem_peer_verdict {
	IDEM_PEER_REFUSE = 0,	/* close before reading a byte */
	IDEM_PEER_ALLOW = 1
};

/*
 * A peer of a listening socket.  list: comma- or blank-separated IPv4/IPv6
 * addresses; NULL or empty allows every peer.  A unix-socket peer is
 * allowed (the socket file's mode and group decide who reaches it); an
 * IPv4-mapped IPv6 peer (::ffff:a.b.c.d) is compared as a.b.c.d.
 */
enum idem_peer_verdict idem_peer_allowed(const char *list,
    const struct sockaddr *sa, socklen_t salen);

/*
 * A unix-socket peer's uid (SO_PEERCRED).  list: comma- or blank-separated
 * numeric uids; NULL or empty allows every uid.  The process's own uid
 * (self) is always allowed: it could read the figures anyway.
 */
enum idem_peer_verdict idem_uid_allowed(const char *list, uid_t uid,
    uid_t self);

/*
 * Which address list guards the FastCGI listener: [server] allow when
 * set, else the FCGI_WEB_SERVER_ADDRS environment variable (the
 * convention libfcgi and mod_fcgid follow), else NULL (every peer).
 */
const char *idem_peer_server_list(const char *cfg_allow, const char *env);

/* Whether the n-th refusal (from 1) is logged: 1, 10, 100, ... so that a
 * flood of refused peers cannot flood the log. */
int idem_peer_log_due(unsigned long long n);

/* A socket file mode as written ("0660", "660", "0600"): 0, or -1. */
int idem_peer_parse_mode(const char *s, unsigned *mode);

#endif
