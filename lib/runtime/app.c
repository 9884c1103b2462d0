/*
 * app.c - the application object: routes, configuration, and main().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "heartbeat.h"

idem_app *
idem_app_new(const char *name)
{
	idem_app	*app;

	if ((app = calloc(1, sizeof(*app))) == NULL)
		return NULL;
	if ((app->name = strdup(name ? name : "idem")) == NULL) {
		free(app);
		return NULL;
	}
	idem_cfg_init(&app->cfg);
	pthread_mutex_init(&app->waiting_mu, NULL);
	/* Without it every secret costs a round trip: slower, not wrong. */
	app->authc = idem_authc_new();
	return app;
}

void
idem_app_free(idem_app *app)
{
	if (app == NULL)
		return;
	idem_pool_free(app->pool);
	idem_router_free(&app->router);
	idem_metrics_free(app);
	idem_authc_free(app->authc);
	idem_app_problems_free(app);
	free(app->listen);
	idem_cfg_free(&app->cfg);
	idem_inbox_routes_free(app);
	pthread_mutex_destroy(&app->waiting_mu);
	free(app->name);
	free(app);
}

int
idem_app_route(idem_app *app, const char *method, const char *pattern,
    unsigned flags, idem_handler_fn fn, void *arg)
{
	const char	*why;

	if (app == NULL)
		return -1;
	/* An idempotent route fingerprints a JSON body. */
	if (flags & IDEM_ROUTE_PHASED)
		flags |= IDEM_ROUTE_IDEMPOTENT;
	if (flags & IDEM_ROUTE_IDEMPOTENT)
		flags |= IDEM_ROUTE_JSON;
	if ((why = idem_router_refusal(&app->router, method, pattern,
	    fn)) != NULL)
		return idem_app_refuse(app, "idem_app_route(%.32s %.256s): %s",
		    method != NULL ? method : "(null)",
		    pattern != NULL ? pattern : "(null)", why);
	if (idem_router_add(&app->router, method, pattern, flags, fn,
	    arg) == -1)
		return idem_app_refuse(app, "idem_app_route(%s %.256s): out of "
		    "memory", method, pattern);
	return 0;
}

int
idem_app_config_key(idem_app *app, const char *section, const char *key)
{
	return idem_app_config_key_type(app, section, key,
	    IDEM_CONFIG_STRING);
}

const char *
idem_app_config(const idem_app *app, const char *section, const char *key)
{
	return idem_cfg_app_get(&app->cfg, section, key);
}

int
idem_app_config_key_type(idem_app *app, const char *section,
    const char *key, enum idem_config_type type)
{
	const char	*why;

	if (app == NULL)
		return -1;
	if ((why = idem_cfg_allow_refusal(section, key, type)) != NULL)
		return idem_app_refuse(app, "idem_app_config_key([%.64s] %.64s):"
		    " %s", section != NULL ? section : "(null)",
		    key != NULL ? key : "(null)", why);
	if (idem_cfg_allow_typed(&app->cfg, section, key, type) == -1)
		return idem_app_refuse(app, "idem_app_config_key([%.64s] %.64s):"
		    " out of memory", section, key);
	return 0;
}

/* An application key's value of type: 1 with it in *out (a long long, a
 * size_t or an int, as the type's getter says), 0 when unset, -1 when not
 * of that type or unknown. */
static int
config_typed(const idem_app *app, const char *section, const char *key,
    enum idem_config_type type, void *out)
{
	union idem_cfg_value	v;
	int			rc;

	if ((rc = idem_cfg_app_typed(&app->cfg, section, key, type, &v)) != 1)
		return rc;
	if (type == IDEM_CONFIG_SIZE)
		*(size_t *)out = v.size;
	else if (type == IDEM_CONFIG_BOOL)
		*(int *)out = v.b;
	else
		*(long long *)out = v.i;
	return 1;
}

int
idem_app_config_int(const idem_app *app, const char *section,
    const char *key, long long *out)
{
	return config_typed(app, section, key, IDEM_CONFIG_INT, out);
}

int
idem_app_config_duration_ms(const idem_app *app, const char *section,
    const char *key, long long *out)
{
	return config_typed(app, section, key, IDEM_CONFIG_DURATION, out);
}

int
idem_app_config_size(const idem_app *app, const char *section,
    const char *key, size_t *out)
{
	return config_typed(app, section, key, IDEM_CONFIG_SIZE, out);
}

