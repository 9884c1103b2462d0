/*
 * pgtimed.c - a session and a statement that cannot hang their caller: a
 * connection made and one statement run without blocking, each within a
 * deadline of its own, and a statement given up on (cancelled in the
 * background, its connection cut).  For the heartbeat, whose renewals must
 * fail in time rather than stall, and for an owner releasing a lease it
 * can no longer prove it holds.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "private.h"

/* Wait until db's socket is ready for events, or deadline_us: 1 ready,
 * 0 late, -1 failed. */
static int
wait_socket(PGconn *db, short events, long long deadline_us)
{
	struct pollfd	pfd;
	long long	left;
	int		n;

	if ((pfd.fd = PQsocket(db)) < 0)
		return -1;
	pfd.events = events;
	for (;;) {
		if ((left = deadline_us - idem_now_us()) <= 0)
			return 0;
		n = poll(&pfd, 1, (int)((left + 999) / 1000));
		if (n > 0)
			return 1;
		if (n == 0)
			continue;	/* rechecked against the deadline */
		if (errno != EINTR)
			return -1;
	}
}

PGconn *
idem_db_connect_until(const char *conninfo, const char *appname,
    long long lease_ms, long long deadline_us)
{
	const char	*kw[] = { "keepalives", "keepalives_idle",
	    "keepalives_interval", "keepalives_count", "tcp_user_timeout",
	    "dbname", "application_name", NULL };
	const char	*val[8];
	char		 idle[24], user_tmo[24];
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	PGconn		*db;
	int		 w;

	/* A peer that stopped answering is noticed by the kernel within a
	 * lease: probes after a third of it idle, and unacknowledged data
	 * for a whole lease ends the connection.  conninfo may say
	 * otherwise; the name is ours, so that operators can find it. */
	snprintf(idle, sizeof(idle), "%lld", lease_ms / 3000 > 0 ?
	    lease_ms / 3000 : 1);
	snprintf(user_tmo, sizeof(user_tmo), "%lld", lease_ms);
	val[0] = "1";
	val[1] = idle;
	val[2] = "1";
	val[3] = "3";
	val[4] = user_tmo;
	val[5] = conninfo;	/* NULL: libpq's PG* environment */
	val[6] = appname;
	val[7] = NULL;
	if ((db = PQconnectStartParams(kw, val, 1)) == NULL)
		return NULL;
	while (PQstatus(db) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
	    st != PGRES_POLLING_FAILED) {
		w = wait_socket(db, st == PGRES_POLLING_READING ? POLLIN :
		    POLLOUT, deadline_us);
		if (w <= 0) {
			idem_log(IDEM_LOG_WARN, "db: no session for '%s' "
			    "within its deadline (%s)", appname ? appname :
			    "idem", w == 0 ? "late" : "poll failed");
			PQfinish(db);
			return NULL;
		}
		st = PQconnectPoll(db);
	}
	if (PQstatus(db) != CONNECTION_OK) {
		idem_log(IDEM_LOG_WARN, "db: cannot connect: %s",
		    PQerrorMessage(db));
		PQfinish(db);
		return NULL;
	}
	return db;
}

/* Read every result of the statement sent; the first kept in *res. */
static enum idem_timed
collect(PGconn *db, long long deadline_us, PGresult **res)
{
	PGresult	*r;
	int		 w;

	for (;;) {
		while (PQisBusy(db)) {
			if ((w = wait_socket(db, POLLIN, deadline_us)) <= 0)
				return w == 0 ? IDEM_TIMED_LATE :
				    IDEM_TIMED_FAILED;
			if (PQconsumeInput(db) == 0)
				return IDEM_TIMED_FAILED;
		}
		if ((r = PQgetResult(db)) == NULL)
			break;
		if (*res == NULL)
			*res = r;
		else
			PQclear(r);
	}
	return *res != NULL && (PQresultStatus(*res) == PGRES_TUPLES_OK ||
	    PQresultStatus(*res) == PGRES_COMMAND_OK) ? IDEM_TIMED_OK :
	    IDEM_TIMED_FAILED;
}

enum idem_timed
idem_db_exec_until(PGconn *db, const char *sql, int n,
    const char *const *vals, long long deadline_us, PGresult **res)
{
	enum idem_timed	 rc = IDEM_TIMED_FAILED;
	int		 f, w;

	*res = NULL;
	if (db == NULL || PQsetnonblocking(db, 1) != 0)
		return IDEM_TIMED_FAILED;
	if (PQsendQueryParams(db, sql, n, NULL, vals, NULL, NULL, 0) == 0)
		goto out;
	while ((f = PQflush(db)) == 1) {
		if ((w = wait_socket(db, POLLOUT, deadline_us)) <= 0) {
			rc = w == 0 ? IDEM_TIMED_LATE : IDEM_TIMED_FAILED;
			goto out;
		}
	}
	if (f == 0)
		rc = collect(db, deadline_us, res);
out:
	PQsetnonblocking(db, 0);
	return rc;
}

/* The cancel request opens a connection of its own to the server, which
 * libpq cannot bound: it is sent from a thread nobody waits for. */
static void *
cancel_main(void *arg)
{
	PGcancel	*c = arg;
	char		 err[256];

	if (PQcancel(c, err, sizeof(err)) == 0)
		idem_log(IDEM_LOG_WARN, "db: cancel request failed: %s", err);
	PQfreeCancel(c);
	return NULL;
}

void
idem_db_abandon(PGconn *db)
{
	pthread_attr_t	 a;
	pthread_t	 th;
	PGcancel	*c;

	if (db == NULL)
		return;
	/* The server stops the statement when it can (a late renewal would
	 * be harmless, being fenced, but holds row locks meanwhile). */
	if ((c = PQgetCancel(db)) != NULL) {
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &a, cancel_main, c) != 0) {
			idem_log(IDEM_LOG_WARN, "db: no thread to send a cancel "
			    "request");
			PQfreeCancel(c);
		}
		pthread_attr_destroy(&a);
	}
	/* Every later use of db fails at once, instead of waiting on a
	 * peer that does not answer; its owner replaces it. */
	if (PQsocket(db) >= 0)
		shutdown(PQsocket(db), SHUT_RDWR);
}
