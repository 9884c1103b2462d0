/*
 * test_config.c - unit tests for config.c: the INI parser, durations,
 * sizes, route TTLs and the retention window, application keys and
 * idem_cfg_load().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "heartbeat.h"
#include "tap.h"

#define NAME	"t.ini"

static struct idem_cfg	 cfg;
static char		 err[512];

static void
fresh(void)
{
	idem_cfg_free(&cfg);
	idem_cfg_init(&cfg);
	idem_cfg_allow(&cfg, "payments", "acquirer_url");
	idem_cfg_allow(&cfg, "payments", "currency");
	/* Typed application keys (test_app_typed). */
	idem_cfg_allow_typed(&cfg, "wallet", "fraud_timeout_ms",
	    IDEM_CONFIG_DURATION);
	idem_cfg_allow_typed(&cfg, "wallet", "max_items", IDEM_CONFIG_INT);
	idem_cfg_allow_typed(&cfg, "wallet", "max_upload", IDEM_CONFIG_SIZE);
	idem_cfg_allow_typed(&cfg, "wallet", "strict", IDEM_CONFIG_BOOL);
	idem_cfg_allow_typed(&cfg, "wallet", "name", IDEM_CONFIG_STRING);
}

/* Parse exactly len bytes from a heap copy, so ASan sees any overread. */
static int
parse_n(const char *text, size_t len)
{
	char	*copy;
	int	 rc;

	fresh();
	if ((copy = malloc(len ? len : 1)) == NULL)
		return -2;
	memcpy(copy, text, len);
	memset(err, 'X', sizeof(err) - 1);
	err[sizeof(err) - 1] = '\0';
	rc = idem_cfg_parse(&cfg, NAME, copy, len, err, sizeof(err));
	free(copy);
	return rc;
}

static int
parse(const char *text)
{
	return parse_n(text, strlen(text));
}

static int
has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* text must fail with err starting "t.ini:LINE: " and containing what. */
#define BAD_N(text, len, line, what) do {				\
	int r_ = parse_n(text, len);					\
	TAP_OK(r_ == -1, "reject %s", #text);				\
	TAP_OK(has_prefix(err, NAME ":" #line ": ") &&			\
	    strstr(err, what) != NULL, "  error at line %d: %s", line, err); \
} while (0)
#define BAD(text, line, what)	BAD_N(text, strlen(text), line, what)

#define GOOD(text) do {							\
	int r_ = parse(text);						\
	TAP_OK(r_ == 0 && err[0] == '\0', "accept %s%s%s", #text,	\
	    r_ ? " -- " : "", r_ ? err : "");				\
} while (0)

static const char full[] =
    "# comment lines start with # or ;\n"
    "; another comment\n"
    "[server]\n"
    "threads = 16            ; 1..256\n"
    "max_body = 2MiB        ; size, 1 .. 64MiB\n"
    "request_timeout = 45s\n"
    "listen = 127.0.0.1:9000   ; or a unix socket path (string)\n"
    "log_level = debug       ; debug|info|warn|error\n"
    "[database]\n"
    "conninfo = host=/run/postgresql dbname=payments   ; rest of line\n"
    "pool_size = 12\n"
    "acquire_timeout = 1500ms\n"
    "[idempotency]\n"
    "ttl = 48h\n"
    "lock_timeout = 10m\n"
    "evict_interval = 1m\n"
    "evict_batch = 500\n"
    "[metrics]\n"
    "allow = 127.0.0.1, ::1     ; addresses\n"
    "[route \"POST /v1/payments\"]\n"
    "ttl = 7d\n"
    "[route \"GET /v1/payments/:id\"]\n"
    "ttl = 1h\n"
    "[payments]             ; application section\n"
    "acquirer_url = http://127.0.0.1:9100\n";

static void
test_defaults(void)
{
	idem_cfg_free(&cfg);
	idem_cfg_init(&cfg);
	TAP_OK(cfg.threads == 8, "default threads 8");
	TAP_OK(cfg.max_body == 1048576, "default max_body 1 MiB");
	TAP_OK(cfg.request_timeout_ms == 30000, "default request_timeout 30s");
	TAP_OK(cfg.max_params == 65536, "default max_params 64 KiB");
	TAP_OK(cfg.read_timeout_ms == 10000, "default read_timeout 10s");
	TAP_OK(cfg.write_timeout_ms == 10000, "default write_timeout 10s");
	TAP_OK(cfg.max_buffered == 32 * 1048576, "default max_buffered 32 MiB");
	TAP_OK(cfg.socket_mode == 0660 && cfg.metrics_socket_mode == 0660 &&
	    cfg.socket_group == NULL && cfg.allow == NULL &&
	    cfg.metrics_allow_uid == NULL,
	    "default socket modes 0660, no group, no allow, no allow_uid");
	TAP_OK(cfg.listen == NULL, "default listen NULL");
	TAP_STREQ(cfg.log_level, "info", "default log_level info");
	TAP_OK(cfg.conninfo == NULL, "default conninfo NULL");
	TAP_OK(cfg.pool_size == 0, "default pool_size 0");
	TAP_OK(cfg.acquire_timeout_ms == 2000, "default acquire_timeout 2s");
	TAP_OK(cfg.ttl_ms == 86400000LL, "default ttl 24h");
	TAP_OK(cfg.lock_timeout_ms == 10000, "default lease 10s");
	TAP_OK(cfg.evict_interval_ms == 300000, "default evict_interval 5m");
	TAP_OK(cfg.evict_batch == 10000, "default evict_batch 10000");
	TAP_OK(cfg.completer_max_attempts == 10 &&
	    cfg.completer_max_age_ms == 86400000LL &&
	    cfg.completer_backoff_ms == 10000 &&
	    cfg.completer_backoff_max_ms == 600000,
	    "default completer_* 10, 24h, 10s, 10m");
	TAP_STREQ(cfg.metrics_allow, "127.0.0.1", "default metrics allow");
	TAP_OK(cfg.routes == NULL && cfg.app == NULL, "no routes, no app keys");

	/* An empty file, or only comments, keeps every default. */
	GOOD("");
	TAP_OK(cfg.threads == 8 && cfg.lock_timeout_ms == 10000,
	    "empty text keeps defaults");
	GOOD("# only\n; comments\n\n   \n\t\n");
	TAP_STREQ(cfg.log_level, "info", "comments-only keeps log_level");
}

