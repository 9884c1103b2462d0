/*
 * internal.h - private interfaces shared by the files of libidem.
 * Nothing here is installed.  The shared library exports lib/idem.sym:
 * the functions of idem.h (handlers) and idem_admin.h (operators), and
 * two for libidem_test alone, declared in lib/test/idem_test_private.h.
 */
#ifndef IDEM_INTERNAL_H
#define IDEM_INTERNAL_H

#include "config.h"	/* configure's switches; every object then depends on it */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "idem_admin.h"	/* and idem.h */

/*
 * The tri-state return of the library's database steps, one name per
 * meaning instead of bare -2 and +1.  The values are the ones callers
 * compared with before the names existed.
 */
/* [database] prepared_statements */
enum idem_prepared {
	IDEM_PREPARED_OFF,
	IDEM_PREPARED_ON,
	IDEM_PREPARED_AUTO,	/* on, unless a pooler answers for the server */
};

enum idem_rc {
	IDEM_RC_OK = 0,
	IDEM_RC_FAIL = -1,	/* failed: the request (or the data) is wrong */
	IDEM_RC_TRANSIENT = -2,	/* failed for the database's reasons: retry */
	IDEM_RC_BUSY = 1,	/* another holder has it (a lost race) */
};

/* --- buf.c: growable byte buffer ---------------------------------------- */

