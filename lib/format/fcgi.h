/*
 * fcgi.h - idem's own FastCGI reader and writer: the bytes of one
 * connection in, whole requests (parameters and body) out, every length
 * checked against stated limits; and the records of a response.  Pure:
 * no sockets, no threads, no clock; the runtime feeds it what read()
 * returned and writes what it says to.
 */
#ifndef IDEM_FCGI_H
#define IDEM_FCGI_H

#include <stddef.h>

#include "internal.h"

#define IDEM_FCGI_HEADER_LEN	8
/* A parameter's name, and how many parameters one request may have. */
#define IDEM_FCGI_NAME_MAX	1024
#define IDEM_FCGI_PAIRS_MAX	1024
/* A parameter's value (and never more than the whole stream). */
#define IDEM_FCGI_VALUE_MAX	(32 * 1024)

/* What a feed ended on.  The refusals close the connection; their order is
 * the metric's (idem_fcgi_reason()). */
enum idem_fcgi_rc {
	IDEM_FCGI_BODY = -4,		/* the parameters are whole and a body of
					 * content_length bytes follows: admit
					 * or refuse it (idem_fcgi_body()) */
	IDEM_FCGI_CLOSE = -3,		/* the web server aborted the request and
					 * keeps no connection: close quietly */
	IDEM_FCGI_MORE = -2,		/* everything consumed, no request yet */
	IDEM_FCGI_REQUEST = -1,		/* a whole request: idem_fcgi_param() */
	IDEM_FCGI_MALFORMED = 0,	/* not FastCGI, or inconsistent */
	IDEM_FCGI_PARAMS_TOO_LARGE,	/* over max_params, a name or value cap */
	IDEM_FCGI_BODY_TOO_LARGE,	/* stdin over max_body and CONTENT_LENGTH */
	IDEM_FCGI_UNSUPPORTED_ROLE,	/* not a responder */
	IDEM_FCGI_MULTIPLEXED,		/* a second request at once */
	IDEM_FCGI_READ_TIMEOUT,		/* (the runtime's: no whole request
					 * within [server] read_timeout) */
	IDEM_FCGI_PEER,			/* (the listeners': a peer not allowed,
					 * closed before a byte is read) */
	IDEM_FCGI_FD_LIMIT,		/* (the listeners': a connection waiting
					 * while no descriptor was left) */
	IDEM_FCGI_WRITE_TIMEOUT,	/* (the runtime's: an answer not taken
					 * whole within [server] write_timeout) */
	IDEM_FCGI_MAX_BUFFERED,		/* (the runtime's: an answer its peer
					 * did not take, with [server]
					 * max_buffered held already) */
	IDEM_FCGI_REJECT__COUNT
};

/* The metric's label of a refusal ("malformed", ...); NULL otherwise. */
const char *idem_fcgi_reason(enum idem_fcgi_rc rc);

struct idem_fcgi_limits {
	size_t		max_params;	/* bytes of one request's PARAMS stream */
	size_t		max_body;	/* stdin kept (never past CONTENT_LENGTH);
					 * more is dropped only when
					 * CONTENT_LENGTH says more (a 413) */
	unsigned	max_conns;	/* FCGI_MAX_CONNS/MAX_REQS answered */
};

/* One parameter of a request, both NUL-terminated. */
struct idem_fcgi_pair {
	const char	*name;
	const char	*value;
};

enum idem_fcgi_state { IDEM_FCGI_IDLE, IDEM_FCGI_PARAMS, IDEM_FCGI_STDIN,
	IDEM_FCGI_DONE };