static void
test_full(void)
{
	const struct idem_cfg_route	*r;

	GOOD(full);
	TAP_OK(cfg.threads == 16, "threads 16");
	TAP_OK(cfg.max_body == 2 * 1048576, "max_body 2MiB");
	TAP_OK(cfg.request_timeout_ms == 45000, "request_timeout 45s");
	TAP_STREQ(cfg.listen, "127.0.0.1:9000", "listen, comment cut");
	TAP_STREQ(cfg.log_level, "debug", "log_level debug");
	TAP_STREQ(cfg.conninfo, "host=/run/postgresql dbname=payments",
	    "conninfo keeps inner spaces, trailing comment cut");
	TAP_OK(cfg.pool_size == 12, "pool_size 12");
	TAP_OK(cfg.acquire_timeout_ms == 1500, "acquire_timeout 1500ms");
	TAP_OK(cfg.ttl_ms == 48 * 3600000LL, "ttl 48h");
	TAP_OK(cfg.lock_timeout_ms == 600000, "lock_timeout 10m");
	TAP_OK(cfg.evict_interval_ms == 60000, "evict_interval 1m");
	TAP_OK(cfg.evict_batch == 500, "evict_batch 500");
	TAP_STREQ(cfg.metrics_allow, "127.0.0.1, ::1", "allow kept raw");
	r = cfg.routes;
	TAP_OK(r != NULL && strcmp(r->method, "POST") == 0 &&
	    strcmp(r->path, "/v1/payments") == 0 && r->ttl_ms == 7 * 86400000LL,
	    "first route POST /v1/payments ttl 7d");
	r = r != NULL ? r->next : NULL;
	TAP_OK(r != NULL && strcmp(r->method, "GET") == 0 &&
	    strcmp(r->path, "/v1/payments/:id") == 0 && r->ttl_ms == 3600000,
	    "second route GET /v1/payments/:id ttl 1h");
	TAP_OK(r != NULL && r->next == NULL, "exactly two routes");
	TAP_STREQ(idem_cfg_app_get(&cfg, "payments", "acquirer_url"),
	    "http://127.0.0.1:9100", "app key acquirer_url");
	TAP_OK(idem_cfg_app_get(&cfg, "payments", "currency") == NULL,
	    "allowed but unset app key is NULL");

	/* Other values of the enumerations and bounds. */
	GOOD("[server]\nlog_level = warn\n");
	TAP_STREQ(cfg.log_level, "warn", "log_level warn");
	GOOD("[server]\nlog_level = error\n");
	TAP_STREQ(cfg.log_level, "error", "log_level error");
	GOOD("[server]\nlog_level = info\n");
	TAP_STREQ(cfg.log_level, "info", "log_level info");
	{
		static const struct {
			const char		*text;
			enum idem_prepared	 want;
		} prep[] = {
			{ "", IDEM_PREPARED_AUTO },
			{ "[database]\nprepared_statements = auto\n",
			    IDEM_PREPARED_AUTO },
			{ "[database]\nprepared_statements = on\n",
			    IDEM_PREPARED_ON },
			{ "[database]\nprepared_statements = off\n",
			    IDEM_PREPARED_OFF },
		};
		size_t	i;

		for (i = 0; i < sizeof(prep) / sizeof(prep[0]); i++) {
			GOOD(prep[i].text);
			TAP_OK(idem_cfg_prepared(&cfg) == prep[i].want,
			    "prepared_statements row %zu", i);
		}
	}
	GOOD("[server]\nthreads = 1\n");
	TAP_OK(cfg.threads == 1, "threads 1");
	GOOD("[server]\nthreads = 256\n");
	TAP_OK(cfg.threads == 256, "threads 256");
	GOOD("[server]\nmax_body = 64MiB\n");
	TAP_OK(cfg.max_body == 64 * 1048576, "max_body 64MiB");
	GOOD("[server]\nmax_body = 1\n");
	TAP_OK(cfg.max_body == 1, "max_body 1");
	GOOD("[server]\nlisten = /run/idem/payments.sock\n");
	TAP_STREQ(cfg.listen, "/run/idem/payments.sock", "listen unix path");
	GOOD("[database]\npool_size = 1024\n");
	TAP_OK(cfg.pool_size == 1024, "pool_size 1024");
	GOOD("[idempotency]\nevict_batch = 1000000\n");
	TAP_OK(cfg.evict_batch == 1000000, "evict_batch 1000000");
	GOOD("[idempotency]\ncompleter_max_attempts = 0\n"
	    "completer_backoff = 250ms\ncompleter_backoff_max = 1h\n");
	TAP_OK(cfg.completer_max_attempts == 0 &&
	    cfg.completer_backoff_ms == 250 &&
	    cfg.completer_backoff_max_ms == 3600000LL,
	    "completer_max_attempts 0, backoff 250ms, backoff_max 1h");
	GOOD("[metrics]\nallow = ::1\n");
	TAP_STREQ(cfg.metrics_allow, "::1", "allow ::1");
	GOOD("[metrics]\nallow = 10.0.0.1,192.168.1.2 , fe80::1,::ffff:1.2.3.4\n");
	TAP_STREQ(cfg.metrics_allow, "10.0.0.1,192.168.1.2 , fe80::1,::ffff:1.2.3.4",
	    "allow list of four");
	GOOD("  [server]  \n\tthreads\t=\t4\t\n");
	TAP_OK(cfg.threads == 4, "blanks around header, key and value");
	GOOD("[server]\nthreads=5\n");
	TAP_OK(cfg.threads == 5, "no blanks around '='");
	GOOD("[database]\nconninfo = a=b  c = d\n");
	TAP_STREQ(cfg.conninfo, "a=b  c = d", "value split at first '=' only");
	GOOD("\xef\xbb\xbf[server]\nthreads = 3\n");
	TAP_OK(cfg.threads == 3, "UTF-8 BOM skipped");
	GOOD("[server]\nthreads = 3");
	TAP_OK(cfg.threads == 3, "no newline at end of file");
	GOOD("[payments]\nacquirer_url = caf\xc3\xa9\n");
	TAP_STREQ(idem_cfg_app_get(&cfg, "payments", "acquirer_url"),
	    "caf\xc3\xa9", "UTF-8 in a value");
}

static void
test_comments_crlf(void)
{
	GOOD("[server]\r\nthreads = 4\r\nlisten = 127.0.0.1:9000\r\n");
	TAP_OK(cfg.threads == 4, "CRLF: threads");
	TAP_STREQ(cfg.listen, "127.0.0.1:9000", "CRLF: no \\r in value");
	BAD("[server]\r\nthreads = 4\r\nnope = 1\r\n", 3, "unknown key nope");
	BAD("[server]\r\nthreads = 4\r\r\n", 2, "control character");
	BAD("[server]\nthreads = 4\rthreads = 5\n", 2, "control character");

	GOOD("[server]\nthreads = 4 # four\n");
	TAP_OK(cfg.threads == 4, "inline # comment");
	GOOD("[server]\nthreads = 4\t; four\n");
	TAP_OK(cfg.threads == 4, "inline ; comment after TAB");
	GOOD("   # indented comment\n\t; indented too\n[server] # hdr\n");
	GOOD("[payments]\nacquirer_url = http://h/p#frag;x\n");
	TAP_STREQ(idem_cfg_app_get(&cfg, "payments", "acquirer_url"),
	    "http://h/p#frag;x", "# and ; without blank before are kept");
	BAD("[server]\nthreads = 4;x\n", 2, "threads must be an integer");
	BAD("[server]\nthreads = ; nothing\n", 2, "empty value for threads");
	GOOD("[database]\nconninfo = password=a#b\n");
	TAP_STREQ(cfg.conninfo, "password=a#b", "conninfo a#b kept");
	GOOD("[database]\nconninfo = password=a #b\n");
	TAP_STREQ(cfg.conninfo, "password=a", "conninfo \" #\" starts comment");
}

