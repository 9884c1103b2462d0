/*
 * test_fcgi.c - idem's FastCGI reader (lib/format/fcgi.c): name-value pairs, and
 * whole connections as byte streams (each fed at once and byte by byte,
 * with the same outcome), table-driven; the records of a response.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi.h"
#include "tap.h"

/* --- building streams --------------------------------------------------- */

static void
rec(struct idem_buf *b, int type, int id, const void *p, size_t n, int pad)
{
	unsigned char	h[8] = { 1, (unsigned char)type,
			    (unsigned char)(id >> 8), (unsigned char)id,
			    (unsigned char)(n >> 8), (unsigned char)n,
			    (unsigned char)pad, 0 };
	static const char zeros[256];

	idem_buf_add(b, h, 8);
	idem_buf_add(b, p, n);
	idem_buf_add(b, zeros, (size_t)pad);
}

static void
begin(struct idem_buf *b, int id, int role, int flags)
{
	unsigned char	c[8] = { (unsigned char)(role >> 8),
			    (unsigned char)role, (unsigned char)flags };

	rec(b, 1, id, c, 8, 0);
}

/* A pair with 1-byte lengths. */
static void
pair(struct idem_buf *b, const char *n, const char *v)
{
	unsigned char	l[2] = { (unsigned char)strlen(n),
			    (unsigned char)strlen(v) };

	idem_buf_add(b, l, 2);
	idem_buf_adds(b, n);
	idem_buf_adds(b, v);
}

/* begin, one PARAMS record of pairs p, the end of params. */
static void
head(struct idem_buf *b, int id, int flags, const struct idem_buf *p)
{
	begin(b, id, 1, flags);
	rec(b, 4, id, p->p, p->len, 3);
	rec(b, 4, id, "", 0, 0);
}

/* --- pairs -------------------------------------------------------------- */

static const struct {
	const char		*name;
	const char		*in;
	size_t			 len;
	enum idem_fcgi_rc	 rc;
	size_t			 npairs;
	const char		*first, *value;
} pair_cases[] = {
	{ "empty stream", "", 0, IDEM_FCGI_REQUEST, 0, NULL, NULL },
	{ "one short pair", "\x01\x02" "AXY", 5, IDEM_FCGI_REQUEST, 1, "A",
	  "XY" },
	{ "empty name and value", "\x00\x00", 2, IDEM_FCGI_REQUEST, 1, "", "" },
	{ "4-byte name length", "\x80\x00\x00\x01\x01" "AB", 7,
	  IDEM_FCGI_REQUEST, 1, "A", "B" },
	{ "two pairs", "\x01\x01" "AB\x01\x00" "C", 7, IDEM_FCGI_REQUEST, 2,
	  "A", "B" },
	{ "name length past the stream", "\x05\x00" "AB", 4,
	  IDEM_FCGI_MALFORMED, 0, NULL, NULL },
	{ "value length past the stream", "\x01\x05" "AB", 4,
	  IDEM_FCGI_MALFORMED, 0, NULL, NULL },
	{ "cut in a 4-byte length", "\x80\x00", 2, IDEM_FCGI_MALFORMED, 0,
	  NULL, NULL },
	{ "name length but no value length", "\x01", 1, IDEM_FCGI_MALFORMED,
	  0, NULL, NULL },
	{ "0x7ffffff0 + 16 (the libfcgi crasher)",
	  "\xff\xff\xff\xf0\x10", 5, IDEM_FCGI_MALFORMED, 0, NULL, NULL },
	{ "0x40000000 + 0x40000000",
	  "\xc0\x00\x00\x00\xc0\x00\x00\x00", 8, IDEM_FCGI_MALFORMED, 0, NULL,
	  NULL },
	{ "name over IDEM_FCGI_NAME_MAX, all there",
	  NULL, 0, IDEM_FCGI_PARAMS_TOO_LARGE, 0, NULL, NULL },
};

