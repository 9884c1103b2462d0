/*
 * app.c - the application object: routes, configuration, and main().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

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
	return app;
}

void
idem_app_free(idem_app *app)
{
	if (app == NULL)
		return;
	idem_pool_free(app->pool);
	idem_router_free(&app->router);
	idem_cfg_free(&app->cfg);
	free(app->name);
	free(app);
}

int
idem_app_route(idem_app *app, const char *method, const char *pattern,
    unsigned flags, idem_handler_fn fn, void *arg)
{
	/* An idempotent route fingerprints a JSON body. */
	if (flags & IDEM_ROUTE_IDEMPOTENT)
		flags |= IDEM_ROUTE_JSON;
	return idem_router_add(&app->router, method, pattern, flags, fn, arg);
}

int
idem_app_config_key(idem_app *app, const char *section, const char *key)
{
	return idem_cfg_allow(&app->cfg, section, key);
}

const char *
idem_app_config(const idem_app *app, const char *section, const char *key)
{
	return idem_cfg_app_get(&app->cfg, section, key);
}

static void
usage(const char *name)
{
	fprintf(stderr, "usage: %s [-c config] [-l address] [-t threads]\n",
	    name);
}

int
idem_app_main(idem_app *app, int argc, char *argv[])
{
	const char	*conf = NULL, *addr = NULL;
	char		 err[512];
	long		 threads = 0;
	int		 ch, rc;

	while ((ch = getopt(argc, argv, "c:l:t:")) != -1)
		switch (ch) {
		case 'c':
			conf = optarg;
			break;
		case 'l':
			addr = optarg;
			break;
		case 't':
			threads = strtol(optarg, NULL, 10);
			if (threads < 1 || threads > 256) {
				fprintf(stderr, "%s: -t: 1 to 256\n", argv[0]);
				return 2;
			}
			break;
		default:
			usage(argv[0]);
			return 2;
		}
	if (conf != NULL &&
	    idem_cfg_load(&app->cfg, conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		return 1;
	}
	if (threads > 0)
		app->cfg.threads = (unsigned)threads;
	if (app->cfg.pool_size == 0)
		app->cfg.pool_size = app->cfg.threads;
	if (addr == NULL)
		addr = app->cfg.listen;
	idem_log_set_level(app->cfg.log_level);
	if ((app->pool = idem_pool_new(app->cfg.conninfo,
	    app->cfg.pool_size)) == NULL) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return 1;
	}
	rc = idem_runtime_run(app, addr);
	return rc;
}
