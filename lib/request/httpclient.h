/*
 * httpclient.h - the decisions of the outbound HTTP client (httpclient.c),
 * pure functions kept apart from libcurl's I/O so that they are tested
 * from tables (tests/unit/test_httpclient.c).
 */
#ifndef IDEM_HTTPCLIENT_H
#define IDEM_HTTPCLIENT_H

#include <sys/socket.h>

#include "idem.h"

#define IDEM_HTTP_TIMEOUT_DEFAULT_MS	10000LL
#define IDEM_HTTP_BODY_MAX_DEFAULT	(1024u * 1024u)
#define IDEM_HTTP_HEADERS_MAX		(64u * 1024u)

/*
 * What a finished transfer means: curl_code is its CURLcode, too_large
 * says that our own bound stopped it, status is the HTTP status read (0:
 * none).
 */
enum idem_http_rc idem_http_classify(int curl_code, int too_large,
		    long status);
/*
 * The milliseconds a call may take: the caller's cap, lowered to the time
 * left when the call belongs to a request with a deadline; 0 when no time
 * is left (the call is not made).
 */
long long	 idem_http_budget_ms(long long cap_ms, int has_deadline,
		    long long time_left_ms);
/* A header name and value a request may carry (no CR, LF; a token-ish
 * name without colon or space): 1 or 0. */
int		 idem_http_header_ok(const char *name, const char *value);

/*
 * May a call with idem_http_allow_private() off connect to sa (AF_INET or
 * AF_INET6)?  1 for a global unicast address, 0 for the others (loopback,
 * RFC 1918 and unique local, link-local, CGNAT, unspecified, multicast,
 * broadcast, reserved, documentation, benchmarking, other families); an
 * IPv4 address embedded in IPv6 (mapped, compatible, NAT64 64:ff9b::/96,
 * 6to4) is judged as that IPv4 address.
 */
int		 idem_http_addr_public(const struct sockaddr *sa);

#endif