static void
test_pairs(void)
{
	struct idem_buf		 out = { 0 }, big = { 0 };
	struct idem_fcgi_pair	*pa;
	size_t			 i, np;
	enum idem_fcgi_rc	 rc;
	unsigned char		 l[5] = { 0x80, 0, (IDEM_FCGI_NAME_MAX + 1) >> 8,
				    (IDEM_FCGI_NAME_MAX + 1) & 0xff, 0 };

	idem_buf_add(&big, l, 5);
	for (i = 0; i <= IDEM_FCGI_NAME_MAX; i++)
		idem_buf_addc(&big, 'N');
	for (i = 0; i < sizeof(pair_cases) / sizeof(pair_cases[0]); i++) {
		const unsigned char *in = pair_cases[i].in != NULL ?
		    (const unsigned char *)pair_cases[i].in :
		    (const unsigned char *)big.p;
		size_t len = pair_cases[i].in != NULL ? pair_cases[i].len :
		    big.len;

		rc = idem_fcgi_pairs(in, len, &out, &pa, &np);
		TAP_OK(rc == pair_cases[i].rc && np == pair_cases[i].npairs,
		    "pairs: %s -> rc %d, %zu pairs", pair_cases[i].name,
		    pair_cases[i].rc, pair_cases[i].npairs);
		if (pair_cases[i].first != NULL && np > 0) {
			TAP_STREQ(pa[0].name, pair_cases[i].first,
			    "pairs: %s: first name", pair_cases[i].name);
			TAP_STREQ(pa[0].value, pair_cases[i].value,
			    "pairs: %s: first value", pair_cases[i].name);
		}
		free(pa);
		idem_buf_free(&out);
	}
	idem_buf_free(&big);
}

/* --- whole connections -------------------------------------------------- */

enum stream { S_GET, S_POST, S_KEEP2, S_CRASH1, S_CRASH2, S_PARAMS_BIG,
	S_BODY_OVER, S_CL_OVER, S_ROLE, S_MPX, S_VERSION, S_STDIN_FIRST,
	S_STDOUT_IN, S_GET_VALUES, S_UNKNOWN, S_ABORT, S_ABORT_KEEP,
	S_HALF_HEADER, S_HALF_BODY, S_ID0_PARAMS, S_PAST_CL, S_KEEP_POST };

static const struct {
	enum stream		 s;
	const char		*name;
	enum idem_fcgi_rc	 rc;		/* of the last feed */
	int			 requests;	/* whole requests before it */
	size_t			 reply;		/* bytes answered at once */
	int			 refuse;	/* bodies refused (budget) */
} feed_cases[] = {
	{ S_GET, "a GET", IDEM_FCGI_REQUEST, 1, 0, 0 },
	{ S_POST, "a POST with a padded body", IDEM_FCGI_REQUEST, 1, 0, 0 },
	{ S_KEEP2, "two requests on a kept connection", IDEM_FCGI_MORE, 2, 0,
	  0 },
	{ S_CRASH1, "name length 0x7ffffff0, value 16",
	  IDEM_FCGI_PARAMS_TOO_LARGE, 0, 0, 0 },
	{ S_CRASH2, "0x40000000 + 0x40000000", IDEM_FCGI_PARAMS_TOO_LARGE, 0,
	  0, 0 },
	{ S_PARAMS_BIG, "params over max_params", IDEM_FCGI_PARAMS_TOO_LARGE,
	  0, 0, 0 },
	{ S_BODY_OVER, "stdin over max_body, CONTENT_LENGTH small",
	  IDEM_FCGI_BODY_TOO_LARGE, 0, 0, 0 },
	{ S_CL_OVER, "CONTENT_LENGTH over max_body: answered early, stdin "
	  "dropped", IDEM_FCGI_CLOSE, 1, 0, 0 },
	{ S_ROLE, "the authorizer role", IDEM_FCGI_UNSUPPORTED_ROLE, 0, 16, 0 },
	{ S_MPX, "a second BEGIN_REQUEST meanwhile", IDEM_FCGI_MULTIPLEXED, 0,
	  16, 0 },
	{ S_VERSION, "version 2", IDEM_FCGI_MALFORMED, 0, 0, 0 },
	{ S_STDIN_FIRST, "STDIN before the params end", IDEM_FCGI_MALFORMED, 0,
	  0, 0 },
	{ S_STDOUT_IN, "a STDOUT record from the web server",
	  IDEM_FCGI_MALFORMED, 0, 0, 0 },
	{ S_GET_VALUES, "GET_VALUES", IDEM_FCGI_MORE, 0, 8 + 2 + 14 + 1 +
	  2 + 15 + 1, 0 },
	{ S_UNKNOWN, "an unknown record type", IDEM_FCGI_MORE, 0, 16, 0 },
	{ S_ABORT, "ABORT_REQUEST mid-params", IDEM_FCGI_CLOSE, 0, 16, 0 },
	{ S_ABORT_KEEP, "ABORT_REQUEST (keep_conn), then a GET",
	  IDEM_FCGI_REQUEST, 1, 16, 0 },
	{ S_HALF_HEADER, "half a record header", IDEM_FCGI_MORE, 0, 0, 0 },
	{ S_HALF_BODY, "half a body", IDEM_FCGI_MORE, 0, 0, 0 },
	{ S_ID0_PARAMS, "PARAMS of request id 0", IDEM_FCGI_MALFORMED, 0, 0,
	  0 },
	{ S_PAST_CL, "stdin past CONTENT_LENGTH, within max_body",
	  IDEM_FCGI_REQUEST, 1, 0, 0 },
	/* Refused bodies: answered at once, stdin read and dropped. */
	{ S_POST, "a POST, its body refused: answered early, stdin dropped",
	  IDEM_FCGI_CLOSE, 1, 0, 1 },
	{ S_KEEP_POST, "a POST, its body refused, kept alive: then a GET",
	  IDEM_FCGI_MORE, 2, 0, 1 },
	{ S_BODY_OVER, "stdin over max_body, its body refused",
	  IDEM_FCGI_BODY_TOO_LARGE, 1, 0, 1 },
	{ S_HALF_BODY, "half a body refused", IDEM_FCGI_MORE, 1, 0, 1 },
};