static void
test_errors(void)
{
	char	*s;
	size_t	 i;

	BAD("[nope]\n", 1, "unknown section [nope]");
	BAD("# c\n\n[server]\n[Server]\n", 4, "unknown section");
	BAD("[ server ]\n", 1, "unknown section");
	BAD("[]\n", 1, "empty section name");
	BAD("[server]\nthread = 4\n", 2, "unknown key thread in [server]");
	BAD("[server]\nTHREADS = 4\n", 2, "unknown key");
	BAD("[database]\nthreads = 4\n", 2, "unknown key threads in [database]");
	BAD("threads = 4\n", 1, "outside of any section");
	BAD("[server]\nthreads = 4\nthreads = 5\n", 3,
	    "duplicate key threads (first on line 2)");
	BAD("[server]\nthreads = 4\n[database]\n[server]\n", 4,
	    "duplicate section [server]");
	BAD("[server]\nthreads 4\n", 2, "expected key = value");
	BAD("[server]\nthreads\n", 2, "expected key = value");
	BAD("[server]\n= 4\n", 2, "missing key");
	BAD("[server]\nthreads =\n", 2, "empty value for threads");
	BAD("[server]\nthreads =   \t\n", 2, "empty value");
	BAD("[server\n", 1, "unterminated section header");
	BAD("[server # x]\n", 1, "unterminated section header");
	BAD("[server] x\n", 1, "text after section header");

	/* bad values */
	BAD("[server]\nthreads = 0\n", 2, "from 1 to 256");
	BAD("[server]\nthreads = 257\n", 2, "from 1 to 256");
	BAD("[server]\nthreads = -1\n", 2, "threads must be");
	BAD("[server]\nthreads = +4\n", 2, "threads must be");
	BAD("[server]\nthreads = 4x\n", 2, "threads must be");
	BAD("[server]\nthreads = 4 4\n", 2, "threads must be");
	BAD("[server]\nthreads = 99999999999999999999999\n", 2,
	    "threads must be");
	BAD("[server]\nmax_body = 0\n", 2, "max_body must be a size");
	BAD("[server]\nmax_body = 65MiB\n", 2, "max_body");
	BAD("[server]\nmax_body = 67108865\n", 2, "max_body");
	BAD("[server]\nmax_body = 1 MiB\n", 2, "max_body");
	BAD("[server]\nrequest_timeout = 0\n", 2, "request_timeout must be a "
	    "duration");
	BAD("[server]\nrequest_timeout = 30 s\n", 2, "request_timeout");
	BAD("[server]\nmax_params = 1023\n", 2, "max_params must be a size");
	BAD("[server]\nmax_params = 2MiB\n", 2, "max_params");
	BAD("[server]\nread_timeout = 0\n", 2, "read_timeout must be a "
	    "duration");
	BAD("[server]\nread_timeout = 0ms\n", 2, "read_timeout");
	BAD("[server]\nwrite_timeout = 0\n", 2, "write_timeout must be a "
	    "duration");
	BAD("[server]\nwrite_timeout = 10 s\n", 2, "write_timeout");
	BAD("[server]\nmax_buffered = 1023KiB\n", 2, "max_buffered must be a "
	    "size");
	BAD("[server]\nmax_buffered = 65537MiB\n", 2, "max_buffered");
	BAD("[server]\nmax_buffered = 32 MiB\n", 2, "max_buffered");
	BAD("[server]\nmax_buffered = 1MiB\n", 2, "max_buffered (1048576 "
	    "bytes) must be at least twice max_body (1048576 bytes)");
	BAD("[server]\nmax_body = 17MiB\nmax_buffered = 32MiB\n", 3,
	    "at least twice max_body");
	GOOD("[server]\nmax_body = 17MiB\n");
	TAP_OK(cfg.max_buffered == 34 * 1048576, "max_buffered unset: twice "
	    "a max_body over 16MiB");
	GOOD("[server]\nmax_body = 64MiB\nmax_buffered = 128MiB\n"
	    "write_timeout = 1500ms\n");
	TAP_OK(cfg.max_body == 64 * 1048576 && cfg.max_buffered ==
	    128 * 1048576 && cfg.write_timeout_ms == 1500,
	    "max_body 64MiB, max_buffered 128MiB, write_timeout 1500ms");
	GOOD("[server]\nmax_params = 1KiB\nread_timeout = 250ms\n");
	TAP_OK(cfg.max_params == 1024 && cfg.read_timeout_ms == 250,
	    "max_params 1KiB, read_timeout 250ms");
	BAD("[server]\nsocket_mode = 0668\n", 2, "socket_mode must be an "
	    "octal file mode");
	BAD("[server]\nsocket_mode = 4660\n", 2, "socket_mode");
	BAD("[metrics]\nsocket_mode = rw\n", 2, "socket_mode");
	BAD("[server]\nallow = localhost\n", 2, "allow must be a "
	    "comma-separated list");
	GOOD("[server]\nsocket_mode = 0600\nsocket_group = www-data\n"
	    "allow = 127.0.0.1, ::1\n[metrics]\nsocket_mode = 640\n"
	    "socket_group = prometheus\nallow_uid = prometheus, 110\n");
	TAP_OK(cfg.socket_mode == 0600 && cfg.metrics_socket_mode == 0640 &&
	    cfg.socket_group != NULL && strcmp(cfg.socket_group,
	    "www-data") == 0 && cfg.allow != NULL &&
	    strcmp(cfg.allow, "127.0.0.1, ::1") == 0 &&
	    cfg.metrics_socket_group != NULL &&
	    strcmp(cfg.metrics_socket_group, "prometheus") == 0 &&
	    cfg.metrics_allow_uid != NULL &&
	    strcmp(cfg.metrics_allow_uid, "prometheus, 110") == 0,
	    "socket_mode, socket_group, allow, allow_uid as written");
	BAD("[server]\nlog_level = verbose\n", 2,
	    "log_level must be debug, info, warn or error");
	BAD("[server]\nlog_level = INFO\n", 2, "log_level");
	BAD("[database]\npool_size = 0\n", 2, "from 1 to 1024");
	BAD("[database]\npool_size = 1025\n", 2, "from 1 to 1024");
	BAD("[database]\nacquire_timeout = 2x\n", 2, "acquire_timeout");
	BAD("[database]\nprepared_statements = yes\n", 2,
	    "prepared_statements must be on, off or auto");
	BAD("[database]\nprepared_statements = o\n", 2,
	    "prepared_statements must be on, off or auto");
	BAD("[database]\nprepared_statements = autoo\n", 2,
	    "prepared_statements must be on, off or auto");
	BAD("[idempotency]\nttl = forever\n", 2, "ttl must be a duration");
	BAD("[idempotency]\nevict_interval = -5m\n", 2, "evict_interval");
	BAD("[idempotency]\nevict_batch = 0\n", 2, "from 1 to 1000000");
	BAD("[idempotency]\nevict_batch = 1000001\n", 2, "from 1 to 1000000");
	BAD("[idempotency]\ncompleter_max_attempts = -1\n", 2,
	    "from 0 to 1000000");
	BAD("[idempotency]\ncompleter_backoff = soon\n", 2,
	    "completer_backoff must be a duration");
	BAD("[metrics]\nallow = localhost\n", 2, "allow must be");
	BAD("[metrics]\nallow = 127.0.0.1,,::1\n", 2, "allow must be");
	BAD("[metrics]\nallow = 127.0.0.1,\n", 2, "allow must be");
	BAD("[metrics]\nallow = ,::1\n", 2, "allow must be");
	BAD("[metrics]\nallow = 127.0.0.1 ::1\n", 2, "allow must be");
	BAD("[metrics]\nallow = 10.0.0.0/8\n", 2, "allow must be");
	BAD("[metrics]\nallow = 127.0.0.1,\t::1\n", 2, "allow must be");
	BAD("[metrics]\nallow = 256.0.0.1\n", 2, "allow must be");
	BAD("[metrics]\nallow = ::1::2\n", 2, "allow must be");

	/* bytes */
	BAD_N("[server]\nthreads = 4\nlisten = a\0b\n",
	    sizeof("[server]\nthreads = 4\nlisten = a\0b\n") - 1, 3, "NUL byte");
	BAD_N("\0", 1, 1, "NUL byte");
	BAD_N("[server]\n\0\n", 11, 2, "NUL byte");
	BAD("[server]\nlisten = a\x01" "b\n", 2, "control character");
	BAD("[server]\nlisten = a\x7f\n", 2, "control character");
	BAD("[server]\nlisten = \x1b[31m\n", 2, "control character");

	/* line length: 4096 bytes is fine, 4097 is not, CRLF not counted */
	if ((s = malloc(4096 + 32)) != NULL) {
		strcpy(s, "[server]\n#");
		for (i = strlen(s); i < 9 + 4096; i++)
			s[i] = 'x';
		strcpy(s + i, "\r\nthreads = 2\n");
		GOOD(s);
		TAP_OK(cfg.threads == 2, "4096-byte line (+CRLF) accepted");
		strcpy(s + i, "x\nthreads = 2\n");
		BAD(s, 2, "line longer than 4096 bytes");
		free(s);
	}
	if ((s = malloc(100000 + 1)) != NULL) {
		memset(s, 'k', 100000);
		s[100000] = '\0';
		BAD(s, 1, "line longer");
		free(s);
	}

	/* the name given is the name reported */
	fresh();
	TAP_OK(idem_cfg_parse(&cfg, "conf/payments.ini", "[x]\n", 4, err,
	    sizeof(err)) == -1 && has_prefix(err, "conf/payments.ini:1: "),
	    "name in message: %s", err);

	/* a short err buffer is truncated, never overrun (ASan) */
	{
		char	 small[8];

		fresh();
		memset(small, 'X', sizeof(small));
		TAP_OK(idem_cfg_parse(&cfg, NAME, "[x]", 3, small,
		    sizeof(small)) == -1 && strcmp(small, "t.ini:1") == 0,
		    "short err buffer truncated: %s", small);
		fresh();
		TAP_OK(idem_cfg_parse(&cfg, NAME, "[x]", 3, NULL, 0) == -1,
		    "NULL err buffer still fails");
	}

	/* only len bytes are looked at */
	fresh();
	TAP_OK(idem_cfg_parse(&cfg, NAME, "[server]\nthreads = 4\nbad", 20,
	    err, sizeof(err)) == 0 && cfg.threads == 4,
	    "bytes beyond len are not parsed");
}

/* The lease and deadlines of a route, and the configs that could let a
 * lease lapse under a live request or a key expire before it ended. */
