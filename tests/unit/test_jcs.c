/*
 * test_jcs.c - unit tests for the RFC 8785 canonicaliser (jcs.c): the
 * RFC's own examples and number vectors, and the ways a body is refused.
 */
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "tap.h"

static struct idem_buf	 out;
static char		 err[128];

/*
 * Canonicalise len bytes (from an exact-size heap copy, so that ASan
 * catches a read past len); the result, or "ERR" with err set.
 */
static enum idem_jcs_result	 last_rc;

static const char *
canon_lim(const char *in, size_t len, const struct idem_jcs_limits *lim)
{
	char	*copy;

	if ((copy = malloc(len ? len : 1)) == NULL)
		return "ERR";
	memcpy(copy, in, len);
	idem_buf_reset(&out);
	err[0] = '\0';
	last_rc = idem_jcs_canonicalize(copy, len, lim, &out, err,
	    sizeof(err));
	free(copy);
	if (last_rc != IDEM_JCS_OK)
		return "ERR";
	if (idem_buf_nul(&out) == -1)
		return "ERR";
	return out.p;
}

static const char *
canon_n(const char *in, size_t len, unsigned depth)
{
	struct idem_jcs_limits	 lim = { depth, IDEM_JSON_MAX_VALUES };

	return canon_lim(in, len, &lim);
}

static const char *
canon(const char *in)
{
	return canon_n(in, strlen(in), IDEM_JSON_MAX_DEPTH);
}

#define CANON(in, want)	TAP_STREQ(canon(in), want, "canon %s", #in)
#define REJECT(in, why) do {						\
	TAP_STREQ(canon_n(in, sizeof(in) - 1, IDEM_JSON_MAX_DEPTH), "ERR", \
	    "reject %s", #in);						\
	TAP_OK(strncmp(err, why, strlen(why)) == 0,			\
	    "  because \"%s\" (%s)", why, err);				\
} while (0)

static struct idem_buf	 numout;

/* idem_jcs_number on text; "ERR" when it refuses. */
static const char *
num(const char *s)
{
	idem_buf_reset(&numout);
	if (idem_jcs_number(s, strlen(s), &numout) == -1)
		return "ERR";
	return numout.p != NULL ? numout.p : "";
}

#define NUM(in, want)	TAP_STREQ(num(in), want, "number %s", in)

/* RFC 8785 appendix B: the double with these bits, as %.17g, canonical. */
static void
num_bits(uint64_t bits, const char *want)
{
	double	 d;
	char	 s[64];

	memcpy(&d, &bits, sizeof(d));
	snprintf(s, sizeof(s), "%.17g", d);
	TAP_STREQ(num(s), want, "bits %016llx (%s)",
	    (unsigned long long)bits, s);
}

static char *
nest(size_t n, const char *open, const char *mid, const char *close)
{
	size_t	 lo = strlen(open), lm = strlen(mid), lc = strlen(close), i;
	char	*s, *p;

	if ((s = malloc(n * (lo + lc) + lm + 1)) == NULL)
		abort();
	p = s;
	for (i = 0; i < n; i++, p += lo)
		memcpy(p, open, lo);
	memcpy(p, mid, lm);
	p += lm;
	for (i = 0; i < n; i++, p += lc)
		memcpy(p, close, lc);
	*p = '\0';
	return s;
}

static void
test_rfc_examples(void)
{
	/* RFC 8785 section 3.2.2 */
	TAP_STREQ(canon("{\n"
	    "  \"numbers\": [333333333.33333329, 1E30, 4.50,\n"
	    "              2e-3, 0.000000000000000000000000001],\n"
	    "  \"string\": \"\\u20ac$\\u000F\\u000aA'"
	    "\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
	    "  \"literals\": [null, true, false]\n"
	    "}"),
	    "{\"literals\":[null,true,false],"
	    "\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
	    "\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}",
	    "RFC 8785 3.2.2 example");

	/* RFC 8785 section 3.2.3: sorted by UTF-16 code units */
	TAP_STREQ(canon("{\n"
	    "  \"\\u20ac\": \"Euro Sign\",\n"
	    "  \"\\r\": \"Carriage Return\",\n"
	    "  \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\",\n"
	    "  \"1\": \"One\",\n"
	    "  \"\\ud83d\\ude00\": \"Emoji: Grinning Face\",\n"
	    "  \"\\u0080\": \"Control\",\n"
	    "  \"\\u00f6\": \"Latin Small Letter O With Diaeresis\"\n"
	    "}"),
	    "{\"\\r\":\"Carriage Return\","
	    "\"1\":\"One\","
	    "\"\xc2\x80\":\"Control\","
	    "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
	    "\"\xe2\x82\xac\":\"Euro Sign\","
	    "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
	    "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}",
	    "RFC 8785 3.2.3 sorting example");

	/* Above U+FFFF sorts before U+E000..U+FFFF (unlike UTF-8 bytes). */
	CANON("{\"\xef\xbf\xbf\":1,\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":3}",
	    "{\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":3,\"\xef\xbf\xbf\":1}");
	CANON("{\"\xf4\x8f\xbf\xbf\":1,\"\xf0\x90\x80\x80\":2,"
	    "\"\xed\x9f\xbf\":3}",
	    "{\"\xed\x9f\xbf\":3,\"\xf0\x90\x80\x80\":2,"
	    "\"\xf4\x8f\xbf\xbf\":1}");
	/* A prefix sorts first; U+0001 is an ordinary code unit. */
	CANON("{\"ab\":1,\"a\":2,\"a\\u0001\":3,\"\":4,\"B\":5}",
	    "{\"\":4,\"B\":5,\"a\":2,\"a\\u0001\":3,\"ab\":1}");
}