static const struct idem_fcgi_limits lim = { 1024, 64, 4 };

static void
build(enum stream s, struct idem_buf *b)
{
	struct idem_buf	p = { 0 }, big = { 0 };
	unsigned char	crash1[5] = { 0xff, 0xff, 0xff, 0xf0, 0x10 };
	unsigned char	crash2[8] = { 0xc0, 0, 0, 0, 0xc0, 0, 0, 0 };
	char		body[100];
	size_t		i;

	pair(&p, "REQUEST_METHOD", "GET");
	memset(body, 'x', sizeof(body));
	switch (s) {
	case S_GET:
		head(b, 1, 0, &p);
		rec(b, 5, 1, "", 0, 0);
		break;
	case S_POST:
		pair(&p, "CONTENT_LENGTH", "5");
		head(b, 1, 0, &p);
		rec(b, 5, 1, "hello", 5, 3);
		rec(b, 5, 1, "", 0, 0);
		break;
	case S_KEEP2:
		head(b, 1, 1, &p);
		rec(b, 5, 1, "", 0, 0);
		head(b, 2, 1, &p);
		rec(b, 5, 2, "", 0, 0);
		break;
	case S_CRASH1:
		begin(b, 1, 1, 0);
		rec(b, 4, 1, crash1, sizeof(crash1), 0);
		break;
	case S_CRASH2:
		begin(b, 1, 1, 0);
		rec(b, 4, 1, crash2, sizeof(crash2), 0);
		break;
	case S_PARAMS_BIG:
		for (i = 0; i < 20; i++)
			pair(&big, "HTTP_X_FILLER_HEADER",
			    "0123456789012345678901234567890123456789");
		begin(b, 1, 1, 0);
		rec(b, 4, 1, big.p, big.len, 0);
		rec(b, 4, 1, big.p, big.len, 0);
		break;
	case S_BODY_OVER:
		pair(&p, "CONTENT_LENGTH", "10");
		head(b, 1, 0, &p);
		rec(b, 5, 1, body, sizeof(body), 0);
		break;
	case S_CL_OVER:
		pair(&p, "CONTENT_LENGTH", "200");
		head(b, 1, 0, &p);
		rec(b, 5, 1, body, sizeof(body), 0);
		rec(b, 5, 1, body, sizeof(body), 0);
		rec(b, 5, 1, "", 0, 0);
		break;
	case S_ROLE:
		begin(b, 1, 2, 0);
		break;
	case S_MPX:
		begin(b, 1, 1, 0);
		begin(b, 2, 1, 0);
		break;
	case S_VERSION:
		begin(b, 1, 1, 0);
		b->p[0] = 2;
		break;
	case S_STDIN_FIRST:
		begin(b, 1, 1, 0);
		rec(b, 5, 1, "", 0, 0);
		break;
	case S_STDOUT_IN:
		rec(b, 6, 1, "x", 1, 0);
		break;
	case S_GET_VALUES:
		pair(&big, "FCGI_MAX_CONNS", "");
		pair(&big, "FCGI_MPXS_CONNS", "");
		pair(&big, "SOMETHING_ELSE", "");
		rec(b, 9, 0, big.p, big.len, 0);
		break;
	case S_UNKNOWN:
		rec(b, 42, 0, "abc", 3, 5);
		break;
	case S_ABORT:
		begin(b, 1, 1, 0);
		rec(b, 4, 1, p.p, p.len, 0);
		rec(b, 2, 1, "", 0, 0);
		break;
	case S_ABORT_KEEP:
		begin(b, 1, 1, 1);
		rec(b, 2, 1, "", 0, 0);
		head(b, 3, 0, &p);
		rec(b, 5, 3, "", 0, 0);
		break;
	case S_HALF_HEADER:
		idem_buf_add(b, "\x01\x01\x00", 3);
		break;
	case S_HALF_BODY:
		pair(&p, "CONTENT_LENGTH", "40");
		head(b, 1, 0, &p);
		rec(b, 5, 1, body, 20, 0);
		break;
	case S_ID0_PARAMS:
		begin(b, 1, 1, 0);
		rec(b, 4, 0, p.p, p.len, 0);
		break;
	case S_PAST_CL:
		pair(&p, "CONTENT_LENGTH", "5");
		head(b, 1, 0, &p);
		rec(b, 5, 1, body, 60, 0);
		rec(b, 5, 1, "", 0, 0);
		break;
	case S_KEEP_POST:
		pair(&big, "REQUEST_METHOD", "GET");
		pair(&p, "CONTENT_LENGTH", "40");
		head(b, 1, 1, &p);
		rec(b, 5, 1, body, 40, 0);
		rec(b, 5, 1, "", 0, 0);
		head(b, 2, 1, &big);
		rec(b, 5, 2, "", 0, 0);
		break;
	}
	idem_buf_free(&p);
	idem_buf_free(&big);
}

