/*
 * idemctl.c - operations on an idem store: migrate, API keys, evict,
 * reclaim, stats, complete.  Reads the same config file as the FastCGI
 * app.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <idem.h>

static void
usage(void)
{
	fprintf(stderr,
	    "usage: idemctl [-c config] migrate [--dir DIR]...\n"
	    "       idemctl [-c config] api-key create NAME\n"
	    "       idemctl [-c config] api-key revoke NAME\n"
	    "       idemctl [-c config] evict [--batch N] [--max-batches M]\n"
	    "       idemctl [-c config] reclaim\n"
	    "       idemctl [-c config] stats\n"
	    "       idemctl [-c config] complete --app PROGRAM [MAX]\n");
}

static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
num_arg(const char *s, long *out)
{
	char	*end;

	*out = strtol(s, &end, 10);
	return *s != '\0' && *end == '\0' && *out > 0 ? 0 : -1;
}

/*
 * migrate's directories without --dir: the library's migrations, then the
 * sample application's (its tables refer to the library's).  From the
 * source tree when this is the binary make left in its build tree
 * (apps/idemctl/, or .libs/ there under a libtool wrapper), so that a tree
 * that is built but not installed migrates from its own schema; else the
 * installed ones.  See idemctl(8).
 */
static int
in_build_tree(void)
{
	char		 exe[PATH_MAX], bin[PATH_MAX], *slash;
	struct stat	 st;
	ssize_t		 n;
	size_t		 len;

	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
		return 0;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL ||
	    realpath(IDEM_BUILD_BINDIR, bin) == NULL)
		return 0;
	*slash = '\0';				/* the directory of the binary */
	len = strlen(bin);
	if (strncmp(exe, bin, len) != 0 ||
	    (exe[len] != '\0' && strcmp(exe + len, "/.libs") != 0))
		return 0;
	return stat(IDEM_SRC_SQLDIR, &st) == 0 && S_ISDIR(st.st_mode);
}

static int
cmd_migrate(PGconn *db, int argc, char **argv)
{
	const char	*dirs[8];
	char		 err[1024];
	int		 i, n, ndirs = 0;

	for (i = 1; i < argc; i += 2) {
		if (strcmp(argv[i], "--dir") != 0 || i + 1 == argc ||
		    ndirs == (int)(sizeof(dirs) / sizeof(dirs[0])))
			return usage(), 2;
		dirs[ndirs++] = argv[i + 1];
	}
	if (ndirs == 0) {
		int tree = in_build_tree();
		dirs[ndirs++] = tree ? IDEM_SRC_SQLDIR : IDEM_SQLDIR;
		dirs[ndirs++] = tree ? IDEM_SRC_APP_SQLDIR : IDEM_APP_SQLDIR;
	}
	/* In the order given: a directory's tables may refer to an earlier
	 * one's, never the other way. */
	for (i = 0; i < ndirs; i++) {
		if ((n = idem_migrate(db, dirs[i], err, sizeof(err))) == -1) {
			fprintf(stderr, "idemctl: migrate: %s\n", err);
			return 1;
		}
		printf("%d migration%s applied from %s\n", n, n == 1 ? "" : "s",
		    dirs[i]);
	}
	return 0;
}

static int
cmd_api_key(PGconn *db, int argc, char **argv)
{
	char		 secret[80];
	const char	*vals[1];
	PGresult	*r;
	int64_t		 id;
	long		 n;

	if (argc != 3 || strlen(argv[2]) == 0 || strlen(argv[2]) > 200)
		return usage(), 2;
	if (strcmp(argv[1], "create") == 0) {
		if (idem_api_key_create(db, argv[2], secret, sizeof(secret),
		    &id) == -1) {
			fprintf(stderr, "idemctl: api-key create: %s",
			    PQerrorMessage(db));
			return 1;
		}
		/* The secret is shown once, as the last line. */
		printf("api key %lld created for '%s'; its secret:\n%s\n",
		    (long long)id, argv[2], secret);
		return 0;
	}
	if (strcmp(argv[1], "revoke") == 0) {
		vals[0] = argv[2];
		r = PQexecParams(db, "UPDATE api_keys SET revoked_at = now() "
		    "WHERE name = $1 AND revoked_at IS NULL", 1, NULL, vals,
		    NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fprintf(stderr, "idemctl: api-key revoke: %s",
			    PQerrorMessage(db));
			PQclear(r);
			return 1;
		}
		n = strtol(PQcmdTuples(r), NULL, 10);
		PQclear(r);
		printf("%ld api key%s revoked\n", n, n == 1 ? "" : "s");
		return n > 0 ? 0 : 1;
	}
	return usage(), 2;
}

static int
cmd_evict(PGconn *db, const struct idem_db_settings *cfg, int argc,
    char **argv)
{
	long	batch = cfg->evict_batch, max = 0, n;
	int	i, rc;
	double	t0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
			if (num_arg(argv[++i], &batch) == -1)
				return usage(), 2;
		} else if (strcmp(argv[i], "--max-batches") == 0 &&
		    i + 1 < argc) {
			if (num_arg(argv[++i], &max) == -1)
				return usage(), 2;
		} else
			return usage(), 2;
	}
	t0 = now_s();
	if ((rc = idem_evict(db, batch, max, cfg->lock_timeout_ms, &n)) == -1) {
		fprintf(stderr, "idemctl: evict: %s", PQerrorMessage(db));
		return 1;
	}
	if (rc == 1) {
		printf("another process is evicting; evicted 0 keys\n");
		return 0;
	}
	printf("evicted %ld keys in %.3f s\n", n, now_s() - t0);
	return 0;
}

