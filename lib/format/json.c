/*
 * json.c - the JSON writer of handlers: yajl_gen with sticky errors,
 * UTF-8 validation, PostgreSQL values by column type, and the response.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "private.h"

/* PostgreSQL type OIDs (pg_type.dat): stable across releases. */
#define OID_BOOL	16
#define OID_INT8	20
#define OID_INT2	21
#define OID_INT4	23
#define OID_OID		26
#define OID_JSON	114
#define OID_FLOAT4	700
#define OID_FLOAT8	701
#define OID_NUMERIC	1700
#define OID_JSONB	3802

#define JSON_DEPTH_MAX	128

/*
 * yajl_gen takes a string where a key belongs for a key, and one where a
 * value belongs for a value, so a misplaced call would still write JSON,
 * just not the intended document: the writer keeps its own state.
 */
struct idem_json {
	yajl_gen	g;
	int		failed;
	int		depth;		/* open objects and arrays */
	int		want_key;	/* in an object, before a key */
	unsigned char	obj[JSON_DEPTH_MAX];	/* per level: 1 object */
};

static int
fail(idem_json *j)
{
	j->failed = 1;
	return -1;
}

/* Before a value: allowed here?  Then the object wants a key again. */
static int
value_ok(idem_json *j)
{
	if (j->depth > 0 && j->obj[j->depth - 1]) {
		if (j->want_key)
			return fail(j);
		j->want_key = 1;
	}
	return 0;
}

static int
open_level(idem_json *j, int obj)
{
	if (value_ok(j) == -1 || j->depth == JSON_DEPTH_MAX)
		return fail(j);
	j->obj[j->depth++] = (unsigned char)obj;
	j->want_key = obj;
	return 0;
}

static int
close_level(idem_json *j, int obj)
{
	if (j->depth == 0 || j->obj[j->depth - 1] != obj ||
	    (obj && !j->want_key))
		return fail(j);
	j->depth--;
	j->want_key = j->depth > 0 && j->obj[j->depth - 1];
	return 0;
}

/*
 * Strict UTF-8 (RFC 3629): yajl's check lets overlong forms and
 * surrogates through.
 */
static int
utf8_ok(const unsigned char *s, size_t len)
{
	size_t		i = 0, n, k;
	unsigned long	c;

	while (i < len) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if (s[i] >= 0xc2 && s[i] <= 0xdf)
			n = 1, c = s[i] & 0x1f;
		else if (s[i] >= 0xe0 && s[i] <= 0xef)
			n = 2, c = s[i] & 0x0f;
		else if (s[i] >= 0xf0 && s[i] <= 0xf4)
			n = 3, c = s[i] & 0x07;
		else
			return 0;
		if (len - i <= n)
			return 0;
		for (k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			c = c << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
		    (n == 3 && (c < 0x10000 || c > 0x10ffff)))
			return 0;
		i += n + 1;
	}
	return 1;
}

idem_json *
idem_json_new(void)
{
	idem_json	*j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	if ((j->g = yajl_gen_alloc(NULL)) == NULL) {
		free(j);
		return NULL;
	}
	/* A handler's strings come from anywhere: never emit broken UTF-8. */
	yajl_gen_config(j->g, yajl_gen_validate_utf8, 1);
	return j;
}

void
idem_json_free(idem_json *j)
{
	if (j != NULL)
		yajl_gen_free(j->g);
	free(j);
}

/* Record the outcome of one yajl_gen call. */
static int
st(idem_json *j, yajl_gen_status s)
{
	if (s != yajl_gen_status_ok)
		j->failed = 1;
	return j->failed ? -1 : 0;
}

#define LIVE(j)	do { if ((j) == NULL || (j)->failed) return -1; } while (0)

int
idem_json_object(idem_json *j)
{
	LIVE(j);
	if (open_level(j, 1) == -1)
		return -1;
	return st(j, yajl_gen_map_open(j->g));
}

int
idem_json_object_end(idem_json *j)
{
	LIVE(j);
	if (close_level(j, 1) == -1)
		return -1;
	return st(j, yajl_gen_map_close(j->g));
}

int
idem_json_array(idem_json *j)
{
	LIVE(j);
	if (open_level(j, 0) == -1)
		return -1;
	return st(j, yajl_gen_array_open(j->g));
}

int
idem_json_array_end(idem_json *j)
{
	LIVE(j);
	if (close_level(j, 0) == -1)
		return -1;
	return st(j, yajl_gen_array_close(j->g));
}

static int
gen_string(idem_json *j, const char *s, size_t len)
{
	LIVE(j);
	if (!utf8_ok((const unsigned char *)s, len) || value_ok(j) == -1)
		return fail(j);
	return st(j, yajl_gen_string(j->g, (const unsigned char *)s, len));
}

int
idem_json_key(idem_json *j, const char *name)
{
	LIVE(j);
	if (name == NULL || j->depth == 0 || !j->obj[j->depth - 1] ||
	    !j->want_key || !utf8_ok((const unsigned char *)name,
	    strlen(name)))
		return fail(j);
	j->want_key = 0;
	return st(j, yajl_gen_string(j->g, (const unsigned char *)name,
	    strlen(name)));
}