int
idem_app_config_bool(const idem_app *app, const char *section,
    const char *key, int *out)
{
	return config_typed(app, section, key, IDEM_CONFIG_BOOL, out);
}

static void
usage(const char *name)
{
	fprintf(stderr, "usage: %s [-c config] [-l address] [-t threads] "
	    "[complete [max] | deliver [max]]\n", name);
}

/* "complete [max]": one completer run instead of serving;
 * "deliver [max]": one run of the outbox's dispatcher.  0, or 2 (said). */
static int
command_args(idem_app *app, int argc, char *argv[])
{
	char	*end;

	if (optind >= argc)
		return 0;
	if ((strcmp(argv[optind], "complete") != 0 &&
	    strcmp(argv[optind], "deliver") != 0) || argc - optind > 2) {
		usage(argv[0]);
		return 2;
	}
	app->command = strcmp(argv[optind], "complete") == 0 ?
	    "complete" : "deliver";
	app->command_max = strcmp(app->command, "complete") == 0 ?
	    100 : 10000;
	if (argc - optind == 2) {
		app->command_max = strtol(argv[optind + 1], &end, 10);
		if (*end != '\0' || app->command_max < 1 ||
		    app->command_max > 1000000) {
			fprintf(stderr, "%s: %s: max is 1 to "
			    "1000000\n", argv[0], app->command);
			return 2;
		}
	}
	return 0;
}

