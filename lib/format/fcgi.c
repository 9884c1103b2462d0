/*
 * fcgi.c - idem's FastCGI reader and writer (see fcgi.h): a state machine
 * over the records of one connection that keeps at most max_params bytes
 * of parameters and max_body bytes of body per request, checks every
 * length before it believes it, and answers the management records itself.
 * libfcgi's reader trusted the name-value lengths (an int overflow aborted
 * the process) and blocked its thread until a request was whole; this one
 * never blocks and never asserts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi.h"

#define FCGI_VERSION_1		1
#define FCGI_BEGIN_REQUEST	1
#define FCGI_ABORT_REQUEST	2
#define FCGI_END_REQUEST	3
#define FCGI_PARAMS		4
#define FCGI_STDIN		5
#define FCGI_STDOUT		6
#define FCGI_GET_VALUES		9
#define FCGI_GET_VALUES_RESULT	10
#define FCGI_UNKNOWN_TYPE	11
#define FCGI_MAXTYPE		FCGI_UNKNOWN_TYPE

#define FCGI_RESPONDER		1
#define FCGI_KEEP_CONN		1

#define FCGI_REQUEST_COMPLETE	0
#define FCGI_CANT_MPX_CONN	1
#define FCGI_UNKNOWN_ROLE	3

#define RECORD_MAX		65535

static const char *const reasons[IDEM_FCGI_REJECT__COUNT] = {
	[IDEM_FCGI_MALFORMED] = "malformed",
	[IDEM_FCGI_PARAMS_TOO_LARGE] = "params_too_large",
	[IDEM_FCGI_BODY_TOO_LARGE] = "body_too_large",
	[IDEM_FCGI_UNSUPPORTED_ROLE] = "unsupported_role",
	[IDEM_FCGI_MULTIPLEXED] = "multiplexed",
	[IDEM_FCGI_READ_TIMEOUT] = "read_timeout",
	[IDEM_FCGI_PEER] = "peer",
	[IDEM_FCGI_FD_LIMIT] = "fd_limit",
	[IDEM_FCGI_WRITE_TIMEOUT] = "write_timeout",
	[IDEM_FCGI_MAX_BUFFERED] = "max_buffered",
};

const char *
idem_fcgi_reason(enum idem_fcgi_rc rc)
{
	if ((int)rc < 0 || rc >= IDEM_FCGI_REJECT__COUNT)
		return NULL;
	return reasons[rc];
}

void
idem_fcgi_init(struct idem_fcgi *f, const struct idem_fcgi_limits *lim)
{
	memset(f, 0, sizeof(*f));
	f->lim = *lim;
}

static void
request_free(struct idem_fcgi *f)
{
	idem_buf_free(&f->params);
	idem_buf_free(&f->body);
	free(f->pairs);
	f->pairs = NULL;
	f->npairs = 0;
	f->content_length = f->stdin_len = 0;
	f->body_dropped = f->body_refused = f->answered = 0;
	f->scanned = 0;
}

void
idem_fcgi_next(struct idem_fcgi *f)
{
	/* An idle kept-alive connection holds no request's memory. */
	request_free(f);
	f->state = IDEM_FCGI_IDLE;
	f->started = 0;
	f->req_id = 0;
	f->keep_conn = 0;
}

int
idem_fcgi_served(struct idem_fcgi *f)
{
	if (f->state == IDEM_FCGI_STDIN) {
		/* Answered early: keep reading to the end of its stdin, so
		 * that the web server reads the answer (no reset). */
		free(f->pairs);
		f->pairs = NULL;
		f->npairs = 0;
		idem_buf_free(&f->params);
		f->answered = 1;
		return 1;
	}
	if (!f->keep_conn)
		return 0;
	idem_fcgi_next(f);
	return 1;
}

void
idem_fcgi_free(struct idem_fcgi *f)
{
	request_free(f);
	idem_buf_free(&f->rec);
}

/* --- name-value pairs --------------------------------------------------- */

/* One length (1 byte, or 4 with the high bit set) at p[*i]; -1 if cut. */
static int
pair_len(const unsigned char *p, size_t n, size_t *i, size_t *len)
{
	if (*i >= n)
		return -1;
	if (!(p[*i] & 0x80)) {
		*len = p[(*i)++];
		return 0;
	}
	if (n - *i < 4)
		return -1;
	*len = (size_t)(p[*i] & 0x7f) << 24 | (size_t)p[*i + 1] << 16 |
	    (size_t)p[*i + 2] << 8 | p[*i + 3];
	*i += 4;
	return 0;
}