/*
 * Feed b in chunks of step bytes (0: at once), as a worker would: after a
 * whole request, its parameters are checked and the reader told it was
 * served.  The last result (IDEM_FCGI_REQUEST: served, then to be
 * closed), the GET requests seen, the bytes answered at once.
 */
static enum idem_fcgi_rc
run(const struct idem_buf *b, size_t step, int refuse, int *requests,
    size_t *reply)
{
	struct idem_fcgi	 f;
	struct idem_buf		 r = { 0 };
	enum idem_fcgi_rc	 rc = IDEM_FCGI_MORE;
	size_t			 off = 0, n, used;
	const char		*m;

	*requests = 0;
	idem_fcgi_init(&f, &lim);
	while (off < b->len) {
		n = step == 0 || step > b->len - off ? b->len - off : step;
		rc = idem_fcgi_feed(&f, b->p + off, n, &used, &r);
		off += used;
		if (rc == IDEM_FCGI_BODY)
			rc = idem_fcgi_body(&f, !refuse);
		if (rc == IDEM_FCGI_REQUEST) {
			m = idem_fcgi_param(&f, "REQUEST_METHOD");
			if (m != NULL && strcmp(m, "GET") == 0)
				(*requests)++;
			/* A body is kept whole, never past CONTENT_LENGTH,
			 * or not at all. */
			if (f.body.len > f.content_length ||
			    (f.body_refused && f.body.len > 0) ||
			    (!f.body_dropped && f.body.len != f.content_length))
				(*requests) += 100;
			if (!idem_fcgi_served(&f))
				break;
			rc = IDEM_FCGI_MORE;
		} else if (rc != IDEM_FCGI_MORE)
			break;
	}
	*reply = r.len;
	idem_buf_free(&r);
	idem_fcgi_free(&f);
	return rc;
}

static void
test_feed(void)
{
	struct idem_buf	 b;
	size_t		 i, reply, reply1;
	int		 reqs, reqs1;
	enum idem_fcgi_rc rc, rc1;

	for (i = 0; i < sizeof(feed_cases) / sizeof(feed_cases[0]); i++) {
		memset(&b, 0, sizeof(b));
		build(feed_cases[i].s, &b);
		rc = run(&b, 0, feed_cases[i].refuse, &reqs, &reply);
		TAP_OK(rc == feed_cases[i].rc && reqs ==
		    feed_cases[i].requests && reply == feed_cases[i].reply,
		    "feed: %s -> rc %d, %d requests, %zu bytes answered "
		    "(got %d, %d, %zu)", feed_cases[i].name,
		    feed_cases[i].rc, feed_cases[i].requests,
		    feed_cases[i].reply, rc, reqs, reply);
		rc1 = run(&b, 1, feed_cases[i].refuse, &reqs1, &reply1);
		TAP_OK(rc1 == rc && reqs1 == reqs && reply1 == reply,
		    "feed: %s, byte by byte: the same", feed_cases[i].name);
		idem_buf_free(&b);
	}
}

