/*
 * fuzz_fcgi.c - libFuzzer harness for the raw bytes of a FastCGI
 * connection as the runtime reads them (lib/runtime/conns.c): recv() chunks fed to
 * idem's reader (lib/format/fcgi.c), each whole request's parameters looked up
 * as request.c does, idem_fcgi_served() after it, until the reader
 * refuses the connection or the bytes end.
 *
 * The input is the connection, byte for byte (a file of
 * tests/fuzz/regression/fcgi can be sent to a running app as it is); its
 * size chooses a chunk size (1..32) for the second run.  Properties (abort() on violation): the outcome
 * (results, requests, bytes answered) is the same fed at once and in
 * chunks; a kept body is at most max_body bytes (and CONTENT_LENGTH) and
 * NUL-terminated, none when refused; no
 * parameter is longer than the params limit allows; what the reader
 * answers at once is whole records; nothing leaks.  Small limits
 * (max_params 2 KiB, max_body 512) keep the interesting edges close.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi.h"
#include "fuzz.h"

static const struct idem_fcgi_limits lim = { 2048, 512, 8 };

static const char *const names[] = { "REQUEST_METHOD", "REQUEST_URI",
	"SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "REMOTE_ADDR",
	"CONTENT_LENGTH", "CONTENT_TYPE", "HTTP_AUTHORIZATION",
	"HTTP_IDEMPOTENCY_KEY" };

static void
fail(const char *what)
{
	fuzz_fail("fuzz_fcgi", what, NULL, NULL);
}

/* The records in r are whole: headers and their declared lengths. */
static void
check_reply(const struct idem_buf *r)
{
	const unsigned char	*p = (const unsigned char *)r->p;
	size_t			 i = 0, len;

	while (i < r->len) {
		if (r->len - i < 8 || p[i] != 1)
			fail("a reply record without a whole header");
		len = (size_t)p[i + 4] << 8 | p[i + 5];
		if (r->len - i - 8 < len + p[i + 6])
			fail("a reply record shorter than it says");
		i += 8 + len + p[i + 6];
	}
}

struct outcome {
	int		last;		/* the last result */
	unsigned	requests;
	size_t		replied;
	unsigned long	hash;		/* of the requests' parameters */
};

static void
request(struct idem_fcgi *f, struct outcome *o)
{
	const char	*v;
	size_t		 i, j;

	o->requests++;
	if (f->body.len > lim.max_body || f->body.len > f->content_length ||
	    (f->body.p != NULL && f->body.p[f->body.len] != '\0'))
		fail("body over max_body or CONTENT_LENGTH, or not "
		    "NUL-terminated");
	if (f->body_refused && f->body.len > 0)
		fail("a refused body kept");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if ((v = idem_fcgi_param(f, names[i])) == NULL)
			continue;
		if (strlen(v) > lim.max_params)
			fail("a value longer than the params stream");
		for (j = 0; v[j] != '\0'; j++)
			o->hash = o->hash * 33 + (unsigned char)v[j];
		o->hash += (unsigned long)idem_fcgi_param_count(f, names[i]);
	}
	for (i = 0; i < f->npairs; i++)
		if (strlen(f->pairs[i].name) > IDEM_FCGI_NAME_MAX)
			fail("a name over IDEM_FCGI_NAME_MAX");
	o->hash = o->hash * 31 + f->body.len;
}

static void
connection(const uint8_t *data, size_t size, size_t step, struct outcome *o)
{
	struct idem_fcgi	 f;
	struct idem_buf		 r = { 0 };
	enum idem_fcgi_rc	 rc = IDEM_FCGI_MORE;
	size_t			 off = 0, n, used;

	memset(o, 0, sizeof(*o));
	idem_fcgi_init(&f, &lim);
	while (off < size) {
		n = step == 0 || step > size - off ? size - off : step;
		rc = idem_fcgi_feed(&f, data + off, n, &used, &r);
		if (used > n || (rc == IDEM_FCGI_MORE && used != n))
			fail("used is not what was consumed");
		off += used;
		check_reply(&r);
		o->replied += r.len;
		idem_buf_reset(&r);
		/* Bodies admitted and refused in turn, as a full budget would. */
		if (rc == IDEM_FCGI_BODY)
			rc = idem_fcgi_body(&f, o->requests % 2 == 0);
		if (rc == IDEM_FCGI_REQUEST) {
			request(&f, o);
			if (!idem_fcgi_served(&f))
				break;
			continue;
		}
		if (rc != IDEM_FCGI_MORE)
			break;
	}
	o->last = rc;
	idem_buf_free(&r);
	idem_fcgi_free(&f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome	whole, chunked;
	size_t		step;

	step = size % 32 + 1;
	connection(data, size, 0, &whole);
	connection(data, size, step, &chunked);
	if (whole.last != chunked.last || whole.requests != chunked.requests ||
	    whole.replied != chunked.replied || whole.hash != chunked.hash)
		fail("fed at once and in chunks, the outcome differs");
	return 0;
}