static void
test_numbers(void)
{
	/* RFC 8785 appendix B */
	num_bits(0x0000000000000000ULL, "0");
	num_bits(0x8000000000000000ULL, "0");
	num_bits(0x0000000000000001ULL, "5e-324");
	num_bits(0x8000000000000001ULL, "-5e-324");
	num_bits(0x7fefffffffffffffULL, "1.7976931348623157e+308");
	num_bits(0xffefffffffffffffULL, "-1.7976931348623157e+308");
	num_bits(0x4340000000000000ULL, "9007199254740992");
	num_bits(0xc340000000000000ULL, "-9007199254740992");
	num_bits(0x4430000000000000ULL, "295147905179352830000");
	num_bits(0x44b52d02c7e14af5ULL, "9.999999999999997e+22");
	num_bits(0x44b52d02c7e14af6ULL, "1e+23");
	num_bits(0x44b52d02c7e14af7ULL, "1.0000000000000001e+23");
	num_bits(0x444b1ae4d6e2ef4eULL, "999999999999999700000");
	num_bits(0x444b1ae4d6e2ef4fULL, "999999999999999900000");
	num_bits(0x444b1ae4d6e2ef50ULL, "1e+21");
	num_bits(0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7");
	num_bits(0x3eb0c6f7a0b5ed8dULL, "0.000001");
	num_bits(0x41b3de4355555553ULL, "333333333.3333332");
	num_bits(0x41b3de4355555554ULL, "333333333.33333325");
	num_bits(0x41b3de4355555555ULL, "333333333.3333333");
	num_bits(0x41b3de4355555556ULL, "333333333.3333334");
	num_bits(0x41b3de4355555557ULL, "333333333.33333343");
	num_bits(0xbecbf647612f3696ULL, "-0.0000033333333333333333");
	num_bits(0x43143ff3c1cb0959ULL, "1424953923781206.2");
	/* Powers of two, where the nearest 16-digit decimal does not
	 * round-trip but the next one up does (checked against V8). */
	num_bits(0x0060000000000000ULL, "7.120236347223045e-307");
	num_bits(0x4580000000000000ULL, "6.189700196426902e+26");
	num_bits(0x0010000000000000ULL, "2.2250738585072014e-308");
	num_bits(0x000fffffffffffffULL, "2.225073858507201e-308");
	num_bits(0x3ff0000000000001ULL, "1.0000000000000002");
	num_bits(0x3fb999999999999aULL, "0.1");
	num_bits(0x3fd5555555555555ULL, "0.3333333333333333");
	num_bits(0x3fe0000000000000ULL, "0.5");
	num_bits(0x7fe0000000000000ULL, "8.98846567431158e+307");

	/* ECMAScript formatting from JSON text */
	NUM("0", "0");
	NUM("-0", "0");
	NUM("-0.0e5", "0");
	NUM("1", "1");
	NUM("1.0", "1");
	NUM("1.00000", "1");
	NUM("1e2", "100");
	NUM("1E2", "100");
	NUM("1e+2", "100");
	NUM("100e-2", "1");
	NUM("-1.5", "-1.5");
	NUM("4.50", "4.5");
	NUM("0.1", "0.1");
	NUM("123456789012345678", "123456789012345680");
	NUM("1e20", "100000000000000000000");
	NUM("1e21", "1e+21");
	NUM("-1e21", "-1e+21");
	NUM("1.5e21", "1.5e+21");
	NUM("123e20", "1.23e+22");
	NUM("0.000001", "0.000001");
	NUM("0.0000015", "0.0000015");
	NUM("1e-6", "0.000001");
	NUM("1e-7", "1e-7");
	NUM("1.5e-7", "1.5e-7");
	NUM("-1.5e-7", "-1.5e-7");
	NUM("0.00000012345", "1.2345e-7");
	NUM("123.456", "123.456");
	NUM("1e300", "1e+300");
	NUM("2e-3", "0.002");
	NUM("1e-400", "0");
	NUM("-1e-400", "0");
	NUM("9007199254740993", "9007199254740992");
	NUM("0.30000000000000004", "0.30000000000000004");
	NUM("1e400", "ERR");
	NUM("-1e400", "ERR");
	NUM("1.8e308", "ERR");
	NUM("1.7976931348623157e308", "1.7976931348623157e+308");
	NUM("", "ERR");
	NUM("-", "ERR");
	NUM("01", "ERR");
	NUM("1.", "ERR");
	NUM(".5", "ERR");
	NUM("+1", "ERR");
	NUM("1e", "ERR");
	NUM("1e+", "ERR");
	NUM("0x10", "ERR");
	NUM(" 1", "ERR");
	NUM("1 ", "ERR");
	NUM("inf", "ERR");
	NUM("nan", "ERR");
	NUM("Infinity", "ERR");
	TAP_OK(idem_jcs_number("12", 1, &out) == 0, "number honours len");
	TAP_OK(idem_jcs_number(NULL, 0, &out) == -1, "NULL number refused");
}

static void
test_long_numbers(void)
{
	char	*s;

	/* 1 followed by 400 zeros: too big for a double. */
	if ((s = malloc(1000)) == NULL)
		abort();
	s[0] = '1';
	memset(s + 1, '0', 400);
	s[401] = '\0';
	TAP_STREQ(num(s), "ERR", "1 and 400 zeros is out of range");
	/* 0.000...0001 (500 zeros) underflows to 0. */
	memcpy(s, "0.", 2);
	memset(s + 2, '0', 500);
	memcpy(s + 502, "1", 2);
	TAP_STREQ(num(s), "0", "0.(500 zeros)1 is 0");
	/* 300 digits (value as V8 prints it) */
	memset(s, '3', 300);
	s[300] = '\0';
	TAP_STREQ(num(s), "3.3333333333333335e+299", "300 threes");
	free(s);
}

static void
test_strings(void)
{
	CANON("\"\\u0041\"", "\"A\"");
	CANON("\"\\u001f\"", "\"\\u001f\"");
	CANON("\"\\u001F\"", "\"\\u001f\"");
	CANON("\"\\u0001\"", "\"\\u0001\"");
	/* An escaped backslash, then "u0000": no NUL in that. */
	CANON("\"\\\\u0000\"", "\"\\\\u0000\"");
	CANON("\"\\u0008\\u0009\\u000a\\u000c\\u000d\"", "\"\\b\\t\\n\\f\\r\"");
	CANON("\"\\b\\f\\n\\r\\t\"", "\"\\b\\f\\n\\r\\t\"");
	CANON("\"\\/\"", "\"/\"");
	CANON("\"/\"", "\"/\"");
	CANON("\"\\\"\\\\\"", "\"\\\"\\\\\"");
	CANON("\"\\u0022\\u005c\"", "\"\\\"\\\\\"");
	CANON("\"\\u00e9\"", "\"\xc3\xa9\"");
	CANON("\"\xc3\xa9\"", "\"\xc3\xa9\"");
	CANON("\"\\u007f\"", "\"\x7f\"");
	CANON("\"\\u2028\\u2029\"", "\"\xe2\x80\xa8\xe2\x80\xa9\"");
	CANON("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"");
	CANON("\"\\uD83D\\uDE00\"", "\"\xf0\x9f\x98\x80\"");
	CANON("\"\\udbff\\udfff\"", "\"\xf4\x8f\xbf\xbf\"");
	CANON("\"\xf4\x8f\xbf\xbf\"", "\"\xf4\x8f\xbf\xbf\"");
	CANON("\"\\uffff\"", "\"\xef\xbf\xbf\"");
	CANON("\"\"", "\"\"");
	/* An escaped backslash then "u": no \u escape at all. */
	CANON("\"\\\\ud800\"", "\"\\\\ud800\"");
	CANON("[\"\\\\\",\"\\\\\\\"ud800\"]", "[\"\\\\\",\"\\\\\\\"ud800\"]");
	CANON("{\"\\u0061\\n\":\"\\u0062\"}", "{\"a\\n\":\"b\"}");
}

static void
test_structure(void)
{
	CANON("{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}");
	CANON("{\"a\":2,\"b\":1}", "{\"a\":2,\"b\":1}");
	CANON(" { \"b\" : [ 1 , 2 ] ,\n\t\"a\" :{ } } \r\n",
	    "{\"a\":{},\"b\":[1,2]}");
	CANON("[3,1,2]", "[3,1,2]");
	CANON("[]", "[]");
	CANON("{}", "{}");
	CANON("[[],{},[[]],{\"a\":{}}]", "[[],{},[[]],{\"a\":{}}]");
	CANON("{\"z\":{\"y\":1,\"x\":2},\"a\":[{\"c\":1,\"b\":2}]}",
	    "{\"a\":[{\"b\":2,\"c\":1}],\"z\":{\"x\":2,\"y\":1}}");
	CANON("{\"a\":1.0}", "{\"a\":1}");
	CANON("{\"a\":1}", "{\"a\":1}");
	CANON("[1e2,-0,0.0,-0.0,10E-1]", "[100,0,0,0,1]");
	CANON("{\"a\":1,\"A\":2}", "{\"A\":2,\"a\":1}");
	CANON("{\"a\":{\"a\":{\"a\":1}}}", "{\"a\":{\"a\":{\"a\":1}}}");
	CANON("{\"\":1}", "{\"\":1}");
	CANON("[true,false,null]", "[true,false,null]");

	/* RFC 8259 allows any value at the top. */
	CANON("1", "1");
	CANON(" 1.50 ", "1.5");
	CANON("\"x\"", "\"x\"");
	CANON("true", "true");
	CANON("false", "false");
	CANON("null", "null");
	CANON("-0", "0");
}

static void
test_rejects(void)
{
	REJECT("", "empty JSON text");
	REJECT(" \t\r\n", "empty JSON text");
	REJECT("{\"a\":1,\"a\":2}", "duplicate member name");
	REJECT("{\"a\":1,\"\\u0061\":1}", "duplicate member name");
	REJECT("{\"\xc3\xa9\":1,\"\\u00e9\":2}", "duplicate member name");
	REJECT("{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude00\":2}",
	    "duplicate member name");
	REJECT("{\"x\":[{\"b\":1,\"c\":0,\"b\":1}]}", "duplicate member name");
	REJECT("{\"\":1,\"\":2}", "duplicate member name");
	REJECT("[1e400]", "number out of range");
	REJECT("{\"a\":-1e400}", "number out of range");
	REJECT("1e400", "number out of range");

	REJECT("[1] x", "invalid JSON at byte");
	REJECT("[1]]", "invalid JSON at byte");
	REJECT("{} {}", "invalid JSON at byte");
	REJECT("1 2", "invalid JSON at byte");
	REJECT("\"a\" \"b\"", "invalid JSON at byte");
	REJECT("[1] /* c */", "invalid JSON at byte");
	REJECT("// c\n[1]", "invalid JSON at byte");
	REJECT("[1,]", "invalid JSON at byte");
	REJECT("{\"a\":1,}", "invalid JSON at byte");
	REJECT("[01]", "invalid JSON at byte");
	REJECT("[1.]", "invalid JSON at byte");
	REJECT("[.5]", "invalid JSON at byte");
	REJECT("[+1]", "invalid JSON at byte");
	REJECT("[NaN]", "invalid JSON at byte");
	REJECT("[Infinity]", "invalid JSON at byte");
	REJECT("['a']", "invalid JSON at byte");
	REJECT("{a:1}", "invalid JSON at byte");
	REJECT("{\"a\"}", "invalid JSON at byte");
	REJECT("{\"a\":}", "invalid JSON at byte");
	REJECT("[", "invalid JSON at byte");
	REJECT("{\"a\":[1}", "invalid JSON at byte");
	REJECT("\"abc", "invalid JSON at byte");
	REJECT("tru", "invalid JSON at byte");
	REJECT("[\"a\\x\"]", "invalid JSON at byte");
	REJECT("[\"\\u12\"]", "invalid JSON at byte");
	REJECT("[\"a\tb\"]", "invalid JSON at byte");
	REJECT("[\"a\nb\"]", "invalid JSON at byte");
	REJECT("\xef\xbb\xbf[1]", "invalid JSON at byte");

	/* Not UTF-8, or not Unicode, raw: yajl's lexer catches bad lead and
	 * continuation bytes, jcs.c the rest. */
	REJECT("[\"\xff\"]", "invalid JSON at byte");
	REJECT("[\"\x80\"]", "invalid JSON at byte");
	REJECT("[\"\xc3\"]", "invalid JSON at byte");
	REJECT("[\"\xe2\x82\"]", "invalid JSON at byte");
	REJECT("{\"\xff\":1}", "invalid JSON at byte");
	REJECT("[\"\xc0\x80\"]", "invalid UTF-8");
	REJECT("[\"\xc1\xbf\"]", "invalid UTF-8");
	REJECT("[\"\xe0\x80\x80\"]", "invalid UTF-8");
	REJECT("[\"\xf0\x80\x80\x80\"]", "invalid UTF-8");
	REJECT("[\"\xed\xa0\x80\"]", "invalid UTF-8");
	REJECT("[\"\xed\xbf\xbf\"]", "invalid UTF-8");
	REJECT("[\"\xf4\x90\x80\x80\"]", "invalid UTF-8");
	REJECT("[\"\xf5\x80\x80\x80\"]", "invalid UTF-8");
	REJECT("{\"\xed\xa0\x80\":1}", "invalid UTF-8");

	/* Lone or mismatched surrogate escapes. */
	REJECT("\"\\ud800\"", "invalid \\u escape");
	REJECT("\"\\udbff\"", "invalid \\u escape");
	REJECT("[\"\\ud800x\"]", "invalid \\u escape");
	REJECT("[\"\\ud800\\n\"]", "invalid \\u escape");
	REJECT("[\"\\ud800\\u0041\"]", "invalid \\u escape");
	REJECT("[\"\\ud800\\ud800\"]", "invalid \\u escape");
	REJECT("[\"x\\ude00\"]", "invalid \\u escape");
	REJECT("[\"\\udc00\\ud800\"]", "invalid \\u escape");
	REJECT("{\"\\ud800\":1}", "invalid \\u escape");
	REJECT("{\"a\":\"\\\\\",\"b\":\"\\ud800\"}", "invalid \\u escape");

	/* A high surrogate written raw next to an escape stays invalid. */
	REJECT("[\"\\ud83d\xed\xb8\x80\"]", "invalid");

	/* The message never quotes the body. */
	TAP_STREQ(canon("{\"a\":SECRET}"), "ERR", "reject unquoted word");
	TAP_OK(strstr(err, "SECRET") == NULL && strstr(err, "SEC") == NULL,
	    "  message \"%s\" does not quote the body", err);
	TAP_OK(strncmp(err, "invalid JSON at byte ", 21) == 0,
	    "  message gives an offset");
}

static void
test_depth(void)
{
	struct idem_jcs_limits	 deep = { 1000000, 1000000 };
	char			*s;
	clock_t			 t0;
	double			 secs;

	s = nest(IDEM_JSON_MAX_DEPTH, "[", "", "]");
	TAP_OK(strcmp(canon(s), s) == 0, "64 nested arrays accepted");
	free(s);
	s = nest(IDEM_JSON_MAX_DEPTH + 1, "[", "", "]");
	TAP_STREQ(canon(s), "ERR", "65 nested arrays refused");
	TAP_STREQ(err, "nesting deeper than 64 levels", "  with the reason");
	free(s);
	s = nest(IDEM_JSON_MAX_DEPTH, "{\"a\":", "1", "}");
	TAP_OK(strcmp(canon(s), s) == 0, "64 nested objects accepted");
	free(s);
	s = nest(IDEM_JSON_MAX_DEPTH + 1, "{\"a\":", "1", "}");
	TAP_STREQ(canon(s), "ERR", "65 nested objects refused");
	free(s);
	s = nest(IDEM_JSON_MAX_DEPTH / 2, "[{\"k\":", "[]", "}]");
	TAP_OK(strcmp(canon(s), "ERR") == 0,
	    "32 [{ pairs plus [] is 65: refused");
	free(s);
	s = nest(IDEM_JSON_MAX_DEPTH / 2, "{\"k\":[", "0", "]}");
	TAP_OK(strcmp(canon(s), s) == 0, "32 {[ pairs is 64: accepted");
	free(s);

	/* A nesting bomb is refused early, without deep recursion. */
	t0 = clock();
	s = nest(10000, "[", "", "]");
	TAP_STREQ(canon(s), "ERR", "10000 nested arrays refused");
	free(s);
	s = nest(10000, "[", "", "");
	TAP_STREQ(canon(s), "ERR", "10000 unclosed arrays refused");
	free(s);
	s = nest(100000, "{\"a\":", "", "");
	TAP_STREQ(canon(s), "ERR", "100000 unclosed objects refused");
	free(s);
	secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	TAP_OK(secs < 2.0, "  quickly (%.3f s)", secs);

	/* The limit is the caller's. */
	TAP_STREQ(canon_n("[[1]]", 5, 2), "[[1]]", "depth 2 at limit 2");
	TAP_STREQ(canon_n("[[1]]", 5, 1), "ERR", "depth 2 over limit 1");
	TAP_STREQ(err, "nesting deeper than 1 levels", "  with the reason");
	TAP_STREQ(canon_n("1", 1, 0), "1", "scalar at limit 0");
	TAP_STREQ(canon_n("[]", 2, 0), "ERR", "array over limit 0");

	/* Very deep but allowed: emitting and freeing must not recurse. */
	s = nest(200000, "[", "", "]");
	TAP_OK(strcmp(canon_lim(s, strlen(s), &deep), s) == 0,
	    "200000 nested arrays with high limits");
	free(s);
}

static void
test_big(void)
{
	struct idem_buf	 in = { NULL, 0, 0 };
	const char	*r;
	int		 i, ok = 1;

	/* 5000 members in reverse order come out sorted. */
	idem_buf_addc(&in, '{');
	for (i = 4999; i >= 0; i--)
		idem_buf_addf(&in, "%s\"k%04d\":%d", i < 4999 ? "," : "", i, i);
	idem_buf_addc(&in, '}');
	r = canon_n(in.p, in.len, IDEM_JSON_MAX_DEPTH);
	ok = strncmp(r, "{\"k0000\":0,\"k0001\":1,", 21) == 0 &&
	    strstr(r, "\"k4998\":4998,\"k4999\":4999}") != NULL;
	TAP_OK(ok, "5000 members sorted");
	/* and a duplicate among them is found */
	in.p[in.len - 1] = ',';
	idem_buf_adds(&in, "\"k2500\":0}");
	TAP_STREQ(canon_n(in.p, in.len, IDEM_JSON_MAX_DEPTH), "ERR",
	    "duplicate among 5000 members");
	idem_buf_free(&in);
}

/*
 * Handlers read C strings: any U+0000, escaped or raw, in a string or a
 * member name is refused, with the reason, so that what they see is
 * exactly what was fingerprinted.
 */
static void
test_nul(void)
{
	static const struct {
		const char	*in;
		size_t		 len;
		const char	*why;
	} t[] = {
#define T(s, why)	{ s, sizeof(s) - 1, why }
		T("\"\\u0000\"", "U+0000 (\\u0000) in a string"),
		T("[\"a\",[\"\\u0000\"]]", "U+0000 (\\u0000) in a string"),
		T("{\"description\":\"ok\\u0000HIDDEN\"}",
		    "U+0000 (\\u0000) in a string"),
		T("{\"metadata\":{\"a\\u0000x\":\"1\",\"a\\u0000y\":\"2\"}}",
		    "U+0000 (\\u0000) in a member name"),
		T("{\"amount\\u0000junk\":1}",
		    "U+0000 (\\u0000) in a member name"),
		T("{\"\\u0000\":1}", "U+0000 (\\u0000) in a member name"),
		T("\"\\u0000\\u0000\"", "U+0000 (\\u0000) in a string"),
		T("[\"a\0b\"]", "NUL byte in the JSON text"),
		T("{\"a\0\":1}", "NUL byte in the JSON text"),
		T("[1]\0", "NUL byte in the JSON text"),
		T("\0[1]", "NUL byte in the JSON text"),
		T("\0", "NUL byte in the JSON text"),
#undef T
	};
	size_t	 i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		TAP_STREQ(canon_n(t[i].in, t[i].len, IDEM_JSON_MAX_DEPTH),
		    "ERR", "NUL refused: case %zu", i);
		TAP_OK(last_rc == IDEM_JCS_INVALID && strcmp(err, t[i].why)
		    == 0, "  as invalid, because \"%s\" (%s)", t[i].why, err);
	}
}

/* The cap on values counts every member value and element, and the top. */
static void
test_max_values(void)
{
	static const struct {
		const char		*in;
		size_t			 max;
		enum idem_jcs_result	 want;
	} t[] = {
		{ "1", 1, IDEM_JCS_OK },
		{ "[]", 1, IDEM_JCS_OK },
		{ "[0]", 1, IDEM_JCS_TOO_MANY },
		{ "[0]", 2, IDEM_JCS_OK },
		{ "[0,0,0]", 3, IDEM_JCS_TOO_MANY },
		{ "[0,0,0]", 4, IDEM_JCS_OK },
		{ "{\"a\":1,\"b\":2}", 2, IDEM_JCS_TOO_MANY },
		{ "{\"a\":1,\"b\":2}", 3, IDEM_JCS_OK },
		{ "[[[]]]", 2, IDEM_JCS_TOO_MANY },
		{ "[[[]]]", 3, IDEM_JCS_OK },
		{ "{\"a\":{\"b\":[null,true]}}", 4, IDEM_JCS_TOO_MANY },
		{ "{\"a\":{\"b\":[null,true]}}", 5, IDEM_JCS_OK },
		/* invalid before the cap: the first reason found wins */
		{ "[0,]", 10, IDEM_JCS_INVALID },
	};
	struct idem_jcs_limits	 lim = { IDEM_JSON_MAX_DEPTH, 0 };
	struct idem_buf		 big = { NULL, 0, 0 };
	size_t			 i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		lim.max_values = t[i].max;
		canon_lim(t[i].in, strlen(t[i].in), &lim);
		TAP_OK(last_rc == t[i].want, "%s with at most %zu values: %d "
		    "(%s)", t[i].in, t[i].max, (int)last_rc, err);
	}
	lim.max_values = 2;
	canon_lim("[1,2]", 5, &lim);
	TAP_STREQ(err, "more than 2 JSON values (members and array "
	    "elements)", "the reason names the cap");

	/* A 1 MiB array of zeros stops at the default cap. */
	idem_buf_addc(&big, '[');
	while (big.len < (1u << 20) - 2)
		idem_buf_adds(&big, "0,");
	idem_buf_adds(&big, "0]");
	lim.max_values = IDEM_JSON_MAX_VALUES;
	TAP_STREQ(canon_lim(big.p, big.len, &lim), "ERR",
	    "1 MiB [0,0,...] refused");
	TAP_OK(last_rc == IDEM_JCS_TOO_MANY && out.len == 0,
	    "  as too many values, nothing written");
	idem_buf_free(&big);
}

