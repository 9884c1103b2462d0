/*
 * refusal.c - why a setup call refused: each idem_app_*() declaration
 * that returns -1 writes its reason into the application, for
 * idem_app_error() (a program prints it and does not start).  The first
 * reason sticks: a later refusal is often its consequence (a route
 * refused, then its body declared on no route), and a program may check
 * once, before idem_app_run(), as it checks an idem_json writer once.
 */
#include <stdarg.h>
#include <stdio.h>

#include "private.h"

int
idem_app_refuse(idem_app *app, const char *fmt, ...)
{
	va_list	ap;

	if (app == NULL || app->error[0] != '\0')
		return -1;
	va_start(ap, fmt);
	vsnprintf(app->error, sizeof(app->error), fmt, ap);
	va_end(ap);
	return -1;
}

const char *
idem_app_error(const idem_app *app)
{
	return app != NULL ? app->error : "no application (idem_app_new() "
	    "failed: out of memory)";
}