int
idem_json_str(idem_json *j, const char *s)
{
	return s == NULL ? idem_json_null(j) : gen_string(j, s, strlen(s));
}

int
idem_json_int(idem_json *j, long long v)
{
	char	text[IDEM_INT_LEN];

	LIVE(j);
	if (value_ok(j) == -1)
		return -1;
	/* The same digits yajl_gen_integer's printf would write. */
	return st(j, yajl_gen_number(j->g, text, idem_fmt_int(text, v)));
}

int
idem_json_bool(idem_json *j, int v)
{
	LIVE(j);
	if (value_ok(j) == -1)
		return -1;
	return st(j, yajl_gen_bool(j->g, v != 0));
}

int
idem_json_null(idem_json *j)
{
	LIVE(j);
	if (value_ok(j) == -1)
		return -1;
	return st(j, yajl_gen_null(j->g));
}

int
idem_json_number(idem_json *j, const char *text)
{
	LIVE(j);
	if (value_ok(j) == -1)
		return -1;
	return st(j, yajl_gen_number(j->g, text, strlen(text)));
}

int
idem_json_kstr(idem_json *j, const char *key, const char *s)
{
	return idem_json_key(j, key) == -1 ? -1 : idem_json_str(j, s);
}

int
idem_json_kint(idem_json *j, const char *key, long long v)
{
	return idem_json_key(j, key) == -1 ? -1 : idem_json_int(j, v);
}

int
idem_json_value(idem_json *j, yajl_val v)
{
	size_t	i;

	LIVE(j);
	if (v == NULL)
		return idem_json_null(j);
	switch (v->type) {
	case yajl_t_string:
		return idem_json_str(j, v->u.string);
	case yajl_t_number:
		/* The source digits, so that nothing is rounded. */
		return idem_json_number(j, v->u.number.r);
	case yajl_t_true:
		return idem_json_bool(j, 1);
	case yajl_t_false:
		return idem_json_bool(j, 0);
	case yajl_t_null:
		return idem_json_null(j);
	case yajl_t_object:
		idem_json_object(j);
		for (i = 0; i < v->u.object.len; i++) {
			idem_json_key(j, v->u.object.keys[i]);
			idem_json_value(j, v->u.object.values[i]);
		}
		return idem_json_object_end(j);
	case yajl_t_array:
		idem_json_array(j);
		for (i = 0; i < v->u.array.len; i++)
			idem_json_value(j, v->u.array.values[i]);
		return idem_json_array_end(j);
	default:
		break;
	}
	j->failed = 1;
	return -1;
}

/* A numeric's text is a JSON number unless NaN or +-Infinity. */
static int
finite_number(const char *s)
{
	char	*end;
	double	 d = strtod(s, &end);

	return end != s && *end == '\0' && isfinite(d);
}

int
idem_json_pg(idem_json *j, const PGresult *r, int row, int col)
{
	const char	*s;
	yajl_val	 tree;
	int		 rc;

	LIVE(j);
	if (r == NULL || row < 0 || row >= PQntuples(r) || col < 0 ||
	    col >= PQnfields(r) || PQfformat(r, col) != 0) {
		j->failed = 1;
		return -1;
	}
	if (PQgetisnull(r, row, col))
		return idem_json_null(j);
	s = PQgetvalue(r, row, col);
	switch (PQftype(r, col)) {
	case OID_BOOL:
		return idem_json_bool(j, s[0] == 't');
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
	case OID_OID:
		return idem_json_number(j, s);
	case OID_FLOAT4:
	case OID_FLOAT8:
	case OID_NUMERIC:
		if (finite_number(s))
			return idem_json_number(j, s);
		return idem_json_str(j, s);
	case OID_JSON:
	case OID_JSONB:
		/* Re-emitted compactly, as the rest of the document. */
		if ((tree = yajl_tree_parse(s, NULL, 0)) == NULL) {
			j->failed = 1;
			return -1;
		}
		rc = idem_json_value(j, tree);
		yajl_tree_free(tree);
		return rc;
	default:
		return idem_json_str(j, s);
	}
}

int
idem_json_pg_row(idem_json *j, const PGresult *r, int row)
{
	int	col;

	if (idem_json_object(j) == -1 || r == NULL)
		return -1;
	for (col = 0; col < PQnfields(r); col++)
		if (idem_json_key(j, PQfname(r, col)) == -1 ||
		    idem_json_pg(j, r, row, col) == -1)
			return -1;
	return idem_json_object_end(j);
}

const char *
idem_json_buf(const idem_json *j, size_t *len)
{
	const unsigned char	*buf;
	size_t			 n;

	if (j == NULL || j->failed ||
	    yajl_gen_get_buf(j->g, &buf, &n) != yajl_gen_status_ok ||
	    n == 0 || j->depth != 0)
		return NULL;
	if (len != NULL)
		*len = n;
	return (const char *)buf;
}

int
idem_json_send(idem_json *j, idem_req *req, int status)
{
	const char	*buf;
	size_t		 len;
	int		 rc = -1;

	if ((buf = idem_json_buf(j, &len)) != NULL)
		rc = idem_resp_json(req, status, buf, len);
	idem_json_free(j);
	return rc;
}