static void
test_output_buffer(void)
{
	struct idem_buf		 b = { NULL, 0, 0 };
	struct idem_jcs_limits	 lim = { IDEM_JSON_MAX_DEPTH,
				     IDEM_JSON_MAX_VALUES };

	idem_buf_adds(&b, "pre:");
	TAP_OK(idem_jcs_canonicalize("{\"b\":1,\"a\":2}", 13,
	    &lim, &b, err, sizeof(err)) == IDEM_JCS_OK &&
	    strcmp(b.p, "pre:{\"a\":2,\"b\":1}") == 0, "output is appended");
	TAP_OK(idem_jcs_canonicalize("[1,", 3, &lim, &b,
	    err, sizeof(err)) == IDEM_JCS_INVALID &&
	    strcmp(b.p, "pre:{\"a\":2,\"b\":1}") == 0,
	    "failure leaves the output alone");
	TAP_OK(idem_jcs_canonicalize("[1,", 3, &lim, &b,
	    NULL, 0) == IDEM_JCS_INVALID, "err may be NULL");
	TAP_OK(idem_jcs_canonicalize("{\"a\":1,\"a\":1}", 13,
	    &lim, &b, err, 5) == IDEM_JCS_INVALID && strlen(err) == 4,
	    "err is truncated to errlen");
	TAP_OK(idem_jcs_canonicalize("[1] trailing", 3, &lim,
	    &b, err, sizeof(err)) == IDEM_JCS_OK &&
	    strcmp(b.p, "pre:{\"a\":2,\"b\":1}[1]") == 0,
	    "only len bytes read");
	idem_buf_free(&b);
}

