/*
 * test_peer.c - the listeners' guards (peer.c): a TCP peer's address
 * against [server] allow / FCGI_WEB_SERVER_ADDRS, a unix-socket peer's
 * uid against [metrics] allow_uid, which list applies, the log's
 * back-off and socket file modes.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <string.h>

#include "peer.h"
#include "tap.h"

/* A peer as accept() gives it, from its text form. */
static socklen_t
peer(const char *a, struct sockaddr_storage *ss)
{
	struct sockaddr_in	*s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6	*s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_un	*su = (struct sockaddr_un *)ss;

	memset(ss, 0, sizeof(*ss));
	if (strcmp(a, "unix") == 0) {
		su->sun_family = AF_UNIX;
		return sizeof(*su);
	}
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(40000);
		return sizeof(*s4);
	}
	inet_pton(AF_INET6, a, &s6->sin6_addr);
	s6->sin6_family = AF_INET6;
	return sizeof(*s6);
}

static void
test_addr(void)
{
	static const struct {
		const char	*list;
		const char	*peer;
		int		 want;
	} t[] = {
		{ NULL, "203.0.113.9", IDEM_PEER_ALLOW },	/* no list */
		{ "", "203.0.113.9", IDEM_PEER_ALLOW },
		{ " , ", "203.0.113.9", IDEM_PEER_ALLOW },
		{ "127.0.0.1", "127.0.0.1", IDEM_PEER_ALLOW },
		{ "127.0.0.1", "127.0.0.2", IDEM_PEER_REFUSE },
		{ "127.0.0.1", "203.0.113.9", IDEM_PEER_REFUSE },
		{ "10.0.0.1,127.0.0.1", "127.0.0.1", IDEM_PEER_ALLOW },
		{ "10.0.0.1, 127.0.0.1", "127.0.0.1", IDEM_PEER_ALLOW },
		{ "10.0.0.1 127.0.0.1", "127.0.0.1", IDEM_PEER_ALLOW },
		{ "10.0.0.1,127.0.0.1", "10.0.0.2", IDEM_PEER_REFUSE },
		/* a prefix of an address is not the address */
		{ "127.0.0.1", "127.0.0.10", IDEM_PEER_REFUSE },
		{ "127.0.0.10", "127.0.0.1", IDEM_PEER_REFUSE },
		/* IPv6, compared as addresses, not text */
		{ "::1", "::1", IDEM_PEER_ALLOW },
		{ "0:0::1", "::1", IDEM_PEER_ALLOW },
		{ "::1", "::2", IDEM_PEER_REFUSE },
		{ "127.0.0.1", "::1", IDEM_PEER_REFUSE },
		/* a mapped IPv4 peer (a dual-stack socket) is its IPv4 */
		{ "127.0.0.1", "::ffff:127.0.0.1", IDEM_PEER_ALLOW },
		{ "127.0.0.2", "::ffff:127.0.0.1", IDEM_PEER_REFUSE },
		{ "::ffff:127.0.0.1", "127.0.0.1", IDEM_PEER_ALLOW },
		/* junk in the list matches nothing */
		{ "localhost", "127.0.0.1", IDEM_PEER_REFUSE },
		{ "127.0.0.1/8", "127.0.0.1", IDEM_PEER_REFUSE },
		/* a unix socket's peer: the file's mode and group decide */
		{ "127.0.0.1", "unix", IDEM_PEER_ALLOW },
	};
	struct sockaddr_storage	ss;
	socklen_t		sl;
	size_t			i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		sl = peer(t[i].peer, &ss);
		TAP_OK(idem_peer_allowed(t[i].list, (struct sockaddr *)&ss,
		    sl) == (enum idem_peer_verdict)t[i].want,
		    "allow \"%s\", peer %s: %s", t[i].list ? t[i].list : "NULL",
		    t[i].peer, t[i].want ? "allowed" : "refused");
	}
	TAP_OK(idem_peer_allowed("127.0.0.1", NULL, 0) == IDEM_PEER_REFUSE,
	    "no address: refused");
	sl = peer("127.0.0.1", &ss);
	TAP_OK(idem_peer_allowed("127.0.0.1", (struct sockaddr *)&ss, 4) ==
	    IDEM_PEER_REFUSE, "truncated address: refused");
	ss.ss_family = AF_PACKET;
	TAP_OK(idem_peer_allowed("127.0.0.1", (struct sockaddr *)&ss,
	    sizeof(ss)) == IDEM_PEER_REFUSE, "another family: refused");
}