static void
route_limits(void)
{
	struct idem_route_limits	l;

	GOOD("[server]\nrequest_timeout = 10s\n[idempotency]\n"
	    "lock_timeout = 1m\n[route \"POST /p\"]\nlock_timeout = 10m\n"
	    "deadline = 2m\nphase_deadline = 20s\nttl = 7d\n");
	idem_cfg_route_limits(&cfg, "POST", "/p", &l);
	TAP_OK(l.lock_timeout_ms == 600000 && l.deadline_ms == 120000 &&
	    l.phase_deadline_ms == 20000 && l.ttl_ms == 7 * 86400000LL,
	    "route lock_timeout 10m, deadline 2m, phase_deadline 20s, ttl 7d");
	idem_cfg_route_limits(&cfg, "POST", "/other", &l);
	TAP_OK(l.lock_timeout_ms == 60000 && l.deadline_ms == 10000 &&
	    l.phase_deadline_ms == 10000 && l.ttl_ms == 86400000LL,
	    "defaults: lock_timeout, deadline = request_timeout, "
	    "phase_deadline = deadline, ttl");
	GOOD("[route \"POST /p\"]\ndeadline = 1m\n");
	idem_cfg_route_limits(&cfg, "POST", "/p", &l);
	TAP_OK(l.phase_deadline_ms == 60000, "phase_deadline defaults to "
	    "the route's deadline");

	/* The first reproduction of the phased double charge: ttl 2s under
	 * the default 30s deadline and 10s lease. */
	BAD("[route \"POST /v1/payments\"]\nttl = 2s\n", 2,
	    "ttl (2000ms) of [route \"POST /v1/payments\"] must be at least "
	    "its deadline + lease (40000ms)");
	BAD("[server]\nrequest_timeout = 10m\n[idempotency]\nttl = 5m\n", 4,
	    "ttl (300000ms) must be at least its deadline + lease (610000ms)");
	/* A deadline no longer bounds the lease: the heartbeat renews it. */
	GOOD("[route \"POST /p\"]\nlease = 5s\ndeadline = 10m\n");
	idem_cfg_route_limits(&cfg, "POST", "/p", &l);
	TAP_OK(l.lock_timeout_ms == 5000 && l.deadline_ms == 600000,
	    "a route's lease 5s under its deadline 10m");
	TAP_OK(idem_cfg_lease_min(&cfg) == 5000, "the shortest lease: the "
	    "route's 5s under the default 10s");
	BAD("[route \"POST /p\"]\nlease = 2s\n", 2,
	    "lease (2000ms) of [route \"POST /p\"] must be at least 3000ms");
	BAD("[idempotency]\nlease = 2999ms\n", 2,
	    "lease (2999ms) must be at least 3000ms");
	BAD("[route \"POST /p\"]\n\ndeadline = 24h\n", 3,
	    "ttl (86400000ms) of [route \"POST /p\"] must be at least its "
	    "deadline + lease (86410000ms)");
	BAD("[route \"POST /p\"]\ndeadline = 10s\nphase_deadline = 11s\n",
	    3, "phase_deadline (11000ms) of [route \"POST /p\"] must not be "
	    "greater than its deadline (10000ms)");
	BAD("[route \"POST /p\"]\nlock_timeout = 6m\nlock_timeout = 7m\n",
	    3, "lease set twice (first on line 2");
	BAD("[route \"POST /p\"]\nlease = 6s\nlock_timeout = 7s\n",
	    3, "lease set twice (first on line 2; lock_timeout is a "
	    "deprecated alias of lease)");
	BAD("[route \"POST /p\"]\ndeadline = soon\n", 2,
	    "deadline must be a duration");
}

/* [route] fingerprint_exclude: JSON Pointers, as written. */
/* [idempotency] max_wait, max_waiters: Prefer: wait's bounds. */
/* [openapi]: a server URL and a license, only when set. */
static void
test_openapi(void)
{
	GOOD("[server]\nthreads = 2\n");
	TAP_OK(cfg.openapi_server_url == NULL && cfg.openapi_license == NULL,
	    "no [openapi] server_url nor license by default");
	GOOD("[openapi]\nserver_url = https://api.example.org/v1\n"
	    "license = Apache-2.0\n");
	TAP_OK(cfg.openapi_server_url != NULL && cfg.openapi_license != NULL &&
	    strcmp(cfg.openapi_server_url, "https://api.example.org/v1") == 0 &&
	    strcmp(cfg.openapi_license, "Apache-2.0") == 0,
	    "[openapi] server_url and license kept");
	GOOD("[openapi]\nserver_url = /api\n");
	TAP_STREQ(cfg.openapi_server_url, "/api", "server_url: a path");
	GOOD("[openapi]\nserver_url = http://127.0.0.1:8080\n");
	TAP_STREQ(cfg.openapi_server_url, "http://127.0.0.1:8080",
	    "server_url: http");
	BAD("[openapi]\nserver_url = api.example.org\n", 2,
	    "server_url must be an http:// or https:// URL");
	BAD("[openapi]\nserver_url = https://\n", 2, "server_url must be");
	BAD("[openapi]\nserver_url = https://a b\n", 2, "server_url must be");
	BAD("[openapi]\nserver_url = https://a/\"x\"\n", 2,
	    "server_url must be");
	BAD("[openapi]\nservers = x\n", 2, "unknown key");
}

static void
test_wait_keys(void)
{
	GOOD("[server]\nthreads = 2\n");
	TAP_OK(cfg.max_wait_ms == 10000 && cfg.max_waiters == 4 &&
	    cfg.max_waiters_per_tenant == 2, "max_wait 10s, max_waiters 4 "
	    "and max_waiters_per_tenant 2 by default");
	GOOD("[idempotency]\nmax_wait = 30s\nmax_waiters = 0\n");
	TAP_OK(cfg.max_wait_ms == 30000 && cfg.max_waiters == 0,
	    "max_wait 30s, max_waiters 0 (waiting off)");
	BAD("[idempotency]\nmax_wait = 31s\n", 2,
	    "max_wait must be at most 30s");
	BAD("[idempotency]\nmax_waiters = 257\n", 2, "max_waiters");
	GOOD("[idempotency]\nmax_waiters_per_tenant = 0\n");
	TAP_OK(cfg.max_waiters_per_tenant == 0,
	    "max_waiters_per_tenant 0 (no tenant waits)");
	GOOD("[idempotency]\nmax_waiters_per_tenant = 256\n");
	TAP_OK(cfg.max_waiters_per_tenant == 256,
	    "max_waiters_per_tenant 256");
	BAD("[idempotency]\nmax_waiters_per_tenant = 257\n", 2,
	    "max_waiters_per_tenant must be an integer from 0 to 256");
	BAD("[idempotency]\nmax_waiters_per_tenant = -1\n", 2,
	    "max_waiters_per_tenant must be an integer from 0 to 256");
	BAD("[idempotency]\nmax_waiters_per_tenant = 2x\n", 2,
	    "max_waiters_per_tenant must be an integer");
	BAD("[idempotency]\nmax_waiters_per_tenant = \n", 2,
	    "max_waiters_per_tenant");
	BAD("[idempotency]\nmax_waiters_per_tenant = +2\n", 2,
	    "max_waiters_per_tenant must be an integer");
	BAD("[server]\nmax_waiters_per_tenant = 2\n", 2, "unknown key");
	BAD("[idempotency]\nmax_wait = soon\n", 2,
	    "max_wait must be a duration");
}

static void
test_exclude(void)
{
	const char *const	*ex;
	size_t			 n;

	GOOD("[route \"POST /a\"]\nfingerprint_exclude = /trace_id, "
	    "/meta/client_ts,/items/0/note  /a~1b\n");
	ex = idem_cfg_route_exclude(&cfg, "POST", "/a", &n);
	TAP_OK(n == 4 && strcmp(ex[0], "/trace_id") == 0 &&
	    strcmp(ex[1], "/meta/client_ts") == 0 &&
	    strcmp(ex[2], "/items/0/note") == 0 && strcmp(ex[3], "/a~1b") == 0,
	    "fingerprint_exclude: four pointers, commas and blanks between");
	TAP_OK(idem_cfg_route_exclude(&cfg, "POST", "/b", &n) == NULL &&
	    n == 0, "  another route excludes nothing");
	BAD("[route \"POST /a\"]\nfingerprint_exclude = trace_id\n", 2,
	    "\"trace_id\" is not a JSON Pointer");
	BAD("[route \"POST /a\"]\nfingerprint_exclude = /a, /\n", 2,
	    "\"/\" is not a JSON Pointer");
	BAD("[route \"POST /a\"]\nfingerprint_exclude = /a~2\n", 2,
	    "is not a JSON Pointer");
	BAD("[route \"POST /a\"]\nfingerprint_exclude = ,\n", 2,
	    "names no JSON Pointer");
	BAD("[route \"POST /a\"]\nfingerprint_exclude = /a\n"
	    "fingerprint_exclude = /b\n", 3,
	    "duplicate key fingerprint_exclude (first on line 2)");
}