/* One connection's reader.  Zero it, then idem_fcgi_init(). */
struct idem_fcgi {
	struct idem_fcgi_limits	 lim;
	/* the record being read */
	unsigned char		 hdr[IDEM_FCGI_HEADER_LEN];
	size_t			 hdr_have;	/* < 8: in the header */
	unsigned		 type, id;
	size_t			 content_left, pad_left;
	struct idem_buf		 rec;	/* a BEGIN_REQUEST's or GET_VALUES'
					 * content, whole */
	/* the request */
	enum idem_fcgi_state	 state;
	unsigned		 req_id;
	int			 keep_conn;	/* FCGI_KEEP_CONN */
	int			 started;	/* a byte of it has arrived */
	struct idem_buf		 params;	/* the raw stream, then pairs */
	size_t			 scanned;	/* of the stream: whole pairs */
	struct idem_fcgi_pair	*pairs;
	size_t			 npairs;
	struct idem_buf		 body;		/* stdin, NUL-terminated */
	unsigned long long	 content_length;	/* as the params say */
	unsigned long long	 stdin_len;	/* all of it, dropped included */
	int			 body_dropped;	/* stdin past max_body, or
						 * refused: not kept */
	int			 body_refused;	/* idem_fcgi_body(f, 0) */
	int			 answered;	/* early: the rest of stdin is
						 * read and dropped */
};

void	idem_fcgi_init(struct idem_fcgi *f, const struct idem_fcgi_limits *lim);
/*
 * Consume up to n bytes of the connection.  Stops right after a request is
 * whole (IDEM_FCGI_REQUEST, *used says how far; its parameters, when
 * CONTENT_LENGTH is over max_body: that is answered without the body),
 * right after the parameters of a request announcing a body within
 * max_body (IDEM_FCGI_BODY: the caller decides with idem_fcgi_body()
 * before it feeds on), or with a refusal; else
 * consumes everything (IDEM_FCGI_MORE).  Records the application must
 * answer at once (GET_VALUES, an unknown type, an aborted request's
 * END_REQUEST, the refusal of a role or of multiplexing) are appended to
 * reply, which the caller writes before anything else.
 */
enum idem_fcgi_rc idem_fcgi_feed(struct idem_fcgi *f, const void *p,
	    size_t n, size_t *used, struct idem_buf *reply);
/*
 * After IDEM_FCGI_BODY: admit (room for content_length bytes is made at
 * once; IDEM_FCGI_MORE, feed on) or refuse the body (also when that room
 * cannot be had): the request is then whole without it (IDEM_FCGI_REQUEST,
 * body_refused set; answered early, its stdin read and dropped as for a
 * CONTENT_LENGTH over max_body).
 */
enum idem_fcgi_rc idem_fcgi_body(struct idem_fcgi *f, int admit);
/* After IDEM_FCGI_REQUEST: a parameter's value (the first of that name), or
 * NULL; how many are called name. */
const char *idem_fcgi_param(const struct idem_fcgi *f, const char *name);
int	idem_fcgi_param_count(const struct idem_fcgi *f, const char *name);
/*
 * The request was answered: 1 when the connection is to be read further
 * (kept alive for the next request, or a request answered before its body,
 * CONTENT_LENGTH over max_body, whose stdin is still to be read and
 * dropped), 0 when it is to be closed.
 */
int	idem_fcgi_served(struct idem_fcgi *f);
/* Ready for the connection's next request (kept alive). */
void	idem_fcgi_next(struct idem_fcgi *f);
void	idem_fcgi_free(struct idem_fcgi *f);

/*
 * The name-value pairs of a params stream p[0..n-1] (pure): *pairs (an
 * array the caller frees) points into out, where each name and value is
 * NUL-terminated.  IDEM_FCGI_REQUEST when all are well-formed, else
 * IDEM_FCGI_MALFORMED or IDEM_FCGI_PARAMS_TOO_LARGE.
 */
enum idem_fcgi_rc idem_fcgi_pairs(const unsigned char *p, size_t n,
	    struct idem_buf *out, struct idem_fcgi_pair **pairs,
	    size_t *npairs);

/* A response: its CGI bytes as STDOUT records, the empty STDOUT and the
 * END_REQUEST of request id, appended to out (0, or -1: no memory). */
int	idem_fcgi_response(struct idem_buf *out, unsigned id, const char *p,
	    size_t n);

#endif /* IDEM_FCGI_H */