static void
test_idempotent(void)
{
	static const char *const in[] = {
		"{\"b\":[1.0,2e1,{\"d\":null,\"c\":\"\\u00e9\\u001f\"}],"
		    "\"a\":true}",
		"[\"\\ud83d\\ude00\",\"\\/\\\"\\\\\",-0,1e21,1e-7,0.000001]",
		"{\"\\ufb33\":1,\"\\ud83d\\ude00\":2,\"\\u20ac\":3,\"\\r\":4}",
		"\"\\u0001\\u007f\\u0080\"",
		"  123.456e-2  ",
		"{\"a\":{\"b\":{\"c\":[[[]]]}}}",
	};
	char	*first;
	size_t	 i;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		first = strdup(canon(in[i]));
		TAP_OK(strcmp(first, "ERR") != 0, "input %zu accepted", i);
		TAP_STREQ(canon(first), first,
		    "  canonical form %zu is a fixed point", i);
		free(first);
	}
	/* Different spellings of one value give one canonical form. */
	first = strdup(canon("{\"a\":[1,2],\"b\":{\"x\":\"\xc3\xa9\"}}"));
	TAP_STREQ(canon("{ \"b\" : { \"x\" : \"\\u00E9\" } ,"
	    " \"a\" : [ 1.0 , 2E0 ] }"),
	    first, "same value, different spelling, same bytes");
	TAP_STREQ(canon("{\"b\":{\"\\u0078\":\"\\u00e9\"},"
	    "\"a\":[10e-1,0.2e1]}"),
	    first, "  and another spelling");
	free(first);
}