/* [route] remember: how long a late retry is still recognised. */
static void
test_remember(void)
{
	struct idem_route_limits	l;

	GOOD("[route \"POST /a\"]\nttl = 7d\nremember = 30d\n"
	    "[route \"POST /b\"]\nttl = 2d\n");
	idem_cfg_route_limits(&cfg, "POST", "/a", &l);
	TAP_OK(l.remember_ms == 30 * 86400000LL && l.ttl_ms == 7 * 86400000LL,
	    "remember 30d beside ttl 7d");
	idem_cfg_route_limits(&cfg, "POST", "/b", &l);
	TAP_OK(l.remember_ms == 0, "  a route without it remembers nothing");
	idem_cfg_route_limits(&cfg, "POST", "/c", &l);
	TAP_OK(l.remember_ms == 0, "  nor a route without a section");
	GOOD("[route \"POST /a\"]\nremember = 1m\n");
	idem_cfg_route_limits(&cfg, "POST", "/a", &l);
	TAP_OK(l.remember_ms == 60000, "remember 1m, the shortest");
	GOOD("[route \"POST /a\"]\nremember = 3650d\n");
	idem_cfg_route_limits(&cfg, "POST", "/a", &l);
	TAP_OK(l.remember_ms == 3650 * 86400000LL, "remember 3650d, the "
	    "longest duration");
	BAD("[route \"POST /a\"]\nremember = 59s\n", 2,
	    "remember (59000ms) must be at least 1m (leave it out");
	BAD("[route \"POST /a\"]\nttl = 2d\n\nremember = 0\n", 4,
	    "remember must be a duration");
	BAD("[route \"POST /a\"]\nremember = 1000ms\n", 2,
	    "remember (1000ms) must be at least 1m");
	BAD("[route \"POST /a\"]\nremember = forever\n", 2,
	    "remember must be a duration");
	BAD("[route \"POST /a\"]\nremember = -1d\n", 2,
	    "remember must be a duration");
	BAD("[route \"POST /a\"]\nremember = 3651d\n", 2,
	    "remember must be a duration");
	BAD("[route \"POST /a\"]\nremember = 30d\nremember = 60d\n", 3,
	    "duplicate key remember (first on line 2)");
	BAD("[idempotency]\nremember = 30d\n", 2, "unknown key");
}

static void
test_routes(void)
{
	GOOD("[route \"POST /v1/payments\"]\nttl = 7d\n"
	    "[route \"GET /v1/payments\"]\nttl = 2h\n"
	    "[route \"POST /v1/refunds\"]\n");
	TAP_OK(idem_cfg_route_ttl(&cfg, "POST", "/v1/payments") ==
	    7 * 86400000LL, "route ttl override POST");
	TAP_OK(idem_cfg_route_ttl(&cfg, "GET", "/v1/payments") == 7200000,
	    "route ttl override GET (same path, other method)");
	TAP_OK(idem_cfg_route_ttl(&cfg, "PUT", "/v1/payments") == cfg.ttl_ms,
	    "other method falls back to ttl");
	TAP_OK(idem_cfg_route_ttl(&cfg, "POST", "/v1/payments/") == cfg.ttl_ms,
	    "other path falls back to ttl");
	TAP_OK(idem_cfg_route_ttl(&cfg, "POST", "/v1/refunds") ==
	    86400000LL, "route section without ttl falls back");
	TAP_OK(idem_cfg_route_ttl(&cfg, NULL, NULL) == cfg.ttl_ms,
	    "NULL method/pattern falls back");
	GOOD("[idempotency]\nttl = 1h\n[route \"POST /a\"]\nttl = 2h\n");
	TAP_OK(idem_cfg_route_ttl(&cfg, "POST", "/b") == 3600000,
	    "fallback is the configured ttl");
	TAP_OK(idem_cfg_route_ttl(&cfg, "POST", "/a") == 7200000,
	    "override beats configured ttl");

	BAD("[route \"POST /a\"]\nttl = 1h\n[route \"POST /a\"]\n", 3,
	    "duplicate section [route \"POST /a\"]");
	BAD("[route \"POST /a\"]\nttl = 1h\nttl = 2h\n", 3,
	    "duplicate key ttl (first on line 2)");
	BAD("[route \"POST /a\"]\nthreads = 4\n", 2,
	    "(ttl, lease, deadline, phase_deadline, remember or "
	    "fingerprint_exclude)");
	route_limits();
	BAD("[route \"POST /a\"]\nttl = 0\n", 2, "ttl must be a duration");
	BAD("[route POST /a]\n", 1, "bad route section");
	BAD("[route \"post /a\"]\n", 1, "bad route section");
	BAD("[route \"Post /a\"]\n", 1, "bad route section");
	BAD("[route \"POST a\"]\n", 1, "bad route section");
	BAD("[route \"POST\"]\n", 1, "bad route section");
	BAD("[route \" /a\"]\n", 1, "bad route section");
	BAD("[route \"\"]\n", 1, "bad route section");
	BAD("[route]\n", 1, "bad route section");
	BAD("[route \"POST  /a\"]\n", 1, "bad route section");
	BAD("[route \"POST /a b\"]\n", 1, "bad route section");
	BAD("[route \"POST /a\" ]\n", 1, "bad route section");
	BAD("[route \"POST /a\"x]\n", 1, "bad route section");
	BAD("[route \"POST /a]\n", 1, "bad route section");
	BAD("[route \"POST /a\"\"]\n", 1, "bad route section");
	BAD("[route\"POST /a\"]\n", 1, "bad route section");
	BAD("[route  \"POST /a\"]\n", 1, "bad route section");
	BAD("[route \"POST /caf\xc3\xa9\"]\n", 1, "bad route section");
	BAD("[route \"POST /a\"\n", 1, "unterminated");
	BAD("[route \"POST /a\"] x\n", 1, "text after section header");
	test_exclude();
	test_wait_keys();
	test_openapi();
	/* the route section ends at the next header */
	BAD("[route \"POST /a\"]\n[server]\nttl = 1h\n", 3,
	    "unknown key ttl in [server]");
}

static void
test_app(void)
{
	struct idem_cfg_kv	*kv;
	int			 n;

	idem_cfg_free(&cfg);
	idem_cfg_init(&cfg);
	TAP_OK(idem_cfg_allow(&cfg, "payments", "acquirer_url") == 0,
	    "allow payments.acquirer_url");
	TAP_OK(idem_cfg_allow(&cfg, "payments", "acquirer_url") == 0,
	    "allowing twice is fine");
	for (n = 0, kv = cfg.app; kv != NULL; kv = kv->next)
		n++;
	TAP_OK(n == 1, "  and registers it once");
	TAP_OK(idem_cfg_allow(&cfg, "server", "x") == -1,
	    "built-in section [server] refused");
	TAP_OK(idem_cfg_allow(&cfg, "route", "x") == -1,
	    "built-in section [route] refused");
	TAP_OK(idem_cfg_allow(&cfg, "", "x") == -1, "empty section refused");
	TAP_OK(idem_cfg_allow(&cfg, "a", "") == -1, "empty key refused");
	TAP_OK(idem_cfg_allow(&cfg, NULL, "x") == -1, "NULL section refused");
	TAP_OK(idem_cfg_app_get(&cfg, "payments", "acquirer_url") == NULL,
	    "allowed key is NULL before parsing");
	TAP_OK(idem_cfg_app_get(&cfg, "payments", "nope") == NULL,
	    "unknown key is NULL");

	GOOD("[payments]\nacquirer_url = http://x\ncurrency = EUR\n");
	TAP_STREQ(idem_cfg_app_get(&cfg, "payments", "acquirer_url"),
	    "http://x", "app value acquirer_url");
	TAP_STREQ(idem_cfg_app_get(&cfg, "payments", "currency"), "EUR",
	    "app value currency");
	TAP_OK(idem_cfg_app_get(&cfg, "Payments", "currency") == NULL,
	    "section names are case-sensitive");
	BAD("[payments]\nacquirer_urls = x\n", 2,
	    "unknown key acquirer_urls in [payments]");
	BAD("[payments]\ncurrency = EUR\ncurrency = USD\n", 3,
	    "duplicate key currency (first on line 2)");
	BAD("[payments]\n[payments]\n", 2, "duplicate section [payments]");
	BAD("[server]\ncurrency = EUR\n", 2, "unknown key currency in [server]");
	BAD("[refunds]\ncurrency = EUR\n", 1, "unknown section [refunds]");
}

