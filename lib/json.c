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

struct idem_json {
	yajl_gen	g;
	int		failed;
	int		depth;		/* open objects and arrays */
};

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
	if (j == NULL)
		return;
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
	j->depth++;
	return st(j, yajl_gen_map_open(j->g));
}

int
idem_json_object_end(idem_json *j)
{
	LIVE(j);
	j->depth--;
	return st(j, yajl_gen_map_close(j->g));
}

int
idem_json_array(idem_json *j)
{
	LIVE(j);
	j->depth++;
	return st(j, yajl_gen_array_open(j->g));
}

int
idem_json_array_end(idem_json *j)
{
	LIVE(j);
	j->depth--;
	return st(j, yajl_gen_array_close(j->g));
}

static int
gen_string(idem_json *j, const char *s, size_t len)
{
	LIVE(j);
	return st(j, yajl_gen_string(j->g, (const unsigned char *)s, len));
}

int
idem_json_key(idem_json *j, const char *name)
{
	if (name == NULL) {
		if (j != NULL)
			j->failed = 1;
		return -1;
	}
	return gen_string(j, name, strlen(name));
}

int
idem_json_str(idem_json *j, const char *s)
{
	return s == NULL ? idem_json_null(j) : gen_string(j, s, strlen(s));
}

int
idem_json_int(idem_json *j, long long v)
{
	LIVE(j);
	return st(j, yajl_gen_integer(j->g, v));
}

int
idem_json_bool(idem_json *j, int v)
{
	LIVE(j);
	return st(j, yajl_gen_bool(j->g, v != 0));
}

int
idem_json_null(idem_json *j)
{
	LIVE(j);
	return st(j, yajl_gen_null(j->g));
}

int
idem_json_number(idem_json *j, const char *text)
{
	LIVE(j);
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
		return st(j, yajl_gen_number(j->g, v->u.number.r,
		    strlen(v->u.number.r)));
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
		return st(j, yajl_gen_number(j->g, s, strlen(s)));
	case OID_FLOAT4:
	case OID_FLOAT8:
	case OID_NUMERIC:
		if (finite_number(s))
			return st(j, yajl_gen_number(j->g, s, strlen(s)));
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