int
idem_app_init(idem_app *app, int argc, char *argv[])
{
	const char	*conf = NULL, *addr = NULL;
	char		 err[512];
	long		 threads = 0;
	char		*end;
	int		 ch;

	while ((ch = getopt(argc, argv, "c:l:t:")) != -1)
		switch (ch) {
		case 'c':
			conf = optarg;
			break;
		case 'l':
			addr = optarg;
			break;
		case 't':
			threads = strtol(optarg, &end, 10);
			if (*end != '\0' || threads < 1 || threads > 256) {
				fprintf(stderr, "%s: -t: 1 to 256\n", argv[0]);
				return 2;
			}
			break;
		default:
			usage(argv[0]);
			return 2;
		}
	if (command_args(app, argc, argv) == 2)
		return 2;
	if (conf != NULL &&
	    idem_cfg_load(&app->cfg, conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		return 1;
	}
	idem_log_lines(IDEM_LOG_WARN, app->cfg.warnings);
	if (threads > 0)
		app->cfg.threads = (unsigned)threads;
	if (app->cfg.pool_size == 0)
		app->cfg.pool_size = app->cfg.threads;
	if (addr != NULL) {
		free(app->listen);
		if ((app->listen = strdup(addr)) == NULL)
			return 1;
	}
	idem_log_set_level(app->cfg.log_level);
	return 0;
}

/* "complete": one completer run, its counts on stdout; exit status 0
 * when every abandoned record found was completed. */
static int
complete_command(idem_app *app)
{
	long	completed, left;
	int	rc;

	/* The records it resumes keep their leases as a server's would. */
	app->heartbeat = idem_heartbeat_start(app,
	    idem_heartbeat_interval(idem_cfg_lease_min(&app->cfg)),
	    IDEM_HEARTBEAT_SPARE);
	rc = idem_complete_abandoned(app, app->command_max, &completed, &left);
	idem_heartbeat_stop(app->heartbeat);
	app->heartbeat = NULL;
	if (rc == -1) {
		fprintf(stderr, "%s: complete: the database is not available\n",
		    app->name);
		return 1;
	}
	if (rc == IDEM_RC_BUSY) {
		printf("another process is completing; nothing done\n");
		return 0;
	}
	printf("completed %ld keys, %ld left\n", completed, left);
	return left == 0 ? 0 : 1;
}

/* "deliver": one run of the dispatcher (what is due, up to max
 * deliveries, and an eviction), its counts on stdout; exit status 0
 * unless the database was not available. */
static int
deliver_command(idem_app *app)
{
	struct idem_deliver_counts	c;

	if (idem_deliver_run(app, app->command_max, &c) != IDEM_RC_OK) {
		fprintf(stderr, "%s: deliver: the database is not available\n",
		    app->name);
		return 1;
	}
	printf("delivered %ld, failed %ld (dead %ld), evicted %ld events\n",
	    c.delivered, c.failed, c.dead, c.evicted);
	return 0;
}

/*
 * The retention contract against the routes registered: a [route] section
 * must name an idempotent route (a typo would silently leave the default
 * in force), and each idempotent route's TTL outside 24 h .. 7 d is
 * logged (under 1 h the parser refused it already).  0, or -1 reported.
 */
static int
check_routes(idem_app *app)
{
	const struct idem_cfg_route	*c;
	const struct idem_route		*rt;
	enum idem_ttl_verdict		 v;
	long long			 ttl;
	size_t				 i;

	for (c = app->cfg.routes; c != NULL; c = c->next) {
		for (i = 0; i < app->router.nroutes; i++) {
			rt = &app->router.routes[i];
			if ((rt->flags & IDEM_ROUTE_IDEMPOTENT) &&
			    strcmp(rt->method, c->method) == 0 &&
			    strcmp(rt->pattern, c->path) == 0)
				break;
		}
		if (i == app->router.nroutes) {
			fprintf(stderr, "%s: %s:%lu: [route \"%s %s\"] names no "
			    "idempotent route of %s\n", app->name,
			    app->cfg.file ? app->cfg.file : "config", c->line,
			    c->method, c->path, app->name);
			return -1;
		}
		if (c->nexclude > 0 && !(rt->flags & IDEM_ROUTE_JSON)) {
			fprintf(stderr, "%s: %s:%lu: fingerprint_exclude: route "
			    "%s %s takes no JSON body\n", app->name,
			    app->cfg.file ? app->cfg.file : "config",
			    c->exclude_line, c->method, c->path);
			return -1;
		}
	}
	for (i = 0; i < app->router.nroutes; i++) {
		rt = &app->router.routes[i];
		if (!(rt->flags & IDEM_ROUTE_IDEMPOTENT))
			continue;
		ttl = idem_cfg_route_ttl(&app->cfg, rt->method, rt->pattern);
		v = idem_ttl_verdict(ttl);
		if (v != IDEM_TTL_OK)
			idem_log(IDEM_LOG_WARN, "config: the ttl of route %s %s "
			    "(%llds) is %s", rt->method, rt->pattern,
			    ttl / 1000, idem_ttl_reason(v));
	}
	return 0;
}

/*
 * The problem types' pages, when problem_base is a path of this app
 * ("/problems/" -> GET /problems/:slug); an absolute base is served
 * elsewhere.
 */
static int
problem_route(idem_app *app)
{
	const char	*base = idem_problem_base(app);
	char		*pat;

	if (base[0] != '/')
		return 0;
	if (asprintf(&pat, "%s:slug", base) < 0)
		return -1;
	/* Refused when the application took the path: its pages win (the
	 * router's refusal, not the application's: no idem_app_error()). */
	idem_router_add(&app->router, "GET", pat, IDEM_ROUTE_PUBLIC,
	    idem_problem_doc_handler, NULL);
	free(pat);
	return 0;
}

int
idem_app_prepare(idem_app *app)
{
	if (check_routes(app) == -1)
		return 1;
	/* The metrics endpoint, unless the application took the path or it
	 * has a socket of its own ([metrics] listen). */
	if (app->cfg.metrics_listen == NULL)
		idem_router_add(&app->router, "GET", "/metrics",
		    IDEM_ROUTE_LOCAL, idem_metrics_handler, NULL);
	idem_router_add(&app->router, "GET", "/openapi.json",
	    IDEM_ROUTE_PUBLIC, idem_openapi_handler, NULL);
	if (problem_route(app) == -1)
		return 1;
	if ((app->pool = idem_pool_new(app->cfg.conninfo, app->cfg.pool_size,
	    app->cfg.request_timeout_ms,
	    idem_cfg_prepared(&app->cfg))) == NULL) {
		idem_log(IDEM_LOG_ERROR, "out of memory");
		return 1;
	}
	if (idem_metrics_init(app) == -1)
		return 1;
	return 0;
}

int
idem_app_run(idem_app *app)
{
	int	rc;

	if ((rc = idem_app_prepare(app)) != 0)
		return rc;
	if (app->command != NULL && strcmp(app->command, "deliver") == 0)
		return deliver_command(app);
	if (app->command != NULL)
		return complete_command(app);
	return idem_runtime_run(app, app->listen != NULL ? app->listen :
	    app->cfg.listen);
}

int
idem_app_main(idem_app *app, int argc, char *argv[])
{
	int	rc;

	if ((rc = idem_app_init(app, argc, argv)) != 0)
		return rc;
	return idem_app_run(app);
}