static void
test_uid(void)
{
	static const struct {
		const char	*list;
		unsigned	 uid;
		int		 want;
	} t[] = {
		{ NULL, 65534, IDEM_PEER_ALLOW },
		{ "", 65534, IDEM_PEER_ALLOW },
		{ "110", 110, IDEM_PEER_ALLOW },
		{ "110", 65534, IDEM_PEER_REFUSE },
		{ "110,111", 111, IDEM_PEER_ALLOW },
		{ "110 111", 111, IDEM_PEER_ALLOW },
		{ "110", 11, IDEM_PEER_REFUSE },
		{ "11", 110, IDEM_PEER_REFUSE },
		{ "110x", 110, IDEM_PEER_REFUSE },
		{ "-110", 110, IDEM_PEER_REFUSE },
		{ "99999999999999999999999", 110, IDEM_PEER_REFUSE },
		{ "0", 0, IDEM_PEER_ALLOW },
		{ "110", 0, IDEM_PEER_REFUSE },	/* root is not special */
		{ "110", 1000, IDEM_PEER_ALLOW },	/* the process's own */
	};
	size_t	i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		TAP_OK(idem_uid_allowed(t[i].list, (uid_t)t[i].uid, 1000) ==
		    (enum idem_peer_verdict)t[i].want,
		    "allow_uid \"%s\", uid %u: %s",
		    t[i].list ? t[i].list : "NULL", t[i].uid,
		    t[i].want ? "allowed" : "refused");
}

static void
test_list(void)
{
	TAP_STREQ(idem_peer_server_list("10.0.0.1", "10.0.0.2"), "10.0.0.1",
	    "[server] allow over FCGI_WEB_SERVER_ADDRS");
	TAP_STREQ(idem_peer_server_list(NULL, "10.0.0.2"), "10.0.0.2",
	    "FCGI_WEB_SERVER_ADDRS without [server] allow");
	TAP_STREQ(idem_peer_server_list("", "10.0.0.2"), "10.0.0.2",
	    "an empty allow is unset");
	TAP_OK(idem_peer_server_list(NULL, NULL) == NULL, "neither: any peer");
	TAP_OK(idem_peer_server_list(NULL, " ") == NULL, "blank env: any peer");
}

static void
test_log_due(void)
{
	static const struct {
		unsigned long long	n;
		int			want;
	} t[] = {
		{ 1, 1 }, { 2, 0 }, { 9, 0 }, { 10, 1 }, { 11, 0 }, { 20, 0 },
		{ 100, 1 }, { 101, 0 }, { 1000000, 1 }, { 0, 0 },
	};
	size_t	i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		TAP_OK(idem_peer_log_due(t[i].n) == t[i].want,
		    "refusal %llu logged: %d", t[i].n, t[i].want);
}

static void
test_mode(void)
{
	static const struct {
		const char	*s;
		int		 rc;
		unsigned	 mode;
	} t[] = {
		{ "0660", 0, 0660 }, { "660", 0, 0660 }, { "0600", 0, 0600 },
		{ "0", 0, 0 }, { "0777", 0, 0777 }, { "0666", 0, 0666 },
		{ "", -1, 0 }, { "0668", -1, 0 }, { "1777", -1, 0 },
		{ "4660", -1, 0 }, { "06600", -1, 0 }, { "rw", -1, 0 },
		{ "-660", -1, 0 }, { " 660", -1, 0 },
	};
	unsigned	m;
	size_t		i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		m = 12345;
		TAP_OK(idem_peer_parse_mode(t[i].s, &m) == t[i].rc &&
		    (t[i].rc != 0 || m == t[i].mode),
		    "mode \"%s\": %d %04o", t[i].s, t[i].rc, t[i].mode);
	}
	TAP_OK(idem_peer_parse_mode(NULL, &m) == -1, "mode NULL: -1");
}

int
main(void)
{
	test_addr();
	test_uid();
	test_list();
	test_log_due();
	test_mode();
	return TAP_DONE();
}