/* Typed application keys: checked when parsed, read typed. */
static void
test_app_typed(void)
{
	static const struct {
		enum idem_config_type	 type;
		const char		*text;
		int			 rc;
		long long		 want;	/* i, size or b */
	} vals[] = {
		{ IDEM_CONFIG_DURATION, "8s", 0, 8000 },
		{ IDEM_CONFIG_DURATION, "8", 0, 8000 },
		{ IDEM_CONFIG_DURATION, "250ms", 0, 250 },
		{ IDEM_CONFIG_DURATION, "2m", 0, 120000 },
		{ IDEM_CONFIG_DURATION, "1d", 0, 86400000 },
		{ IDEM_CONFIG_DURATION, "8x", -1, 0 },
		{ IDEM_CONFIG_DURATION, "-1s", -1, 0 },
		{ IDEM_CONFIG_DURATION, "0s", -1, 0 },
		{ IDEM_CONFIG_INT, "0", 0, 0 },
		{ IDEM_CONFIG_INT, "8", 0, 8 },
		{ IDEM_CONFIG_INT, "9223372036854775807", 0, 9223372036854775807LL },
		{ IDEM_CONFIG_INT, "9223372036854775808", -1, 0 },
		{ IDEM_CONFIG_INT, "8s", -1, 0 },
		{ IDEM_CONFIG_INT, "-3", -1, 0 },
		{ IDEM_CONFIG_INT, "+3", -1, 0 },
		{ IDEM_CONFIG_INT, "0x10", -1, 0 },
		{ IDEM_CONFIG_SIZE, "512", 0, 512 },
		{ IDEM_CONFIG_SIZE, "64K", 0, 65536 },
		{ IDEM_CONFIG_SIZE, "1MiB", 0, 1048576 },
		{ IDEM_CONFIG_SIZE, "2G", 0, 2147483648LL },
		{ IDEM_CONFIG_SIZE, "1T", -1, 0 },
		{ IDEM_CONFIG_SIZE, "big", -1, 0 },
		{ IDEM_CONFIG_BOOL, "on", 0, 1 },
		{ IDEM_CONFIG_BOOL, "true", 0, 1 },
		{ IDEM_CONFIG_BOOL, "yes", 0, 1 },
		{ IDEM_CONFIG_BOOL, "1", 0, 1 },
		{ IDEM_CONFIG_BOOL, "off", 0, 0 },
		{ IDEM_CONFIG_BOOL, "false", 0, 0 },
		{ IDEM_CONFIG_BOOL, "no", 0, 0 },
		{ IDEM_CONFIG_BOOL, "0", 0, 0 },
		{ IDEM_CONFIG_BOOL, "On", -1, 0 },
		{ IDEM_CONFIG_BOOL, "2", -1, 0 },
		{ IDEM_CONFIG_STRING, "8s anything", 0, 0 },
	};
	union idem_cfg_value	 v;
	const char		*why;
	long long		 got;
	size_t			 i;
	int			 rc;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		memset(&v, 0, sizeof(v));
		rc = idem_cfg_value_parse(vals[i].type, vals[i].text, &v, &why);
		got = vals[i].type == IDEM_CONFIG_SIZE ? (long long)v.size :
		    vals[i].type == IDEM_CONFIG_BOOL ? v.b : v.i;
		TAP_OK(rc == vals[i].rc && (rc == -1 ? why != NULL :
		    got == vals[i].want), "value type %d \"%s\": rc %d, %lld",
		    (int)vals[i].type, vals[i].text, vals[i].rc, vals[i].want);
	}

	/* The issue's case: a duration key given "8s" is 8000 ms, and an
	 * integer key given "8s" stops the program at its line. */
	GOOD("[wallet]\nfraud_timeout_ms = 8s\nmax_items = 8\n"
	    "max_upload = 64K\nstrict = off\nname = 8s\n");
	rc = idem_cfg_app_typed(&cfg, "wallet", "fraud_timeout_ms",
	    IDEM_CONFIG_DURATION, &v);
	TAP_OK(rc == 1 && v.i == 8000, "fraud_timeout_ms = 8s: 8000 ms");
	rc = idem_cfg_app_typed(&cfg, "wallet", "max_items", IDEM_CONFIG_INT,
	    &v);
	TAP_OK(rc == 1 && v.i == 8, "max_items = 8");
	rc = idem_cfg_app_typed(&cfg, "wallet", "max_upload",
	    IDEM_CONFIG_SIZE, &v);
	TAP_OK(rc == 1 && v.size == 65536, "max_upload = 64K: 65536");
	v.b = 7;
	rc = idem_cfg_app_typed(&cfg, "wallet", "strict", IDEM_CONFIG_BOOL,
	    &v);
	TAP_OK(rc == 1 && v.b == 0, "strict = off: 0");
	TAP_STREQ(idem_cfg_app_get(&cfg, "wallet", "fraud_timeout_ms"), "8s",
	    "the text stays readable with idem_app_config()");
	rc = idem_cfg_app_typed(&cfg, "wallet", "name", IDEM_CONFIG_INT, &v);
	TAP_OK(rc == -1, "a string key \"8s\" read as an integer: -1");
	rc = idem_cfg_app_typed(&cfg, "wallet", "nope", IDEM_CONFIG_INT, &v);
	TAP_OK(rc == -1, "an unknown key: -1");
	GOOD("[wallet]\nname = x\n");
	v.i = 42;
	rc = idem_cfg_app_typed(&cfg, "wallet", "fraud_timeout_ms",
	    IDEM_CONFIG_DURATION, &v);
	TAP_OK(rc == 0 && v.i == 42, "unset: 0, the default left alone");

	BAD("[wallet]\nmax_items = 8s\n", 2,
	    "max_items: expected a whole number (0 or more), got \"8s\"");
	BAD("[wallet]\n\nfraud_timeout_ms = 8 s\n", 3,
	    "fraud_timeout_ms: expected a duration (a number with ms, s, m, "
	    "h or d; none: seconds), got \"8 s\"");
	BAD("[wallet]\nmax_upload = 1.5M\n", 2,
	    "max_upload: expected a size (a number with K, M or G; none: "
	    "bytes), got \"1.5M\"");
	BAD("[wallet]\nstrict = maybe\n", 2,
	    "strict: expected on or off (true/false, yes/no, 1/0), got "
	    "\"maybe\"");

	/* Declaring again changes the type; a bad type is refused. */
	TAP_OK(idem_cfg_allow_typed(&cfg, "wallet", "name", IDEM_CONFIG_INT) ==
	    0, "declare name again, as an integer");
	TAP_OK(idem_cfg_allow_typed(&cfg, "wallet", "x",
	    (enum idem_config_type)99) == -1, "an unknown type is refused");
	TAP_OK(idem_cfg_allow_typed(&cfg, "server", "x", IDEM_CONFIG_INT) ==
	    -1, "a built-in section is refused");
}

static void
test_lock_timeout(void)
{
	/* lock_timeout: the lease's deprecated name, warned of, still read. */
	GOOD("[idempotency]\nlock_timeout = 31s\n");
	TAP_OK(cfg.lock_timeout_ms == 31000, "lock_timeout 31s is the lease");
	TAP_STREQ(cfg.warnings, NAME ":2: lock_timeout is deprecated: it is "
	    "the lease, write lease\n", "  a warning for the caller to log");
	GOOD("[idempotency]\nlease = 10s\n[route \"POST /p\"]\n"
	    "lock_timeout = 12s\n");
	TAP_STREQ(cfg.warnings, NAME ":4: lock_timeout is deprecated: it is "
	    "the lease, write lease\n", "  and in a route section");
	GOOD("[idempotency]\nlease = 4s\n");
	TAP_OK(cfg.lock_timeout_ms == 4000, "lease 4s");
	TAP_STREQ(cfg.warnings, "", "  no warning for lease");
	BAD("[idempotency]\nlease = 20s\n# x\nlock_timeout = 20s\n", 4,
	    "lease and lock_timeout both set (lock_timeout is a deprecated "
	    "alias of lease)");
	BAD("[idempotency]\nlock_timeout = 20s\nlease = 20s\n", 3,
	    "lease and lock_timeout both set");
	BAD("[idempotency]\nlease = 20s\nlease = 21s\n", 3, "duplicate");
	/* The lease no longer has to outlive request_timeout. */
	GOOD("[server]\nrequest_timeout = 10m\n[idempotency]\nlease = 10s\n");
	TAP_OK(cfg.request_timeout_ms == 600000 &&
	    cfg.lock_timeout_ms == 10000, "request_timeout 10m, lease 10s");
	GOOD("[server]\nrequest_timeout = 299s\n");
	TAP_OK(cfg.request_timeout_ms == 299000 &&
	    cfg.lock_timeout_ms == 10000,
	    "request_timeout 299s with the default lease");
	/* A phase may not outlast its handler. */
	BAD("[server]\nrequest_timeout = 5s\n[route \"POST /p\"]\n"
	    "phase_deadline = 6s\n", 4, "phase_deadline (6000ms) of [route "
	    "\"POST /p\"] must not be greater than its deadline (5000ms)");
	/* The heartbeat's interval: a third of the shortest lease. */
	TAP_OK(idem_heartbeat_interval(10000) == 3333 &&
	    idem_heartbeat_interval(3000) == 1000 &&
	    idem_heartbeat_interval(1) == 1, "heartbeat interval lease/3");
}