static int
cmd_reclaim(PGconn *db, const struct idem_db_settings *cfg)
{
	long	n;

	if (idem_reclaim(db, cfg->lock_timeout_ms, &n) == -1) {
		fprintf(stderr, "idemctl: reclaim: %s", PQerrorMessage(db));
		return 1;
	}
	printf("reclaimed %ld keys\n", n);
	return 0;
}

/* The unfinished records: phased, past a recovery point and their TTL. */
static const char sql_unfinished[] =
	"SELECT id, api_key_id, key, recovery_point, expires_at,"
	" CASE WHEN lease_until > now() THEN 'leased' ELSE 'lapsed' END"
	" FROM idempotency_keys WHERE state = 'in_progress'"
	" AND recovery_point <> 'started' AND expires_at <= now()"
	" ORDER BY expires_at LIMIT 100";

static int
cmd_stats(PGconn *db)
{
	static const char *const label[] = { "keys", "in_progress",
	    "expired_not_evicted", "oldest_live_key_age_seconds",
	    "eviction_lag_seconds", "table_bytes", "unfinished" };
	PGresult	*r;
	int		 i;

	r = PQexec(db, "SELECT count(*),"
	    " count(*) FILTER (WHERE state = 'in_progress'),"
	    " count(*) FILTER (WHERE expires_at <= now()),"
	    " (SELECT oldest_live_age::bigint FROM idem_store_gauges()),"
	    /* lag: only what eviction would delete, as /metrics reports it */
	    " (SELECT eviction_lag::bigint FROM idem_store_gauges()),"
	    " pg_total_relation_size('idempotency_keys'),"
	    " count(*) FILTER (WHERE state = 'in_progress'"
	    "   AND recovery_point <> 'started' AND expires_at <= now())"
	    " FROM idempotency_keys");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "idemctl: stats: %s", PQerrorMessage(db));
		PQclear(r);
		return 1;
	}
	for (i = 0; i < 7; i++)
		printf("%-28s %s\n", label[i], PQgetvalue(r, 0, i));
	PQclear(r);
	/* Never evicted, so listed: each needs the completer or a person. */
	r = PQexec(db, sql_unfinished);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "idemctl: stats: %s", PQerrorMessage(db));
		PQclear(r);
		return 1;
	}
	for (i = 0; i < PQntuples(r); i++)
		printf("unfinished id=%s tenant=%s key=%s recovery_point=%s "
		    "expired_at=%s lease=%s\n", PQgetvalue(r, i, 0),
		    PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
		    PQgetvalue(r, i, 3), PQgetvalue(r, i, 4),
		    PQgetvalue(r, i, 5));
	PQclear(r);
	return 0;
}

/*
 * The completer runs the application's own handlers, which live in its
 * program, not here: run PROGRAM -c CONF complete [MAX] in our place.
 */
static int
cmd_complete(const char *conf, int argc, char **argv)
{
	char	*args[6];
	long	 max;
	int	 n = 0;

	if ((argc != 3 && argc != 4) || strcmp(argv[1], "--app") != 0 ||
	    (argc == 4 && num_arg(argv[3], &max) == -1))
		return usage(), 2;
	args[n++] = argv[2];
	if (conf != NULL) {
		args[n++] = "-c";
		args[n++] = (char *)conf;
	}
	args[n++] = "complete";
	if (argc == 4)
		args[n++] = argv[3];
	args[n] = NULL;
	execv(argv[2], args);
	fprintf(stderr, "idemctl: complete: cannot run %s: %s\n", argv[2],
	    strerror(errno));
	return 1;
}

int
main(int argc, char *argv[])
{
	struct idem_db_settings cfg;
	const char	*conf = NULL;
	char		 err[512];
	PGconn		*db;
	int		 ch, rc;

	while ((ch = getopt(argc, argv, "+c:")) != -1)
		switch (ch) {
		case 'c':
			conf = optarg;
			break;
		default:
			return usage(), 2;
		}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return usage(), 2;
	if (strcmp(argv[0], "complete") == 0)
		return cmd_complete(conf, argc, argv);
	if (strcmp(argv[0], "migrate") != 0 && strcmp(argv[0], "api-key") != 0
	    && strcmp(argv[0], "evict") != 0 && strcmp(argv[0], "reclaim") != 0
	    && strcmp(argv[0], "stats") != 0)
		return usage(), 2;
	if ((db = idem_db_open(conf, &cfg, err, sizeof(err))) == NULL) {
		fprintf(stderr, "idemctl: %s\n", err);
		return 1;
	}
	if (strcmp(argv[0], "migrate") == 0)
		rc = cmd_migrate(db, argc, argv);
	else if (strcmp(argv[0], "api-key") == 0)
		rc = cmd_api_key(db, argc, argv);
	else if (strcmp(argv[0], "evict") == 0)
		rc = cmd_evict(db, &cfg, argc, argv);
	else if (strcmp(argv[0], "reclaim") == 0 && argc == 1)
		rc = cmd_reclaim(db, &cfg);
	else if (strcmp(argv[0], "stats") == 0 && argc == 1)
		rc = cmd_stats(db);
	else {
		usage();
		rc = 2;
	}
	PQfinish(db);
	return rc;
}