enum idem_fcgi_rc
idem_fcgi_pairs(const unsigned char *p, size_t n, struct idem_buf *out,
    struct idem_fcgi_pair **pairs, size_t *npairs)
{
	struct idem_fcgi_pair	*pa;
	size_t			 i, nl, vl, count = 0, total = 0, k, o;

	*pairs = NULL;
	*npairs = 0;
	/* First every length against what is there, before any copy. */
	for (i = 0; i < n; i += nl + vl) {
		if (pair_len(p, n, &i, &nl) == -1 ||
		    pair_len(p, n, &i, &vl) == -1 || nl > n - i ||
		    vl > n - i - nl)
			return IDEM_FCGI_MALFORMED;
		if (nl > IDEM_FCGI_NAME_MAX || vl > IDEM_FCGI_VALUE_MAX ||
		    count == IDEM_FCGI_PAIRS_MAX)
			return IDEM_FCGI_PARAMS_TOO_LARGE;
		count++;
		total += nl + vl + 2;
	}
	idem_buf_free(out);
	if (count == 0)
		return IDEM_FCGI_REQUEST;
	if ((out->p = malloc(total + 1)) == NULL ||
	    (pa = calloc(count, sizeof(*pa))) == NULL) {
		idem_buf_free(out);
		return IDEM_FCGI_PARAMS_TOO_LARGE;
	}
	out->len = total;
	out->cap = total + 1;
	for (i = 0, k = 0, o = 0; k < count; k++) {
		(void)pair_len(p, n, &i, &nl);
		(void)pair_len(p, n, &i, &vl);
		memcpy(out->p + o, p + i, nl);
		out->p[o + nl] = '\0';
		pa[k].name = out->p + o;
		o += nl + 1;
		memcpy(out->p + o, p + i + nl, vl);
		out->p[o + vl] = '\0';
		pa[k].value = out->p + o;
		o += vl + 1;
		i += nl + vl;
	}
	out->p[total] = '\0';
	*pairs = pa;
	*npairs = count;
	return IDEM_FCGI_REQUEST;
}

/* The value of the first pair named name, or NULL; with count, the
 * number of such pairs in *count (without, it stops at the first). */
static const char *
pair_named(const struct idem_fcgi *f, const char *name, int *count)
{
	const char	*v = NULL;
	size_t		 i;

	if (count != NULL)
		*count = 0;
	for (i = 0; i < f->npairs; i++) {
		if (strcmp(f->pairs[i].name, name) != 0)
			continue;
		if (v == NULL)
			v = f->pairs[i].value;
		if (count == NULL)
			break;
		(*count)++;
	}
	return v;
}

const char *
idem_fcgi_param(const struct idem_fcgi *f, const char *name)
{
	return pair_named(f, name, NULL);
}

int
idem_fcgi_param_count(const struct idem_fcgi *f, const char *name)
{
	int	c;

	pair_named(f, name, &c);
	return c;
}

/* --- records out -------------------------------------------------------- */

static int
put_header(struct idem_buf *b, unsigned type, unsigned id, size_t len)
{
	unsigned char	h[IDEM_FCGI_HEADER_LEN] = { FCGI_VERSION_1,
			    (unsigned char)type, (unsigned char)(id >> 8),
			    (unsigned char)id, (unsigned char)(len >> 8),
			    (unsigned char)len, 0, 0 };

	return idem_buf_add(b, h, sizeof(h));
}

static int
put_end(struct idem_buf *b, unsigned id, unsigned char status)
{
	unsigned char	body[8] = { 0, 0, 0, 0, status, 0, 0, 0 };

	return put_header(b, FCGI_END_REQUEST, id, 8) |
	    idem_buf_add(b, body, 8);
}

int
idem_fcgi_response(struct idem_buf *out, unsigned id, const char *p,
    size_t n)
{
	size_t	k;
	int	rc = 0;

	while (n > 0 && rc == 0) {
		k = n > RECORD_MAX ? RECORD_MAX : n;
		rc = put_header(out, FCGI_STDOUT, id, k) |
		    idem_buf_add(out, p, k);
		p += k;
		n -= k;
	}
	rc |= put_header(out, FCGI_STDOUT, id, 0);
	rc |= put_end(out, id, FCGI_REQUEST_COMPLETE);
	return rc == 0 ? 0 : -1;
}

