/*
 * acquirer.c - a minimal HTTP/1.0 client for the card acquirer: one POST
 * per charge, carrying our derived Idempotency-Key so that the acquirer
 * answers a repeated call with the same charge instead of a second one.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "acquirer.h"

#define RESP_MAX	65536

static int
parse_url(const char *url, char *host, size_t hostlen, char *port,
    size_t portlen, char *path, size_t pathlen)
{
	const char	*p, *h, *c, *s;

	if (strncmp(url, "http://", 7) != 0)
		return -1;
	h = url + 7;
	s = strchr(h, '/');
	if (s == NULL)
		s = h + strlen(h);
	c = memchr(h, ':', (size_t)(s - h));
	p = c ? c + 1 : "80";
	if ((size_t)((c ? c : s) - h) >= hostlen || (c && (size_t)(s - p) >=
	    portlen) || strlen(s) + 1 >= pathlen)
		return -1;
	memcpy(host, h, (size_t)((c ? c : s) - h));
	host[(c ? c : s) - h] = '\0';
	if (c) {
		memcpy(port, p, (size_t)(s - p));
		port[s - p] = '\0';
	} else
		snprintf(port, portlen, "80");
	snprintf(path, pathlen, "%s", *s ? s : "");
	/* Strip a trailing slash: we append /charges. */
	if (path[0] != '\0' && path[strlen(path) - 1] == '/')
		path[strlen(path) - 1] = '\0';
	return host[0] != '\0' ? 0 : -1;
}

int
acquirer_charge(const char *url, const char *key, const char *payment,
    long long amount, const char *currency, long long timeout_ms,
    struct acquirer_result *res)
{
	struct addrinfo	 hints, *ai = NULL;
	struct timeval	 tv;
	char		 host[256], port[16], path[512], body[256];
	char		*req = NULL, *resp = NULL, *b;
	const char	*idp[] = { "id", NULL }, *stp[] = { "status", NULL };
	yajl_val	 j = NULL, v;
	size_t		 got = 0;
	ssize_t		 n;
	int		 fd = -1, rc = -1, len, status;

	memset(res, 0, sizeof(*res));
	if (parse_url(url, host, sizeof(host), port, sizeof(port), path,
	    sizeof(path)) == -1)
		return -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		goto out;
	/* Bounded: the phase must end within its deadline. */
	if (timeout_ms <= 0)
		goto out;
	tv.tv_sec = (time_t)(timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(timeout_ms % 1000 * 1000);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1)
		goto out;
	snprintf(body, sizeof(body), "{\"amount\":%lld,\"currency\":\"%s\","
	    "\"reference\":\"%s\"}", amount, currency, payment);
	len = asprintf(&req, "POST %s/charges HTTP/1.0\r\nHost: %s\r\n"
	    "Content-Type: application/json\r\nIdempotency-Key: %s\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", path, host,
	    key, strlen(body), body);
	if (len < 0) {
		req = NULL;
		goto out;
	}
	if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len)
		goto out;
	if ((resp = malloc(RESP_MAX + 1)) == NULL)
		goto out;
	while (got < RESP_MAX && (n = recv(fd, resp + got, RESP_MAX - got,
	    0)) > 0)
		got += (size_t)n;
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		goto out;
	res->http_status = status;
	if (status != 200 || (b = strstr(resp, "\r\n\r\n")) == NULL)
		goto out;
	if ((j = yajl_tree_parse(b + 4, NULL, 0)) == NULL)
		goto out;
	if ((v = yajl_tree_get(j, idp, yajl_t_string)) == NULL ||
	    strlen(v->u.string) >= sizeof(res->charge))
		goto out;
	snprintf(res->charge, sizeof(res->charge), "%s", v->u.string);
	if ((v = yajl_tree_get(j, stp, yajl_t_string)) == NULL)
		goto out;
	if (strcmp(v->u.string, "approved") == 0)
		res->approved = 1;
	else if (strcmp(v->u.string, "declined") != 0)
		goto out;
	rc = 0;
out:
	if (j != NULL)
		yajl_tree_free(j);
	free(resp);
	free(req);
	if (fd != -1)
		close(fd);
	if (ai != NULL)
		freeaddrinfo(ai);
	return rc;
}
