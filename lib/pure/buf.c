/*
 * buf.c - a growable byte buffer, the one place output is assembled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Bodies are capped far below this; it keeps size arithmetic safe. */
#define BUF_MAX	((size_t)1 << 30)

static int
buf_grow(struct idem_buf *b, size_t need)
{
	size_t	 cap;
	char	*p;

	if (need > BUF_MAX - b->len)
		return -1;
	if (b->len + need + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 1024;	/* most lines and heads fit */
	while (cap < b->len + need + 1)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int
idem_buf_add(struct idem_buf *b, const void *p, size_t len)
{
	if (len == 0)
		return idem_buf_nul(b);
	/* Room already (the common case: a call per field) or grow. */
	if (len >= b->cap - b->len && buf_grow(b, len) == -1)
		return -1;
	memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

int
idem_buf_addc(struct idem_buf *b, char c)
{
	if (b->len + 2 > b->cap && buf_grow(b, 1) == -1)
		return -1;
	b->p[b->len++] = c;
	b->p[b->len] = '\0';
	return 0;
}

int
idem_buf_adds(struct idem_buf *b, const char *s)
{
	return idem_buf_add(b, s, strlen(s));
}

void
idem_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int
idem_buf_addf(struct idem_buf *b, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_grow(b, (size_t)n) == -1)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

static const char hexdigits[] = "0123456789abcdef";

void
idem_hex(const unsigned char *p, size_t n, char *out)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hexdigits[p[i] >> 4];
		out[2 * i + 1] = hexdigits[p[i] & 0xf];
	}
	out[2 * n] = '\0';
}

int
idem_buf_add_jstr(struct idem_buf *b, const char *s, size_t len)
{
	size_t		  i, run;
	unsigned char	  c;
	char		  esc[7];

	if (idem_buf_addc(b, '"') == -1)
		return -1;
	for (i = 0; i < len; i++) {
		/* A run that needs no escape goes in with one copy. */
		for (run = i; run < len && (unsigned char)s[run] >= 0x20 &&
		    s[run] != '"' && s[run] != '\\'; run++)
			continue;
		if (run > i) {
			if (idem_buf_add(b, s + i, run - i) == -1)
				return -1;
			if ((i = run) == len)
				break;
		}
		c = (unsigned char)s[i];
		switch (c) {
		case '"':  if (idem_buf_add(b, "\\\"", 2) == -1) return -1; continue;
		case '\\': if (idem_buf_add(b, "\\\\", 2) == -1) return -1; continue;
		case '\b': if (idem_buf_add(b, "\\b", 2) == -1) return -1; continue;
		case '\f': if (idem_buf_add(b, "\\f", 2) == -1) return -1; continue;
		case '\n': if (idem_buf_add(b, "\\n", 2) == -1) return -1; continue;
		case '\r': if (idem_buf_add(b, "\\r", 2) == -1) return -1; continue;
		case '\t': if (idem_buf_add(b, "\\t", 2) == -1) return -1; continue;
		default:
			break;
		}
		if (c < 0x20) {
			esc[0] = '\\'; esc[1] = 'u';
			esc[2] = '0'; esc[3] = '0';
			idem_hex(&c, 1, esc + 4);
			if (idem_buf_add(b, esc, 6) == -1)
				return -1;
		} else if (idem_buf_addc(b, (char)c) == -1)
			return -1;
	}
	return idem_buf_addc(b, '"');
}

int
idem_buf_nul(struct idem_buf *b)
{
	if (buf_grow(b, 0) == -1)
		return -1;
	b->p[b->len] = '\0';
	return 0;
}

void
idem_buf_reset(struct idem_buf *b)
{
	b->len = 0;
	if (b->p != NULL)
		b->p[0] = '\0';
}

void
idem_buf_free(struct idem_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

size_t
idem_fmt_int(char out[IDEM_INT_LEN], long long v)
{
	char			 d[IDEM_INT_LEN];
	size_t			 i = sizeof(d), n;
	unsigned long long	 u = v < 0 ? 0ULL - (unsigned long long)v :
				    (unsigned long long)v;

	/* Digits from the right, then copied out: no printf on hot paths. */
	do
		d[--i] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		d[--i] = '-';
	n = sizeof(d) - i;
	memcpy(out, d + i, n);
	out[n] = '\0';
	return n;
}