static void
test_values(void)
{
	struct idem_fcgi	 f;
	struct idem_buf		 b = { 0 }, p = { 0 }, r = { 0 };
	size_t			 used, off;
	enum idem_fcgi_rc	 rc;

	pair(&p, "HTTP_IDEMPOTENCY_KEY", "a");
	pair(&p, "CONTENT_LENGTH", "5");
	pair(&p, "HTTP_IDEMPOTENCY_KEY", "b");
	head(&b, 7, 1, &p);
	rec(&b, 5, 7, "hel", 3, 0);
	rec(&b, 5, 7, "lo", 2, 0);
	rec(&b, 5, 7, "", 0, 0);
	idem_fcgi_init(&f, &lim);
	rc = idem_fcgi_feed(&f, b.p, b.len, &used, &r);
	TAP_OK(rc == IDEM_FCGI_BODY && f.content_length == 5 &&
	    f.body.p == NULL, "the parameters whole: a body of 5 to admit, "
	    "nothing kept yet");
	TAP_OK(idem_fcgi_body(&f, 1) == IDEM_FCGI_MORE && f.body.cap == 6,
	    "admitted: room for all of it at once");
	off = used;
	rc = idem_fcgi_feed(&f, b.p + off, b.len - off, &used, &r);
	TAP_OK(rc == IDEM_FCGI_REQUEST && off + used == b.len &&
	    f.req_id == 7 && f.keep_conn == 1 && f.body.cap == 6,
	    "a request: whole, id 7, kept alive, its body where it was put");
	TAP_STREQ(idem_fcgi_param(&f, "HTTP_IDEMPOTENCY_KEY"), "a",
	    "the first of a repeated parameter");
	TAP_OK(idem_fcgi_param_count(&f, "HTTP_IDEMPOTENCY_KEY") == 2,
	    "a repeated parameter counts 2");
	TAP_OK(idem_fcgi_param(&f, "ABSENT") == NULL, "absent: NULL");
	TAP_STREQ(f.body.p, "hello", "the body, from two records");
	TAP_OK(idem_fcgi_served(&f) == 1 && f.started == 0 &&
	    f.npairs == 0 && f.body.p == NULL,
	    "served, kept alive: nothing of it is held");
	rc = idem_fcgi_feed(&f, b.p, b.len, &used, &r);
	TAP_OK(rc == IDEM_FCGI_BODY && idem_fcgi_body(&f, 0) ==
	    IDEM_FCGI_REQUEST && f.body_refused && f.body.p == NULL,
	    "the next request on it, its body refused: whole without it");
	idem_fcgi_free(&f);
	idem_buf_free(&b);
	idem_buf_free(&p);
	idem_buf_free(&r);
}

static void
test_response(void)
{
	struct idem_buf	 out = { 0 };
	char		*big;
	size_t		 n = 70000;

	big = calloc(1, n);
	TAP_OK(idem_fcgi_response(&out, 258, "Status: 200\r\n\r\n", 15) == 0 &&
	    out.len == 8 + 15 + 8 + 16 && memcmp(out.p, "\x01\x06\x01\x02"
	    "\x00\x0f", 6) == 0 && (unsigned char)out.p[23 + 1] == 6 &&
	    (unsigned char)out.p[31 + 1] == 3,
	    "response: STDOUT, empty STDOUT, END_REQUEST of id 258");
	idem_buf_free(&out);
	TAP_OK(big != NULL && idem_fcgi_response(&out, 1, big, n) == 0 &&
	    out.len == 8 + 65535 + 8 + (n - 65535) + 8 + 16,
	    "response: 70000 bytes in two STDOUT records");
	idem_buf_free(&out);
	free(big);
	TAP_STREQ(idem_fcgi_reason(IDEM_FCGI_READ_TIMEOUT), "read_timeout",
	    "reason label of a read timeout");
	TAP_OK(idem_fcgi_reason(IDEM_FCGI_MORE) == NULL,
	    "no reason label for MORE");
}

int
main(void)
{
	test_pairs();
	test_feed();
	test_values();
	test_response();
	return TAP_DONE();
}