static void
test_locale(void)
{
	/* The fingerprint must not depend on LC_NUMERIC. */
	if (setlocale(LC_NUMERIC, "de_DE.UTF-8") == NULL &&
	    setlocale(LC_NUMERIC, "fr_FR.UTF-8") == NULL) {
		TAP_OK(1, "numbers under a comma locale # SKIP neither "
		    "de_DE.UTF-8 nor fr_FR.UTF-8 is installed (as root, the "
		    "scripts generate de_DE.UTF-8: tests/lib/deps.sh)");
		return;
	}
	NUM("1.5", "1.5");
	CANON("[0.25,1e-7,333333333.33333329]",
	    "[0.25,1e-7,333333333.3333333]");
	setlocale(LC_NUMERIC, "C");
}

/*
 * The pruned form: the fingerprint of a route with fingerprint_exclude.
 * Each row: the body, the pointers (NULL-terminated, at most 3), the
 * pruned canonical form; the full form must stay the plain canonical one.
 */
static void
test_pruned(void)
{
	static const struct {
		const char	*in;
		const char	*ex[4];
		const char	*want;
	} t[] = {
		{ "{\"b\":1,\"trace\":\"x\",\"a\":2}", { "/trace" },
		  "{\"a\":2,\"b\":1}" },
		/* the first member, the last, all of them */
		{ "{\"a\":1,\"b\":2}", { "/a" }, "{\"b\":2}" },
		{ "{\"a\":1,\"b\":2}", { "/b" }, "{\"a\":1}" },
		{ "{\"a\":1,\"b\":2}", { "/a", "/b" }, "{}" },
		/* nested: only the member at that path */
		{ "{\"m\":{\"t\":1,\"u\":2},\"t\":3}", { "/m/t" },
		  "{\"m\":{\"u\":2},\"t\":3}" },
		/* a whole object member, containers included */
		{ "{\"m\":{\"t\":[1,{\"x\":2}]},\"n\":0}", { "/m" },
		  "{\"n\":0}" },
		/* array elements by index; the others keep their places */
		{ "{\"l\":[{\"id\":1,\"ts\":5},{\"id\":2,\"ts\":6}]}",
		  { "/l/1/ts" }, "{\"l\":[{\"id\":1,\"ts\":5},{\"id\":2}]}" },
		{ "[1,2,3]", { "/1" }, "[1,3]" },
		{ "[1,2,3]", { "/0", "/2" }, "[2]" },
		/* RFC 6901 escapes: ~1 is "/", ~0 is "~" */
		{ "{\"a/b\":1,\"a~b\":2,\"c\":3}", { "/a~1b", "/a~0b" },
		  "{\"c\":3}" },
		{ "{\"a/b\":1}", { "/a/b" }, "{\"a/b\":1}" },
		/* names nothing: nothing removed */
		{ "{\"a\":1}", { "/z", "/a/b", "/0" }, "{\"a\":1}" },
		{ "7", { "/a" }, "7" },
		/* a name as written in the body, escapes decoded */
		{ "{\"\\u0074race\":1,\"k\":2}", { "/trace" }, "{\"k\":2}" },
		/* the canonical number and order in what is left */
		{ "{\"z\":1.0e2,\"t\":1,\"a\":true}", { "/t" },
		  "{\"a\":true,\"z\":100}" },
	};
	static const struct {
		const char	*p;
		int		 ok;
	} ptrs[] = {
		{ "/a", 1 }, { "/a/0", 1 }, { "/a~0b", 1 }, { "/a~1b", 1 },
		{ "/", 0 }, { "", 0 }, { "a", 0 }, { "/a~", 0 }, { "/a~2", 0 },
		{ "/a\tb", 0 }, { "/a b", 1 }, { "//", 1 },
	};
	static const char	 dup[] = "{\"a\":1,\"a\":2}";
	struct idem_jcs_limits	 lim = { 64, 1000 };
	struct idem_buf		 full = { 0 }, pruned = { 0 }, plain = { 0 };
	size_t			 i, n;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		for (n = 0; t[i].ex[n] != NULL; n++)
			;
		full.len = pruned.len = plain.len = 0;
		TAP_OK(idem_jcs_canonicalize_pruned(t[i].in, strlen(t[i].in),
		    &lim, t[i].ex, n, &full, &pruned, err, sizeof(err)) ==
		    IDEM_JCS_OK && idem_buf_nul(&pruned) == 0 &&
		    idem_buf_nul(&full) == 0, "pruned %s", t[i].in);
		TAP_STREQ(pruned.p, t[i].want, "  without %s (%zu pointers)",
		    t[i].ex[0], n);
		idem_jcs_canonicalize(t[i].in, strlen(t[i].in), &lim, &plain,
		    err, sizeof(err));
		idem_buf_nul(&plain);
		TAP_STREQ(full.p, plain.p, "  the full form is the plain one");
	}
	/* A refused body leaves both buffers untouched. */
	full.len = pruned.len = 0;
	TAP_OK(idem_jcs_canonicalize_pruned(dup, strlen(dup), &lim, t[0].ex, 1, &full, &pruned, err, sizeof(err)) == IDEM_JCS_INVALID &&
	    full.len == 0 && pruned.len == 0, "a refused body writes nothing");
	for (i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
		TAP_OK(idem_jcs_pointer_ok(ptrs[i].p) == ptrs[i].ok,
		    "pointer '%s' %s", ptrs[i].p, ptrs[i].ok ? "accepted" :
		    "refused");
	idem_buf_free(&full);
	idem_buf_free(&pruned);
	idem_buf_free(&plain);
}

int
main(void)
{
	test_rfc_examples();
	test_numbers();
	test_long_numbers();
	test_strings();
	test_structure();
	test_rejects();
	test_depth();
	test_big();
	test_nul();
	test_max_values();
	test_output_buffer();
	test_idempotent();
	test_locale();
	test_pruned();
	idem_buf_free(&out);
	idem_buf_free(&numout);
	return TAP_DONE();
}
