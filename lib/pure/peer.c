/*
 * peer.c - who may connect: a TCP peer's address against an allow list,
 * a unix-socket peer's uid against a uid list, a socket file's mode.
 * Pure: the listeners (conns.c, metrics.c, listen.c) do the I/O.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"	/* configure's switches: rebuilt when they change */
#include "peer.h"

/* The next token of a comma- or blank-separated list: its length, 0 at
 * the end.  *p is moved past it. */
static size_t
next_token(const char **p, const char **tok)
{
	const char	*s = *p, *e;

	while (*s == ' ' || *s == ',' || *s == '\t')
		s++;
	for (e = s; *e != '\0' && *e != ',' && *e != ' ' && *e != '\t'; e++)
		continue;
	*tok = s;
	*p = e;
	return (size_t)(e - s);
}

static int
list_empty(const char *list)
{
	const char	*p = list, *t;

	return list == NULL || next_token(&p, &t) == 0;
}

enum idem_peer_verdict
idem_peer_allowed(const char *list, const struct sockaddr *sa,
    socklen_t salen)
{
	const struct sockaddr_in6	*s6;
	char				 t[INET6_ADDRSTRLEN];
	const char			*p = list, *tok;
	unsigned char			 want[16], got[16];
	size_t				 n, glen;
	int				 fam;

	if (sa == NULL || salen < (socklen_t)sizeof(sa->sa_family))
		return IDEM_PEER_REFUSE;
	if (sa->sa_family == AF_UNIX)
		return IDEM_PEER_ALLOW;
	if (list_empty(list))
		return IDEM_PEER_ALLOW;
	/* The peer as bytes of its family, a mapped IPv4 one as IPv4. */
	if (sa->sa_family == AF_INET &&
	    salen >= (socklen_t)sizeof(struct sockaddr_in)) {
		fam = AF_INET;
		memcpy(got, &((const struct sockaddr_in *)(const void *)sa)->
		    sin_addr, 4);
		glen = 4;
	} else if (sa->sa_family == AF_INET6 &&
	    salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
		s6 = (const struct sockaddr_in6 *)(const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			fam = AF_INET;
			memcpy(got, s6->sin6_addr.s6_addr + 12, 4);
			glen = 4;
		} else {
			fam = AF_INET6;
			memcpy(got, s6->sin6_addr.s6_addr, 16);
			glen = 16;
		}
	} else
		return IDEM_PEER_REFUSE;
	/* Compared as addresses, not text: "::1" and "0::1" are one. */
	while ((n = next_token(&p, &tok)) > 0) {
		if (n >= sizeof(t))
			continue;
		memcpy(t, tok, n);
		t[n] = '\0';
		if (inet_pton(fam, t, want) == 1 &&
		    memcmp(want, got, glen) == 0)
			return IDEM_PEER_ALLOW;
		/* "::ffff:a.b.c.d" in the list matches an IPv4 peer too. */
		if (fam == AF_INET && inet_pton(AF_INET6, t, want) == 1 &&
		    IN6_IS_ADDR_V4MAPPED((struct in6_addr *)(void *)want) &&
		    memcmp(want + 12, got, 4) == 0)
			return IDEM_PEER_ALLOW;
	}
	return IDEM_PEER_REFUSE;
}

enum idem_peer_verdict
idem_uid_allowed(const char *list, uid_t uid, uid_t self)
{
	const char		*p = list, *tok;
	char			 t[24], *end;
	unsigned long long	 v;
	size_t			 n;

	if (uid == self || list_empty(list))
		return IDEM_PEER_ALLOW;
	while ((n = next_token(&p, &tok)) > 0) {
		if (n >= sizeof(t) || tok[0] < '0' || tok[0] > '9')
			continue;
		memcpy(t, tok, n);
		t[n] = '\0';
		errno = 0;
		v = strtoull(t, &end, 10);
		if (errno == 0 && *end == '\0' && v == (unsigned long long)uid)
			return IDEM_PEER_ALLOW;
	}
	return IDEM_PEER_REFUSE;
}

const char *
idem_peer_server_list(const char *cfg_allow, const char *env)
{
	if (!list_empty(cfg_allow))
		return cfg_allow;
	if (!list_empty(env))
		return env;
	return NULL;
}

int
idem_peer_log_due(unsigned long long n)
{
	while (n >= 10 && n % 10 == 0)
		n /= 10;
	return n == 1;
}

int
idem_peer_parse_mode(const char *s, unsigned *mode)
{
	unsigned	 m = 0;
	size_t		 i, n;

	if (s == NULL || (n = strlen(s)) == 0 || n > 4)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '7')
			return -1;
		m = m * 8 + (unsigned)(s[i] - '0');
	}
	/* Permission bits only: no setuid, setgid or sticky on a socket. */
	if (m > 0777)
		return -1;
	*mode = m;
	return 0;
}