/* A name-value pair with both lengths under 128. */
static int
put_short_pair(struct idem_buf *b, const char *name, const char *value)
{
	unsigned char	l[2] = { (unsigned char)strlen(name),
			    (unsigned char)strlen(value) };

	return idem_buf_add(b, l, 2) | idem_buf_adds(b, name) |
	    idem_buf_adds(b, value);
}

/* GET_VALUES: the three variables a web server may ask, others ignored. */
static enum idem_fcgi_rc
get_values(struct idem_fcgi *f, struct idem_buf *reply)
{
	struct idem_buf		 names = { 0 }, res = { 0 };
	struct idem_fcgi_pair	*pa;
	size_t			 np, i;
	char			 conns[16];
	enum idem_fcgi_rc	 rc;
	int			 err = 0;

	rc = idem_fcgi_pairs((const unsigned char *)f->rec.p, f->rec.len,
	    &names, &pa, &np);
	if (rc != IDEM_FCGI_REQUEST)
		return rc;
	snprintf(conns, sizeof(conns), "%u", f->lim.max_conns);
	for (i = 0; i < np; i++) {
		if (strcmp(pa[i].name, "FCGI_MAX_CONNS") == 0 ||
		    strcmp(pa[i].name, "FCGI_MAX_REQS") == 0)
			err |= put_short_pair(&res, pa[i].name, conns);
		else if (strcmp(pa[i].name, "FCGI_MPXS_CONNS") == 0)
			err |= put_short_pair(&res, pa[i].name, "0");
	}
	free(pa);
	idem_buf_free(&names);
	/* At most three short pairs: one record. */
	err |= put_header(reply, FCGI_GET_VALUES_RESULT, 0, res.len);
	if (res.len > 0)
		err |= idem_buf_add(reply, res.p, res.len);
	idem_buf_free(&res);
	return err == 0 ? IDEM_FCGI_MORE : IDEM_FCGI_MALFORMED;
}

/* CONTENT_LENGTH as digits (anything else: 0, and request.c refuses it). */
static unsigned long long
content_length(const char *s)
{
	unsigned long long	n = 0;
	size_t			i;

	for (i = 0; s != NULL && s[i] != '\0'; i++) {
		if (i >= 19 || s[i] < '0' || s[i] > '9')
			return 0;
		n = n * 10 + (unsigned long long)(s[i] - '0');
	}
	return n;
}

/* --- records in --------------------------------------------------------- */

/*
 * The pairs of the params stream so far, each as soon as its lengths are
 * in: a length no stream could hold is refused at once, not when the
 * stream ends (or never).
 */
static enum idem_fcgi_rc
params_scan(struct idem_fcgi *f)
{
	const unsigned char	*p = (const unsigned char *)f->params.p;
	size_t			 n = f->params.len, i, nl, vl;

	for (;;) {
		i = f->scanned;
		if (pair_len(p, n, &i, &nl) == -1 ||
		    pair_len(p, n, &i, &vl) == -1)
			return IDEM_FCGI_MORE;
		if (nl > IDEM_FCGI_NAME_MAX || vl > IDEM_FCGI_VALUE_MAX ||
		    nl + vl > f->lim.max_params - i)
			return IDEM_FCGI_PARAMS_TOO_LARGE;
		if (nl + vl > n - i)
			return IDEM_FCGI_MORE;
		f->scanned = i + nl + vl;
	}
}