struct idem_buf {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

int	idem_buf_add(struct idem_buf *b, const void *p, size_t len);
int	idem_buf_addc(struct idem_buf *b, char c);
int	idem_buf_adds(struct idem_buf *b, const char *s);
int	idem_buf_addf(struct idem_buf *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* v in decimal, NUL-terminated, into out; its length (snprintf's "%lld"
 * without printf). */
#define IDEM_INT_LEN	21
size_t	idem_fmt_int(char out[IDEM_INT_LEN], long long v);
/* Append s as a JSON string literal (quotes included, RFC 8785 escaping). */
int	idem_buf_add_jstr(struct idem_buf *b, const char *s, size_t len);
/* Make p NUL-terminated (not counted in len). */
int	idem_buf_nul(struct idem_buf *b);
void	idem_buf_reset(struct idem_buf *b);
void	idem_buf_free(struct idem_buf *b);
/* An error message into the caller's buffer (err may be NULL, errlen 0):
 * every "char *err, size_t errlen" of the library is filled by it. */
void	idem_errf(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* Lower-case hex of p[0..n-1] into out (2n + 1 bytes, NUL-terminated). */
void	idem_hex(const unsigned char *p, size_t n, char *out);

/* --- jcs.c: RFC 8785 JSON canonicalisation ------------------------------ */

#define IDEM_JSON_MAX_DEPTH	64
/* Values (members and array elements, the top level included) per body. */
#define IDEM_JSON_MAX_VALUES	10000

struct idem_jcs_limits {
	unsigned	 max_depth;	/* nesting of arrays and objects */
	size_t		 max_values;	/* JSON values in the whole text */
};

enum idem_jcs_result {
	IDEM_JCS_OK = 0,
	IDEM_JCS_INVALID = -1,	/* not acceptable JSON (syntax, UTF-8,
				 * NUL, depth, duplicate names, range) */
	IDEM_JCS_TOO_MANY = -2,	/* more than lim->max_values values */
	IDEM_JCS_NOMEM = -3,
};

/*
 * Validate the JSON text in (len bytes: UTF-8, no NUL byte and no U+0000
 * in any string or member name, no duplicate member names, within lim)
 * and append its RFC 8785 canonical form to out.  Anything but
 * IDEM_JCS_OK leaves out as it was and puts a short human-readable reason
 * in err (never any input bytes beyond an offset).  Work and memory stop
 * growing at lim->max_values values, whatever len is.
 */
enum idem_jcs_result idem_jcs_canonicalize(const char *in, size_t len,
	    const struct idem_jcs_limits *lim, struct idem_buf *out,
	    char *err, size_t errlen);
/*
 * idem_jcs_canonicalize(), and into pruned (when not NULL) the same
 * canonical form without the members named by the nexclude JSON Pointers
 * (RFC 6901, as written: "/meta/trace_id", "~0" and "~1" escaped; array
 * elements by their decimal index): the fingerprint of a route whose
 * clients may change those members between retries of one operation.
 * A pointer that names nothing removes nothing.  On failure both buffers
 * are left as they were.
 */
enum idem_jcs_result idem_jcs_canonicalize_pruned(const char *in,
	    size_t len, const struct idem_jcs_limits *lim,
	    const char *const *exclude, size_t nexclude,
	    struct idem_buf *out, struct idem_buf *pruned, char *err,
	    size_t errlen);
/* 1 if p is a JSON Pointer a route may exclude: "/" and at least one
 * more character, "~" only as "~0" or "~1", no control character. */
int	idem_jcs_pointer_ok(const char *p);
/*
 * Append the ECMAScript Number.prototype.toString form of the JSON number
 * text num (len bytes) to out.  -1 if it is not finite as a double.
 */
int	idem_jcs_number(const char *num, size_t len, struct idem_buf *out);

/* --- key.c: the Idempotency-Key header ---------------------------------- */

#define IDEM_KEY_MAX	255

/* The verdict on an Idempotency-Key field value: OK, or why it is refused. */
enum idem_key_verdict {
	IDEM_KEY_OK = 0,
	IDEM_KEY_EMPTY,		/* nothing, only SP, or "" */
	IDEM_KEY_TOO_LONG,	/* more than IDEM_KEY_MAX characters */
	IDEM_KEY_CHARACTER,	/* not visible ASCII/SP, or not allowed bare */
	IDEM_KEY_ESCAPE,	/* sf-string escape other than \" and \\ */
	IDEM_KEY_UNTERMINATED,	/* sf-string without its closing quote */
	IDEM_KEY_TRAILING,	/* something after the value */
	IDEM_KEY_PARAMETERS,	/* ;name=value after the value */
	IDEM_KEY_LIST,		/* a, b */
	IDEM_KEY_INNER_LIST,	/* (a b) */
	IDEM_KEY_INTEGER,	/* 12345 */
	IDEM_KEY_DECIMAL,	/* 12.5 */
	IDEM_KEY_BOOLEAN,	/* ?1 */
	IDEM_KEY_BYTE_SEQUENCE,	/* :aGVsbG8=: */
	IDEM_KEY_DATE,		/* @1659578233 (RFC 9651) */
	IDEM_KEY_DISPLAY_STRING, /* %"caf%c3%a9" (RFC 9651) */
	IDEM_KEY_NO_ROOM	/* out is too small for the key (a caller's bug) */
};

/*
 * Parse an Idempotency-Key field value (len bytes; pure): an RFC 8941 Item
 * that is a String ("abc", \" and \\ escapes) or a Token (abc), without
 * parameters, or the compatibility form (a bare value of token characters
 * starting with a digit, "-" or "_" that is not a number: a UUID).
 * Leading/trailing SP are discarded (not HTAB: RFC 8941 4.2).  On OK the
 * key, the item's value (1..IDEM_KEY_MAX chars), is copied NUL-terminated
 * to out (outlen >= IDEM_KEY_MAX + 1); otherwise out is emptied.
 */
enum idem_key_verdict idem_key_parse(const char *value, size_t len, char *out,
	    size_t outlen);
/* The problem detail for a verdict: what is wrong, in a sentence. */
const char *idem_key_reason(enum idem_key_verdict v);

/* --- query.c: declared query parameters ---------------------------------- */

#define IDEM_QUERY_PAIRS_MAX	32	/* name=value pairs in a query */
#define IDEM_PARAMS_MAX		32	/* declared parameters per route */

struct idem_query_pairs {
	size_t	 n;
	char	*name[IDEM_QUERY_PAIRS_MAX];	/* decoded */
	char	*value[IDEM_QUERY_PAIRS_MAX];
};

enum idem_query_rc {
	IDEM_QUERY_OK = 0,
	IDEM_QUERY_TOO_MANY,	/* more than IDEM_QUERY_PAIRS_MAX pairs */
	IDEM_QUERY_MALFORMED,	/* a bad %-escape or an encoded NUL */
};

/* query (NULL: none) as decoded pairs, in order; nothing kept on failure. */
enum idem_query_rc idem_query_split(const char *query,
	    struct idem_query_pairs *q);
void	idem_query_pairs_free(struct idem_query_pairs *q);
/*
 * The pairs against params (NULL-name ended, at most IDEM_PARAMS_MAX):
 * vals[i] the value of params[i] (into q), its default, or NULL.  Every
 * failure (undeclared, repeated, broken rule, required and missing): the
 * first max into errs, the parameter's name as pointer.  Returns how
 * many (0: valid).
 */
size_t	idem_query_collect(const struct idem_query_pairs *q,
	    const struct idem_param *params, const char **vals,
	    struct idem_validation_error *errs, size_t max);

/* --- prefer.c: the Prefer header's wait (RFC 7240) ------------------------ */

/* A wait=N above this is read as this (seconds); config caps it anyway. */
#define IDEM_PREFER_WAIT_CAP	86400

enum idem_prefer_wait {
	IDEM_PREFER_NONE = 0,	/* no wait preference, or wait=0 */
	IDEM_PREFER_WAIT,	/* wait=N, N > 0 in *seconds */
	IDEM_PREFER_MALFORMED,	/* not RFC 7240: ignored, as not understood */
};

/* The first wait preference of a Prefer header value (NULL: absent). */
enum idem_prefer_wait idem_prefer_wait(const char *hdr, unsigned *seconds);

/* [idempotency] max_waiters at most: the waiter table's size. */
#define IDEM_WAITERS_MAX	256

/* What a process holds when a duplicate asks to wait. */
struct idem_wait_load {
	unsigned	threads;	/* [server] threads */
	unsigned	max_waiters;	/* [idempotency] max_waiters */
	unsigned	max_per_tenant;	/* [idempotency] max_waiters_per_tenant */
	unsigned	waiters;	/* waiting now (this duplicate not yet) */
	unsigned	tenant_waiters;	/* of those, of this duplicate's tenant */
	unsigned	owners;		/* idempotent handlers running now */
};

enum idem_wait_admission {
	IDEM_ADMIT_WAIT,	/* it waits, in a waiter slot */
	IDEM_ADMIT_NO_WORKER,	/* waiters + owners would fill every thread */
	IDEM_ADMIT_PROCESS_FULL,	/* max_waiters already waiting */
	IDEM_ADMIT_TENANT_FULL,	/* max_waiters_per_tenant of its tenant */
};

/* May one more duplicate wait?  Refused unless, with it, waiters plus
 * owners stay below threads (a worker stays free for everything else;
 * threads = 1 exempt), and both waiter bounds hold; checked in the order
 * of the enum. */
enum idem_wait_admission idem_wait_admit(const struct idem_wait_load *l);

/* --- clock.c ------------------------------------------------------------ */

/* The monotonic clock in microseconds: durations and deadlines. */
long long idem_now_us(void);
/* ts = now on clock clk + ms (for timed waits). */
void	idem_deadline(clockid_t clk, long long ms, struct timespec *ts);

/* --- crypto.c ----------------------------------------------------------- */

#define IDEM_SECRET_HASH_LEN	32	/* SHA-256 of an API secret */

void	idem_sha256(const void *p, size_t len, unsigned char out[32]);
/* Bytes to hash, one of several in a row. */
struct idem_span {
	const void	*p;
	size_t		 len;
};
/* HMAC-SHA256 with key over the spans one after the other: 0, or -1. */
int	idem_hmac_sha256(const void *key, size_t keylen,
	    const struct idem_span *parts, size_t nparts,
	    unsigned char out[32]);
/* n (at most 512) random bytes into out: 0, or -1. */
int	idem_random_bytes(unsigned char *out, size_t n);
/* nbytes (at most 64) random bytes as hex into out (2 * nbytes + 1). */
int	idem_random_hex(char *out, size_t nbytes);
/* Is b (blen bytes) the secret hash a?  In constant time. */
int	idem_secret_eq(const unsigned char *a, const void *b, size_t blen);
/* SHA-256 of (secret hash, key): the advisory lock id's and the log's
 * key_hash's source, computed one way for both. */
void	idem_key_digest(const unsigned char secret_hash[IDEM_SECRET_HASH_LEN],
	    const char *key, unsigned char out[32]);

/* "Sun, 06 Nov 1994 08:49:37 GMT" and its NUL. */
#define IDEM_IMF_FIXDATE_LEN	30
/* Pure: Unix time t as an RFC 9110 IMF-fixdate, whatever the locale; 0,
 * or -1 when it does not fit (len < IDEM_IMF_FIXDATE_LEN, year > 9999). */
int	idem_imf_fixdate(long long t, char *out, size_t len);

/* --- verdict.c: what flight 1's answer means for a request ------------- */

/* What idem_claim() (sql/) said about a key, as the middleware reads it. */
struct idem_claim_row {
	int	tenant_ok;	/* the secret names a live API key */
	int	lock_tried;	/* the advisory lock was tried ... */
	int	lock_got;	/* ... and got */
	int	claimed;	/* the record was free: this request writes it */
	int	inserted;	/* phased: the record was inserted, leased */
	int	taken;		/* phased: a lapsed lease was taken over */
	int	has_record;	/* a record of the key was found */
	int	same_request;	/* its method, path and fingerprint are ours */
	int	completed;	/* it is completed, with a response */
	int	remembered;	/* no live record, but this very request is
				 * remembered after its record expired */
};

enum idem_verdict {
	IDEM_V_UNAUTHORIZED,	/* 401 */
	IDEM_V_EXECUTE,		/* run the handler (a new or free record) */
	IDEM_V_RESUME,		/* phased: run it from the recovery point */
	IDEM_V_REPLAY,		/* the stored response */
	IDEM_V_REUSED,		/* 422: the key holds another request */
	IDEM_V_IN_FLIGHT,	/* 409: a live owner has it */
	IDEM_V_RACED,		/* 409: the record changed under the lock */
	IDEM_V_EXPIRED,		/* 410: executed once, its record expired */
};

/* Pure: the verdict on a request to a route (phased or atomic). */
enum idem_verdict idem_claim_verdict(const struct idem_claim_row *row,
	    int phased);

/* validate.c: idem_validate() and idem_validate_errors() at once: the
 * first failure into why, the first max into errs; the failures' count. */
size_t	idem_validate_collect(yajl_val v, const struct idem_body *b,
	    char *why, size_t whylen, struct idem_validation_error *errs,
	    size_t max);

/* --- config*.c: the INI config file (config_ini.c reads it) ------------- */

/* One [route "METHOD /path"] section; 0 (and line 0): not set there. */
struct idem_cfg_route {
	char			*method;	/* "POST" */
	char			*path;		/* "/v1/orders/:id" (a pattern) */
	long long		 ttl_ms;
	long long		 lock_timeout_ms;
	long long		 deadline_ms;	/* the whole handler */
	long long		 phase_deadline_ms;	/* each phase */
	/* remember: how long a trace of an evicted record is kept */
	long long		 remember_ms;
	unsigned long		 line;		/* of the section header */
	unsigned long		 key_line[5];	/* of ttl, lock_timeout, ... */
	/* fingerprint_exclude: JSON Pointers left out of the fingerprint */
	char			**exclude;
	size_t			 nexclude;
	unsigned long		 exclude_line;
	struct idem_cfg_route	*next;
};

/* --- inbox.c: [inbox "NAME"], a signed source of webhooks ------------- */

#define IDEM_INBOX_SECRETS_MAX	8	/* secret = a b ... (rotation) */
#define IDEM_INBOX_NAME_MAX	64

enum idem_inbox_scheme {
	IDEM_INBOX_SCHEME_NONE,		/* not set yet */
	IDEM_INBOX_STANDARD,		/* standard-webhooks */
	IDEM_INBOX_STRIPE,		/* stripe */
};

/* One [inbox "NAME"] section; line 0: that key not set. */
struct idem_cfg_inbox {
	char			*name;
	enum idem_inbox_scheme	 scheme;
	char			*secret[IDEM_INBOX_SECRETS_MAX];
	size_t			 nsecrets;
	long long		 tolerance_ms;	/* default 5 min */
	unsigned long		 line;		/* of the section header */
	unsigned long		 scheme_line, secret_line, tolerance_line;
	struct idem_cfg_inbox	*next;
};

/* What a section header is to the inbox parser. */
enum idem_inbox_sect_rc {
	IDEM_INBOX_SECT_OTHER,	/* not [inbox ...]: another section */
	IDEM_INBOX_SECT_OK,	/* a new inbox appended to *list, in *out */
	IDEM_INBOX_SECT_ERROR,	/* why says what is wrong */
};
/* hdr: the text between the brackets. */
enum idem_inbox_sect_rc idem_inbox_section(struct idem_cfg_inbox **list,
	    const char *hdr, unsigned long line, struct idem_cfg_inbox **out,
	    char *why, size_t whylen);
/* scheme or secret of ib at line: 0, or -1 with why (the caller parses
 * tolerance, a duration). */
int	idem_inbox_key(struct idem_cfg_inbox *ib, const char *key,
	    const char *val, unsigned long line, char *why, size_t whylen);
/* Every inbox of list has its scheme and a secret: 0, or -1 with why and
 * *line the section's. */
int	idem_inbox_finish(const struct idem_cfg_inbox *list,
	    unsigned long *line, char *why, size_t whylen);
void	idem_inbox_free(struct idem_cfg_inbox *list);
const struct idem_cfg_inbox *idem_inbox_find(
	    const struct idem_cfg_inbox *list, const char *name);
const char *idem_inbox_scheme_name(enum idem_inbox_scheme s);

/* A received message's signature headers (NULL: absent). */
struct idem_inbox_msg {
	const char	*id, *timestamp, *signature;	/* webhook-* */
	const char	*stripe_signature;		/* Stripe-Signature */
	const void	*body;
	size_t		 len;
};
/* Pure: the message against each of ib's secrets at now (Unix seconds):
 * IDEM_WEBHOOK_OK when one matches in time. */
enum idem_webhook_verdict idem_inbox_check(const struct idem_cfg_inbox *ib,
	    const struct idem_inbox_msg *m, long long now);

/* --- stripe.c: the Stripe-Signature header ------------------------------ */

enum idem_stripe_header_rc {
	IDEM_STRIPE_HEADER_OK,		/* one t, one v1 or more */
	IDEM_STRIPE_HEADER_MISSING,	/* no header */
	IDEM_STRIPE_HEADER_BAD_T,	/* no t, two, or not decimal seconds */
	IDEM_STRIPE_HEADER_NO_V1,	/* no v1 signature */
};
/* Pure: the header's t and how many v1 items it has. */
enum idem_stripe_header_rc idem_stripe_header_parse(const char *h,
	    long long *t, size_t *nv1);

/*
 * What a route runs under, its section's values over the defaults: the
 * record's TTL, the lease (lease, formerly lock_timeout: lock_timeout_ms),
 * and the wall-clock deadlines of the handler (default: request_timeout)
 * and of each phase (default: the handler's).  idem_cfg_parse() refuses a
 * lease under IDEM_LEASE_MIN_MS, a phase deadline over the handler's, or a
 * record that could expire before its request could have ended (ttl <
 * deadline + lease).  The heartbeat keeps a live request's lease.
 * remember_ms (0: off): how long after its record expired a request is
 * still recognised (sql/010).
 */
struct idem_route_limits {
	long long	ttl_ms;
	long long	lock_timeout_ms;
	long long	deadline_ms;
	long long	phase_deadline_ms;
	long long	remember_ms;
};

struct idem_cfg_kv {			/* an application key */
	char			*section;
	char			*key;
	char			*value;		/* NULL until set */
	enum idem_config_type	 type;		/* checked when parsed */
	struct idem_cfg_kv	*next;
};

struct idem_cfg {
	/* [server] */
	unsigned		 threads;		/* 8 */
	size_t			 max_body;		/* 1 MiB */
	unsigned		 max_json_values;	/* 10000 */
	long long		 request_timeout_ms;	/* 30 s */
	size_t			 max_params;		/* 64 KiB */
	long long		 read_timeout_ms;	/* 10 s */
	long long		 write_timeout_ms;	/* 10 s: a whole answer */
	size_t			 max_buffered;		/* 32 MiB: bodies being
							 * read, answers waiting */
	char			*listen;		/* NULL */
	char			*log_level;		/* "info" */
	char			*problem_base;		/* "/problems/" */
	char			*openapi_server_url;	/* [openapi] server_url */
	char			*openapi_license;	/* [openapi] license */
	/* [database] */
	char			*conninfo;		/* NULL: PG* env */
	unsigned		 pool_size;		/* 0: = threads */
	long long		 acquire_timeout_ms;	/* 2 s */
	char			*prepared_statements;	/* "auto" */
	/* [idempotency] */
	long long		 ttl_ms;		/* 24 h */
	long long		 lock_timeout_ms;	/* the lease: 10 s */
	long long		 max_wait_ms;		/* 10 s: Prefer: wait */
	unsigned		 max_waiters;		/* 4 */
	unsigned		 max_waiters_per_tenant; /* 2 */
	long long		 evict_interval_ms;	/* 5 m */
	long			 evict_batch;		/* 10000 */
	long			 completer_max_attempts; /* 10, 0: no limit */
	long long		 completer_max_age_ms;	/* 24 h, 0: no limit */
	long long		 completer_backoff_ms;	/* 10 s */
	long long		 completer_backoff_max_ms; /* 10 m */
	/* [webhooks]: the outbox's dispatcher (dispatcher.c) */
	int			 wh_dispatcher;		/* on */
	int			 wh_allow_private;	/* off */
	long			 wh_batch;		/* 10 */
	long long		 wh_interval_ms;	/* 1 s: idle polling */
	long long		 wh_timeout_ms;		/* 10 s */
	size_t			 wh_max_response;	/* 64 KiB */
	long			 wh_max_attempts;	/* 100, 0: no limit */
	long long		 wh_max_age_ms;		/* 3 d */
	long long		 wh_backoff_ms;		/* 5 s */
	long long		 wh_backoff_max_ms;	/* 1 h */
	long long		 wh_retention_ms;	/* 7 d */
	int			 wh_ordered;		/* off */
	long			 wh_max_endpoints;	/* 16 per tenant */
	long			 wh_concurrency;	/* 8: calls in flight */
	long long		 wh_disable_after_ms;	/* 5 d */
	/* [metrics] */
	char			*metrics_allow;		/* "127.0.0.1" */
	char			*metrics_listen;	/* NULL: on the main socket */
	unsigned		 metrics_socket_mode;	/* 0660 */
	char			*metrics_socket_group;	/* NULL: the process's */
	char			*metrics_allow_uid;	/* NULL: any uid */
	/* [server], guards of the listening socket */
	char			*allow;			/* NULL: any peer */
	unsigned		 socket_mode;		/* 0660 */
	char			*socket_group;		/* NULL: the process's */
	/* [route "METHOD /path"] */
	struct idem_cfg_route	*routes;
	/* [inbox "NAME"] (inbox.c) */
	struct idem_cfg_inbox	*inboxes;
	/* application sections */
	struct idem_cfg_kv	*app;
	/* accept (and ignore) any key of a non-framework section (idemctl) */
	int			 any_app_keys;
	char			*file;	/* the name parsed, for messages */
	/* what parsing warned of ("file:line: ...", one per line), for the
	 * caller to log: the parser itself writes nowhere */
	char			 warnings[512];
};

/* Fill defaults. */
void	idem_cfg_init(struct idem_cfg *cfg);
/* Permit [section] key for the application (before parsing). */
int	idem_cfg_allow(struct idem_cfg *cfg, const char *section,
	    const char *key);
/*
 * Parse INI text.  name is used in messages: "name:line: what is wrong".
 * Unknown sections/keys and bad values are errors.  Returns 0 or -1.
 */
int	idem_cfg_parse(struct idem_cfg *cfg, const char *name,
	    const char *text, size_t len, char *err, size_t errlen);
int	idem_cfg_load(struct idem_cfg *cfg, const char *path,
	    char *err, size_t errlen);
/* [database] prepared_statements as an enum. */
enum idem_prepared idem_cfg_prepared(const struct idem_cfg *cfg);
/* The shortest lease of any route (the heartbeat's interval is a third). */
long long idem_cfg_lease_min(const struct idem_cfg *cfg);
/* TTL for a route (the override, else ttl_ms). */
long long idem_cfg_route_ttl(const struct idem_cfg *cfg, const char *method,
	    const char *pattern);
/* Everything a route runs under (method, pattern NULL: the defaults). */
void	idem_cfg_route_limits(const struct idem_cfg *cfg, const char *method,
	    const char *pattern, struct idem_route_limits *out);
/* The route's fingerprint_exclude pointers (*n of them; NULL when none). */
const char *const *idem_cfg_route_exclude(const struct idem_cfg *cfg,
	    const char *method, const char *pattern, size_t *n);
const char *idem_cfg_app_get(const struct idem_cfg *cfg,
	    const char *section, const char *key);
/* Why idem_cfg_allow_typed() would refuse [section] key (empty, a
 * built-in section, no such type), or NULL. */
const char *idem_cfg_allow_refusal(const char *section, const char *key,
	    enum idem_config_type type);
/* The i-th key (from 0) the parser reads in a built-in section, a
 * route's last (section "route"): 1 with *section and *key set, 0 past
 * the last. */
int	idem_cfg_key_nth(size_t i, const char **section, const char **key);
/* idem_cfg_allow() with the type the value must have (a second call
 * changes the type). */
int	idem_cfg_allow_typed(struct idem_cfg *cfg, const char *section,
	    const char *key, enum idem_config_type type);
/* A typed value from its text.  The union member of type is set; 0, or
 * -1 with what was expected (for "file:line: key: ...") in *why. */
union idem_cfg_value {
	long long	i;	/* INT, and DURATION in ms */
	size_t		size;
	int		b;
};
int	idem_cfg_value_parse(enum idem_config_type type, const char *text,
	    union idem_cfg_value *out, const char **why);
/* The application key's value, typed: 1 set, 0 unset, -1 not of type or
 * not an allowed key. */
int	idem_cfg_app_typed(const struct idem_cfg *cfg, const char *section,
	    const char *key, enum idem_config_type type,
	    union idem_cfg_value *out);
void	idem_cfg_free(struct idem_cfg *cfg);

/*
 * The retention window of a route's keys (the design's contract): under
 * IDEM_TTL_MIN_MS a late retry executes again, so it is refused; under
 * IDEM_TTL_FLOOR_MS (the floor for operations that move money) or over
 * IDEM_TTL_CEIL_MS (rows grow for no protection) it starts with a warning.
 */
#define IDEM_TTL_MIN_MS		(3600LL * 1000)
/* The shortest lease: the heartbeat renews it every third of it. */
#define IDEM_LEASE_MIN_MS	3000
#define IDEM_TTL_FLOOR_MS	(24 * IDEM_TTL_MIN_MS)
#define IDEM_TTL_CEIL_MS	(7 * IDEM_TTL_FLOOR_MS)

enum idem_ttl_verdict {
	IDEM_TTL_OK,
	IDEM_TTL_REFUSE,	/* < 1 h */
	IDEM_TTL_SHORT,		/* < 24 h: warn */
	IDEM_TTL_LONG,		/* > 7 d: warn */
};

/* Pure: what a TTL of ttl_ms means for the contract. */
enum idem_ttl_verdict idem_ttl_verdict(long long ttl_ms);
/* Why, in a few words, for a message (NULL for IDEM_TTL_OK). */
const char *idem_ttl_reason(enum idem_ttl_verdict v);

/* "250ms", "2s", "5m", "24h", "7d", bare digits = seconds. */
int	idem_parse_duration(const char *s, long long *ms);
/* "1048576", "512KiB", "1MiB", "1GiB" (also K/KB/M/MB/G/GB as 1024^n). */
int	idem_parse_size(const char *s, size_t *bytes);

/* --- router.c ------------------------------------------------------------ */

#define IDEM_MAX_PARAMS	8
/* The longest request path a route can match (request.c refuses longer). */
#define IDEM_PATH_MAX	2048

struct idem_route {
	char		*method;
	char		*pattern;
	unsigned	 flags;
	idem_handler_fn	 fn;
	void		*arg;
	/* idem_app_route_body(): request.c validates before fn runs */
	const struct idem_body	*body;
	/* idem_app_route_query(): the same for the query string */
	const struct idem_param	*query;
	/* openapi.c: what /openapi.json says of the route */
	const char		*operation_id, *summary;
	const struct idem_response *responses;
	const char *const	*problems;	/* application slugs */
	/* idem_app_inbox(): the signed source it receives (receive.c) */
	struct idem_inbox_route	*inbox;
};

struct idem_router {
	struct idem_route	*routes;
	size_t			 nroutes;
};

struct idem_params {
	size_t		 n;
	const char	*name[IDEM_MAX_PARAMS];	/* point into the pattern */
	char		*value[IDEM_MAX_PARAMS];	/* owned (malloc) */
};

enum idem_match {
	IDEM_MATCH_OK = 0,
	IDEM_MATCH_NOT_FOUND,
	IDEM_MATCH_METHOD,	/* path known, method not: allow is filled */
};

/* Why idem_router_add() would refuse the route (a bad method or
 * pattern, no handler, registered already), or NULL. */
const char *idem_router_refusal(const struct idem_router *r,
	    const char *method, const char *pattern, idem_handler_fn fn);
int	idem_router_add(struct idem_router *r, const char *method,
	    const char *pattern, unsigned flags, idem_handler_fn fn, void *arg);
/*
 * Match method and path (no query).  Literal segments compare exactly; a
 * ":name" segment matches one non-empty segment of [A-Za-z0-9._~-].
 * On IDEM_MATCH_METHOD, allow gets "GET, POST" (methods of that path).
 */
enum idem_match idem_router_match(const struct idem_router *r,
	    const char *method, const char *path,
	    const struct idem_route **route, struct idem_params *params,
	    char *allow, size_t allowlen);
void	idem_params_free(struct idem_params *p);
void	idem_router_free(struct idem_router *r);

#endif /* IDEM_INTERNAL_H */
