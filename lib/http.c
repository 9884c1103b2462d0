/*
 * http.c - the request's CGI parameters as HTTP headers: the one place
 * that maps a header name to its FastCGI parameter (HTTP_*), with the
 * length bound every header value is held to.  Below auth.c and request.c,
 * so that reading a credential does not need the request's life cycle.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "private.h"

#define HEADER_MAX_LEN	8192

const char *
idem_req_header(const idem_req *req, const char *name)
{
	char		 env[128];
	size_t		 i, o = 0;
	const char	*v;

	/* A request the completer runs again has no headers. */
	if (req->fcgi == NULL)
		return NULL;
	if (strcasecmp(name, "Content-Type") == 0)
		return FCGX_GetParam("CONTENT_TYPE", req->fcgi->envp);
	if (strcasecmp(name, "Content-Length") == 0)
		return FCGX_GetParam("CONTENT_LENGTH", req->fcgi->envp);
	if (strlen(name) + 6 > sizeof(env))
		return NULL;
	memcpy(env, "HTTP_", 5);
	o = 5;
	for (i = 0; name[i] != '\0'; i++)
		env[o++] = name[i] == '-' ? '_' :
		    (char)toupper((unsigned char)name[i]);
	env[o] = '\0';
	v = FCGX_GetParam(env, req->fcgi->envp);
	if (v != NULL && strlen(v) > HEADER_MAX_LEN)
		return NULL;
	return v;
}