/* The header is in: is this record acceptable now? */
static enum idem_fcgi_rc
record_start(struct idem_fcgi *f, struct idem_buf *reply)
{
	const unsigned char	*h = f->hdr;
	size_t			 len;

	if (h[0] != FCGI_VERSION_1)
		return IDEM_FCGI_MALFORMED;
	f->type = h[1];
	f->id = (unsigned)h[2] << 8 | h[3];
	len = (size_t)h[4] << 8 | h[5];
	f->content_left = len;
	f->pad_left = h[6];
	idem_buf_reset(&f->rec);
	switch (f->type) {
	case FCGI_BEGIN_REQUEST:
		if (f->id == 0 || len != 8)
			return IDEM_FCGI_MALFORMED;
		if (f->state != IDEM_FCGI_IDLE) {
			if (f->id == f->req_id)
				return IDEM_FCGI_MALFORMED;
			/* One request at a time per connection. */
			(void)put_end(reply, f->id, FCGI_CANT_MPX_CONN);
			return IDEM_FCGI_MULTIPLEXED;
		}
		return IDEM_FCGI_MORE;
	case FCGI_ABORT_REQUEST:
		return f->id == 0 || len != 0 ? IDEM_FCGI_MALFORMED :
		    IDEM_FCGI_MORE;
	case FCGI_PARAMS:
		if (f->id == 0 || f->state != IDEM_FCGI_PARAMS ||
		    f->id != f->req_id)
			return IDEM_FCGI_MALFORMED;
		/* Refused before a byte of it is kept. */
		if (len > f->lim.max_params - f->params.len)
			return IDEM_FCGI_PARAMS_TOO_LARGE;
		return IDEM_FCGI_MORE;
	case FCGI_STDIN:
		if (f->id == 0 || f->state != IDEM_FCGI_STDIN ||
		    f->id != f->req_id)
			return IDEM_FCGI_MALFORMED;
		return IDEM_FCGI_MORE;
	case FCGI_GET_VALUES:
		return f->id != 0 ? IDEM_FCGI_MALFORMED : IDEM_FCGI_MORE;
	default:
		/* A type of a later version: say so, skip it. */
		return f->type > FCGI_MAXTYPE ? IDEM_FCGI_MORE :
		    IDEM_FCGI_MALFORMED;
	}
}

/* Content bytes of the current record. */
static enum idem_fcgi_rc
record_data(struct idem_fcgi *f, const unsigned char *p, size_t n)
{
	unsigned long long	max = f->lim.max_body;

	switch (f->type) {
	case FCGI_BEGIN_REQUEST:
	case FCGI_GET_VALUES:
		return idem_buf_add(&f->rec, p, n) == 0 ? IDEM_FCGI_MORE :
		    IDEM_FCGI_MALFORMED;
	case FCGI_PARAMS:
		return idem_buf_add(&f->params, p, n) == 0 ? IDEM_FCGI_MORE :
		    IDEM_FCGI_PARAMS_TOO_LARGE;
	case FCGI_STDIN:
		/* More than both CONTENT_LENGTH and max_body: refused; more
		 * than one of them, or a body not kept: read and dropped. */
		f->stdin_len += n;
		if (f->stdin_len > (f->content_length > max ?
		    f->content_length : max))
			return IDEM_FCGI_BODY_TOO_LARGE;
		if (f->body_dropped || f->body.len >= f->content_length)
			return IDEM_FCGI_MORE;
		if (n > f->content_length - f->body.len)
			n = (size_t)(f->content_length - f->body.len);
		return idem_buf_add(&f->body, p, n) == 0 ? IDEM_FCGI_MORE :
		    IDEM_FCGI_BODY_TOO_LARGE;
	default:
		return IDEM_FCGI_MORE;		/* skipped */
	}
}

/* The empty FCGI_PARAMS record: the parameters are whole. */
static enum idem_fcgi_rc
params_end(struct idem_fcgi *f)
{
	enum idem_fcgi_rc	 rc;

	rc = idem_fcgi_pairs((const unsigned char *)f->params.p,
	    f->params.len, &f->rec, &f->pairs, &f->npairs);
	if (rc != IDEM_FCGI_REQUEST)
		return rc;
	/* The pairs live in params from now on; rec is scratch. */
	idem_buf_free(&f->params);
	f->params = f->rec;
	memset(&f->rec, 0, sizeof(f->rec));
	f->content_length = content_length(idem_fcgi_param(f,
	    "CONTENT_LENGTH"));
	f->state = IDEM_FCGI_STDIN;
	if (f->content_length == 0)
		return IDEM_FCGI_MORE;
	if (f->content_length <= f->lim.max_body)
		return IDEM_FCGI_BODY;	/* the caller's to admit */
	/* Refused by its length: answered now, stdin dropped. */
	f->body_dropped = 1;
	return IDEM_FCGI_REQUEST;
}

/* The empty FCGI_STDIN record: the body is whole. */
static enum idem_fcgi_rc
stdin_end(struct idem_fcgi *f)
{
	if (f->answered) {
		if (!f->keep_conn)
			return IDEM_FCGI_CLOSE;
		idem_fcgi_next(f);
		return IDEM_FCGI_MORE;
	}
	f->state = IDEM_FCGI_DONE;
	/* A body is always a string, if an empty one. */
	return idem_buf_nul(&f->body) == 0 ? IDEM_FCGI_REQUEST :
	    IDEM_FCGI_BODY_TOO_LARGE;
}