#define DUR_OK(s, want) do {						\
	long long ms_ = -7;						\
	TAP_OK(idem_parse_duration(s, &ms_) == 0 && ms_ == (want),	\
	    "duration %s = %lld (got %lld)", s, (long long)(want), ms_); \
} while (0)
#define DUR_BAD(s) do {							\
	long long ms_ = -7;						\
	TAP_OK(idem_parse_duration(s, &ms_) == -1 && ms_ == -7,		\
	    "duration %s refused, output untouched", #s);		\
} while (0)

static void
test_durations(void)
{
	DUR_OK("250ms", 250);
	DUR_OK("1ms", 1);
	DUR_OK("2s", 2000);
	DUR_OK("5m", 300000);
	DUR_OK("24h", 86400000LL);
	DUR_OK("7d", 604800000LL);
	DUR_OK("30", 30000);
	DUR_OK("007s", 7000);
	DUR_OK("3650d", 315360000000LL);
	DUR_OK("315360000000ms", 315360000000LL);
	DUR_OK("87600h", 315360000000LL);
	DUR_BAD("3651d");
	DUR_BAD("315360000001ms");
	DUR_BAD("315360001");
	DUR_BAD("87601h");
	DUR_BAD("9223372036854775807ms");
	DUR_BAD("9223372036854775808");
	DUR_BAD("99999999999999999999999999d");
	DUR_BAD("0");
	DUR_BAD("0ms");
	DUR_BAD("0d");
	DUR_BAD("-1");
	DUR_BAD("-5s");
	DUR_BAD("+5s");
	DUR_BAD("");
	DUR_BAD("s");
	DUR_BAD("ms");
	DUR_BAD("5 m");
	DUR_BAD(" 5m");
	DUR_BAD("5m ");
	DUR_BAD("5M");
	DUR_BAD("5S");
	DUR_BAD("5x");
	DUR_BAD("5sec");
	DUR_BAD("5mss");
	DUR_BAD("1.5s");
	DUR_BAD("1h30m");
	DUR_BAD("0x10");
	DUR_BAD("5us");
	DUR_BAD(NULL);
	TAP_OK(idem_parse_duration("5s", NULL) == -1, "duration NULL out");
}

#define SIZE_OK(s, want) do {						\
	size_t sz_ = 7;							\
	TAP_OK(idem_parse_size(s, &sz_) == 0 && sz_ == (size_t)(want),	\
	    "size %s = %zu (got %zu)", s, (size_t)(want), sz_);	\
} while (0)
#define SIZE_BAD(s) do {						\
	size_t sz_ = 7;							\
	TAP_OK(idem_parse_size(s, &sz_) == -1 && sz_ == 7,		\
	    "size %s refused, output untouched", #s);			\
} while (0)

static void
test_sizes(void)
{
	SIZE_OK("1048576", 1048576);
	SIZE_OK("1", 1);
	SIZE_OK("1B", 1);
	SIZE_OK("100B", 100);
	SIZE_OK("1K", 1024);
	SIZE_OK("1KB", 1024);
	SIZE_OK("512KiB", 524288);
	SIZE_OK("1M", 1048576);
	SIZE_OK("1MB", 1048576);
	SIZE_OK("1MiB", 1048576);
	SIZE_OK("64MiB", 67108864);
	SIZE_OK("1G", 1073741824);
	SIZE_OK("1GB", 1073741824);
	SIZE_OK("3GiB", (size_t)3 << 30);
	SIZE_BAD("0");
	SIZE_BAD("0KiB");
	SIZE_BAD("");
	SIZE_BAD("KiB");
	SIZE_BAD("-1");
	SIZE_BAD("+1");
	SIZE_BAD("1 MiB");
	SIZE_BAD(" 1");
	SIZE_BAD("1k");
	SIZE_BAD("1kb");
	SIZE_BAD("1mib");
	SIZE_BAD("1Mi");
	SIZE_BAD("1MIB");
	SIZE_BAD("1TiB");
	SIZE_BAD("1T");
	SIZE_BAD("1.5MiB");
	SIZE_BAD("1BB");
	SIZE_BAD("99999999999999999999999999");
	SIZE_BAD(NULL);
	if (sizeof(size_t) == 8) {
		SIZE_OK("18446744073709551615", (size_t)-1);
		SIZE_BAD("18446744073709551616");
		SIZE_OK("17179869183GiB", (size_t)17179869183ULL << 30);
		SIZE_BAD("17179869184GiB");
		SIZE_BAD("18014398509481984KiB");
	}
	TAP_OK(idem_parse_size("1", NULL) == -1, "size NULL out");
}

static void
write_file(const char *path, const char *text, size_t len)
{
	FILE	*f;

	if ((f = fopen(path, "w")) == NULL)
		return;
	fwrite(text, 1, len, f);
	fclose(f);
}

static void
test_load(void)
{
	const char	*tmp;
	char		 path[512], want[600], *big;
	size_t		 i;

	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(path, sizeof(path), "%s/test_config.%ld.ini", tmp,
	    (long)getpid());

	unlink(path);
	fresh();
	TAP_OK(idem_cfg_load(&cfg, path, err, sizeof(err)) == -1,
	    "missing file refused");
	snprintf(want, sizeof(want), "%s: cannot open: %s", path,
	    strerror(ENOENT));
	TAP_STREQ(err, want, "  cannot open message");

	write_file(path, full, sizeof(full) - 1);
	fresh();
	TAP_OK(idem_cfg_load(&cfg, path, err, sizeof(err)) == 0 &&
	    cfg.threads == 16 && idem_cfg_route_ttl(&cfg, "POST",
	    "/v1/payments") == 7 * 86400000LL, "load full file");

	write_file(path, "[server]\nthreads = x\n", 21);
	fresh();
	snprintf(want, sizeof(want), "%s:2: ", path);
	TAP_OK(idem_cfg_load(&cfg, path, err, sizeof(err)) == -1 &&
	    has_prefix(err, want), "load reports path:line: %s", err);

	/* exactly 1 MiB is read, one byte more is refused */
	if ((big = malloc((1 << 20) + 1)) != NULL) {
		for (i = 0; i < (1 << 20); i++)
			big[i] = (i % 64 == 63) ? '\n' : '#';
		write_file(path, big, 1 << 20);
		fresh();
		TAP_OK(idem_cfg_load(&cfg, path, err, sizeof(err)) == 0,
		    "1 MiB file accepted");
		big[1 << 20] = '\n';
		write_file(path, big, (1 << 20) + 1);
		fresh();
		snprintf(want, sizeof(want), "%s: larger than 1 MiB", path);
		TAP_OK(idem_cfg_load(&cfg, path, err, sizeof(err)) == -1,
		    "1 MiB + 1 file refused");
		TAP_STREQ(err, want, "  too large message");
		free(big);
	}
	unlink(path);

	fresh();
	TAP_OK(idem_cfg_load(&cfg, tmp, err, sizeof(err)) == -1 &&
	    has_prefix(err, tmp) && strstr(err, "cannot") != NULL,
	    "a directory is refused: %s", err);
}