/* The record is whole (content and padding). */
static enum idem_fcgi_rc
record_end(struct idem_fcgi *f, struct idem_buf *reply)
{
	const unsigned char	*b = (const unsigned char *)f->rec.p;
	unsigned		 type = f->type;
	int			 empty = (f->hdr[4] | f->hdr[5]) == 0;
	enum idem_fcgi_rc	 rc;
	unsigned char		 unknown[8] = { 0 };

	switch (type) {
	case FCGI_BEGIN_REQUEST:
		if (((unsigned)b[0] << 8 | b[1]) != FCGI_RESPONDER) {
			(void)put_end(reply, f->id, FCGI_UNKNOWN_ROLE);
			return IDEM_FCGI_UNSUPPORTED_ROLE;
		}
		request_free(f);
		f->state = IDEM_FCGI_PARAMS;
		f->req_id = f->id;
		f->keep_conn = b[2] & FCGI_KEEP_CONN;
		return IDEM_FCGI_MORE;
	case FCGI_ABORT_REQUEST:
		/* Another request's (already answered): nothing to do. */
		if (f->state == IDEM_FCGI_IDLE || f->id != f->req_id)
			return IDEM_FCGI_MORE;
		(void)put_end(reply, f->req_id, FCGI_REQUEST_COMPLETE);
		rc = f->keep_conn ? IDEM_FCGI_MORE : IDEM_FCGI_CLOSE;
		idem_fcgi_next(f);
		return rc;
	case FCGI_PARAMS:
		return empty ? params_end(f) : params_scan(f);
	case FCGI_STDIN:
		return empty ? stdin_end(f) : IDEM_FCGI_MORE;
	case FCGI_GET_VALUES:
		return get_values(f, reply);
	default:
		unknown[0] = (unsigned char)type;
		return put_header(reply, FCGI_UNKNOWN_TYPE, 0, 8) |
		    idem_buf_add(reply, unknown, 8) ? IDEM_FCGI_MALFORMED :
		    IDEM_FCGI_MORE;
	}
}

enum idem_fcgi_rc
idem_fcgi_body(struct idem_fcgi *f, int admit)
{
	size_t	n = (size_t)f->content_length;

	/* All of it at once: what arrives fills it, nothing grows. */
	if (admit && f->body.p == NULL &&
	    (f->body.p = malloc(n + 1)) != NULL) {
		f->body.p[0] = '\0';
		f->body.len = 0;
		f->body.cap = n + 1;
		return IDEM_FCGI_MORE;
	}
	f->body_dropped = f->body_refused = 1;
	return IDEM_FCGI_REQUEST;
}

enum idem_fcgi_rc
idem_fcgi_feed(struct idem_fcgi *f, const void *data, size_t n,
    size_t *used, struct idem_buf *reply)
{
	const unsigned char	*p = data;
	enum idem_fcgi_rc	 rc;
	size_t			 i = 0, k;

	*used = 0;
	if (f->state == IDEM_FCGI_DONE)
		return IDEM_FCGI_MALFORMED;	/* idem_fcgi_next() first */
	for (;;) {
		if (f->hdr_have == IDEM_FCGI_HEADER_LEN &&
		    f->content_left == 0 && f->pad_left == 0) {
			f->hdr_have = 0;
			rc = record_end(f, reply);
			if (rc != IDEM_FCGI_MORE) {
				*used = i;
				return rc;
			}
			continue;
		}
		if (i == n)
			break;
		f->started = 1;
		if (f->hdr_have < IDEM_FCGI_HEADER_LEN) {
			k = IDEM_FCGI_HEADER_LEN - f->hdr_have;
			k = k < n - i ? k : n - i;
			memcpy(f->hdr + f->hdr_have, p + i, k);
			f->hdr_have += k;
			i += k;
			if (f->hdr_have == IDEM_FCGI_HEADER_LEN &&
			    (rc = record_start(f, reply)) != IDEM_FCGI_MORE) {
				*used = i;
				return rc;
			}
		} else if (f->content_left > 0) {
			k = f->content_left < n - i ? f->content_left : n - i;
			f->content_left -= k;
			rc = record_data(f, p + i, k);
			i += k;
			if (rc != IDEM_FCGI_MORE) {
				*used = i;
				return rc;
			}
		} else {
			k = f->pad_left < n - i ? f->pad_left : n - i;
			f->pad_left -= k;
			i += k;
		}
	}
	*used = i;
	return IDEM_FCGI_MORE;
}