/* The retention window: refuse under 1 h, warn under 24 h or over 7 d. */
static void
test_ttl_window(void)
{
	static const struct {
		long long		 ms;
		enum idem_ttl_verdict	 want;
	} cases[] = {
		{ 1, IDEM_TTL_REFUSE },
		{ 5 * 60000LL, IDEM_TTL_REFUSE },
		{ 3600000LL - 1, IDEM_TTL_REFUSE },
		{ 3600000LL, IDEM_TTL_SHORT },
		{ 23 * 3600000LL, IDEM_TTL_SHORT },
		{ 86400000LL - 1, IDEM_TTL_SHORT },
		{ 86400000LL, IDEM_TTL_OK },
		{ 3 * 86400000LL, IDEM_TTL_OK },
		{ 7 * 86400000LL, IDEM_TTL_OK },
		{ 7 * 86400000LL + 1, IDEM_TTL_LONG },
		{ 30 * 86400000LL, IDEM_TTL_LONG },
	};
	size_t	i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		TAP_OK(idem_ttl_verdict(cases[i].ms) == cases[i].want,
		    "ttl %lldms: verdict %d", cases[i].ms, cases[i].want);
	TAP_OK(idem_ttl_reason(IDEM_TTL_OK) == NULL &&
	    strstr(idem_ttl_reason(IDEM_TTL_REFUSE), "1h") != NULL &&
	    strstr(idem_ttl_reason(IDEM_TTL_SHORT), "24h") != NULL &&
	    strstr(idem_ttl_reason(IDEM_TTL_LONG), "7d") != NULL,
	    "each verdict says its bound");

	/* Refused where it was set, naming the route; warned ones start. */
	BAD("[server]\nrequest_timeout = 1s\n[idempotency]\nlease = "
	    "3s\nttl = 5m\n", 5, "ttl (300000ms) is below 1h");
	BAD("[server]\nrequest_timeout = 1s\n[idempotency]\nlease = "
	    "3s\n[route \"POST /v1/payments\"]\n\nttl = 59m\n", 7,
	    "ttl (3540000ms) of [route \"POST /v1/payments\"] is below 1h");
	GOOD("[idempotency]\nttl = 1h\n[route \"POST /a\"]\nttl = 30d\n");
	TAP_OK(cfg.routes != NULL && cfg.routes->line == 3 &&
	    cfg.routes->ttl_ms == 30 * 86400000LL,
	    "a warned ttl is kept, with its section's line");
	TAP_OK(cfg.file != NULL && strcmp(cfg.file, NAME) == 0,
	    "the file name is kept for startup messages");
}

/* [webhooks]: defaults, every key, on/off values, ranges and the checks
 * across keys, each refusal at its file:line. */
static void
test_webhooks(void)
{
	GOOD("");
	TAP_OK(cfg.wh_dispatcher == 1 && cfg.wh_allow_private == 0 &&
	    cfg.wh_batch == 10 && cfg.wh_interval_ms == 1000 &&
	    cfg.wh_timeout_ms == 10000 && cfg.wh_max_response == 65536 &&
	    cfg.wh_max_attempts == 100 && cfg.wh_max_age_ms == 259200000LL &&
	    cfg.wh_backoff_ms == 5000 && cfg.wh_backoff_max_ms == 3600000LL &&
	    cfg.wh_retention_ms == 604800000LL && cfg.wh_ordered == 0,
	    "[webhooks] defaults: dispatcher on, allow_private off, batch 10, "
	    "interval 1s, timeout 10s, max_response 64KiB, max_attempts 100, "
	    "max_age 3d, backoff 5s..1h, retention 7d, ordered off");
	GOOD("[webhooks]\ndispatcher = off\nallow_private = yes\nbatch = 1000\n"
	    "interval = 250ms\ntimeout = 60s\nmax_response = 16MiB\n"
	    "max_attempts = 0\nmax_age = 1ms\nbackoff = 1s\nbackoff_max = 1s\n"
	    "retention = 1h\nordered = true\n");
	TAP_OK(cfg.wh_dispatcher == 0 && cfg.wh_allow_private == 1 &&
	    cfg.wh_batch == 1000 && cfg.wh_interval_ms == 250 &&
	    cfg.wh_timeout_ms == 60000 && cfg.wh_max_response == 16777216 &&
	    cfg.wh_max_attempts == 0 && cfg.wh_max_age_ms == 1 &&
	    cfg.wh_backoff_ms == 1000 && cfg.wh_backoff_max_ms == 1000 &&
	    cfg.wh_retention_ms == 3600000LL && cfg.wh_ordered == 1,
	    "[webhooks] every key set, at its bounds");
	GOOD("[webhooks]\nordered = 0\ndispatcher = 1\n");
	TAP_OK(cfg.wh_ordered == 0 && cfg.wh_dispatcher == 1, "0 and 1");
	BAD("[webhooks]\ndispatcher = maybe\n", 2,
	    "dispatcher must be on or off");
	BAD("[webhooks]\nbatch = 0\n", 2, "batch must be an integer from 1");
	BAD("[webhooks]\nbatch = 1001\n", 2, "batch must be an integer");
	BAD("[webhooks]\ntimeout = 61s\n", 2, "timeout must be at most 60s");
	BAD("[webhooks]\nmax_response = 17MiB\n", 2, "max_response must be");
	BAD("[webhooks]\nmax_age = 3 days\n", 2, "max_age must be a duration");
	BAD("[webhooks]\nbogus = 1\n", 2, "bogus");
	BAD("[webhooks]\nbatch = 5\n[webhooks]\n", 3, "duplicate section");
	BAD("[webhooks]\n\ninterval = 0\n", 3, "interval must be a duration");
	BAD("[webhooks]\ntimeout = 0s\n", 2, "timeout must be a duration");
	BAD("[webhooks]\nbackoff = 0ms\n", 2, "backoff must be a duration");
	BAD("[webhooks]\nretention = 0\n", 2, "retention must be a duration");
	BAD("[webhooks]\nbackoff = 10s\nbackoff_max = 1s\n", 3,
	    "backoff_max must be at least backoff");
	BAD("[webhooks]\nbackoff = 2h\n", 2,
	    "backoff_max must be at least backoff");
	/* Fair delivery and receivers' signals (issue 36). */
	GOOD("[webhooks]\n");
	TAP_OK(cfg.wh_concurrency == 8 && cfg.wh_disable_after_ms ==
	    432000000LL, "[webhooks] defaults: concurrency 8, "
	    "disable_after 5d");
	GOOD("[webhooks]\nconcurrency = 1\ndisable_after = 3s\n");
	TAP_OK(cfg.wh_concurrency == 1 && cfg.wh_disable_after_ms == 3000,
	    "concurrency 1, disable_after 3s");
	GOOD("[webhooks]\nconcurrency = 64\n");
	TAP_OK(cfg.wh_concurrency == 64, "concurrency 64 (the most)");
	BAD("[webhooks]\nconcurrency = 0\n", 2,
	    "concurrency must be an integer from 1");
	BAD("[webhooks]\nconcurrency = 65\n", 2,
	    "concurrency must be an integer");
	BAD("[webhooks]\nconcurrency = eight\n", 2,
	    "concurrency must be an integer");
	BAD("[webhooks]\ndisable_after = 0\n", 2,
	    "disable_after must be a duration");
	BAD("[webhooks]\ndisable_after = 5 days\n", 2,
	    "disable_after must be a duration");
}

/* [webhooks] max_endpoints: the tenant's bound, 16 by default, 1 to
 * 10000. */
static void
test_webhooks_max_endpoints(void)
{
	GOOD("");
	TAP_OK(cfg.wh_max_endpoints == 16, "[webhooks] max_endpoints: 16 by "
	    "default");
	GOOD("[webhooks]\nmax_endpoints = 1\n");
	TAP_OK(cfg.wh_max_endpoints == 1, "max_endpoints = 1");
	GOOD("[webhooks]\nmax_endpoints = 10000\n");
	TAP_OK(cfg.wh_max_endpoints == 10000, "max_endpoints = 10000");
	BAD("[webhooks]\nmax_endpoints = 0\n", 2,
	    "max_endpoints must be an integer from 1");
	BAD("[webhooks]\nmax_endpoints = 10001\n", 2,
	    "max_endpoints must be an integer");
	BAD("[webhooks]\nmax_endpoints = many\n", 2,
	    "max_endpoints must be an integer");
}

int
main(void)
{
	test_defaults();
	test_webhooks();
	test_webhooks_max_endpoints();
	test_ttl_window();
	test_full();
	test_comments_crlf();
	test_errors();
	test_remember();
	test_routes();
	test_app();
	test_app_typed();
	test_lock_timeout();
	test_durations();
	test_sizes();
	test_load();

	/* free is idempotent and leaves an empty struct */
	idem_cfg_free(&cfg);
	idem_cfg_free(&cfg);
	TAP_OK(cfg.log_level == NULL && cfg.routes == NULL && cfg.app == NULL,
	    "free twice, struct cleared");
	return TAP_DONE();
}
