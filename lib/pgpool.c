/*
 * pgpool.c - a fixed pool of libpq connections shared by all worker
 * threads.  Acquiring waits a bounded time; every connection handed out is
 * healthy and outside any transaction, and a broken one is re-established
 * on the next acquire, so the pool recovers from a database restart.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "private.h"

struct idem_pool {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	char		*conninfo;
	unsigned	 size;
	unsigned	 nbusy;
	char		 setup[160];	/* run on every new connection */
	PGconn		**conns;
	unsigned char	*busy;
};

int64_t
idem_pg_int8(const PGresult *r, int row, int col)
{
	const unsigned char	*p;
	uint64_t		 v = 0;
	int			 i;

	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	p = (const unsigned char *)PQgetvalue(r, row, col);
	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static void
notice(void *arg, const char *msg)
{
	(void)arg;
	idem_log(IDEM_LOG_DEBUG, "db: %s", msg);
}

PGconn *
idem_db_connect(const char *conninfo, long long timeout_ms)
{
	const char	*kw[] = { "connect_timeout", "application_name",
	    "dbname", NULL };
	const char	*val[4];
	char		 tmo[32];
	long long	 s;

	/* libpq's connect_timeout is whole seconds, at least 2. */
	s = (timeout_ms + 999) / 1000;
	snprintf(tmo, sizeof(tmo), "%lld", s < 2 ? 2 : s);
	val[0] = tmo;
	val[1] = "idem";
	val[2] = conninfo;	/* NULL: libpq's PG* environment */
	val[3] = NULL;
	PGconn		*db;

	/* Later keywords win, so a connect_timeout in conninfo is kept. */
	db = PQconnectdbParams(kw, val, 1);
	/* Server notices are for operators, not for stdout. */
	if (db != NULL)
		PQsetNoticeProcessor(db, notice, NULL);
	return db;
}

struct idem_pool *
idem_pool_new(const char *conninfo, unsigned size, long long timeout_ms)
{
	struct idem_pool	*p;
	pthread_condattr_t	 ca;

	if (size == 0 || (p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->size = size;
	p->conns = calloc(size, sizeof(*p->conns));
	p->busy = calloc(size, 1);
	if (conninfo != NULL)
		p->conninfo = strdup(conninfo);
	if (p->conns == NULL || p->busy == NULL ||
	    (conninfo != NULL && p->conninfo == NULL)) {
		free(p->conns);
		free(p->busy);
		free(p->conninfo);
		free(p);
		return NULL;
	}
	/* No statement, nor a transaction left idle by a stuck or killed
	 * handler, outlives the request timeout. */
	snprintf(p->setup, sizeof(p->setup), "SET statement_timeout = %lld; "
	    "SET idle_in_transaction_session_timeout = %lld", timeout_ms,
	    timeout_ms);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	return p;
}

/*
 * Notice a connection the server closed while it sat idle in the pool: a
 * terminated backend sends an error, then EOF, and libpq marks the
 * connection bad only when it reads the EOF, so read until nothing is left.
 */
static void
pool_check(PGconn *db)
{
	struct pollfd	pfd;
	int		i;

	for (i = 0; i < 8 && PQstatus(db) == CONNECTION_OK; i++) {
		pfd.fd = PQsocket(db);
		pfd.events = POLLIN;
		if (pfd.fd < 0 || poll(&pfd, 1, 0) <= 0)
			break;
		if (PQconsumeInput(db) == 0)
			break;
		while (PQisBusy(db) == 0) {
			PGresult *r = PQgetResult(db);
			if (r == NULL)
				break;
			PQclear(r);
		}
	}
}

static void
pool_setup(struct idem_pool *p, PGconn *db)
{
	if (db != NULL && PQstatus(db) == CONNECTION_OK)
		PQclear(PQexec(db, p->setup));
}

PGconn *
idem_pool_acquire(struct idem_pool *p, long long timeout_ms)
{
	struct timespec	 dl;
	unsigned	 i;
	PGconn		*db;

	idem_deadline(CLOCK_MONOTONIC, timeout_ms, &dl);
	pthread_mutex_lock(&p->mu);
	while (p->nbusy == p->size)
		if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) == ETIMEDOUT &&
		    p->nbusy == p->size) {
			pthread_mutex_unlock(&p->mu);
			idem_log(IDEM_LOG_WARN, "pool: no connection free "
			    "within %lld ms", timeout_ms);
			return NULL;
		}
	/* Prefer a slot that is already connected. */
	for (i = 0; i < p->size; i++)
		if (!p->busy[i] && p->conns[i] != NULL)
			break;
	if (i == p->size)
		for (i = 0; i < p->size; i++)
			if (!p->busy[i])
				break;
	p->busy[i] = 1;
	p->nbusy++;
	pthread_mutex_unlock(&p->mu);

	/* Connecting happens outside the lock: it can take a while. */
	if (p->conns[i] == NULL) {
		p->conns[i] = idem_db_connect(p->conninfo, timeout_ms);
		pool_setup(p, p->conns[i]);
	} else {
		pool_check(p->conns[i]);
		if (PQstatus(p->conns[i]) != CONNECTION_OK) {
			PQreset(p->conns[i]);
			pool_setup(p, p->conns[i]);
		}
	}
	db = p->conns[i];
	if (db != NULL && PQstatus(db) == CONNECTION_OK &&
	    PQtransactionStatus(db) == PQTRANS_IDLE)
		return db;
	idem_log(IDEM_LOG_ERROR, "pool: cannot connect: %s",
	    db ? PQerrorMessage(db) : "out of memory");
	pthread_mutex_lock(&p->mu);
	p->busy[i] = 0;
	p->nbusy--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int
idem_db_broken(PGconn *db)
{
	/* A server that ended the session has usually closed the socket
	 * too, which libpq only notices when it reads. */
	if (db == NULL || PQstatus(db) != CONNECTION_OK)
		return 1;
	if (PQconsumeInput(db) == 0)
		return 1;
	return PQstatus(db) != CONNECTION_OK;
}

void
idem_pool_release(struct idem_pool *p, PGconn *db)
{
	unsigned	 i;
	PGresult	*r;

	if (db == NULL)
		return;
	if (PQstatus(db) == CONNECTION_OK) {
		/* Drain anything a failed handler left unread. */
		while ((r = PQgetResult(db)) != NULL)
			PQclear(r);
		if (PQpipelineStatus(db) != PQ_PIPELINE_OFF &&
		    PQexitPipelineMode(db) == 0)
			PQreset(db);
		switch (PQtransactionStatus(db)) {
		case PQTRANS_IDLE:
			break;
		case PQTRANS_INTRANS:
		case PQTRANS_INERROR:
			PQclear(PQexec(db, "ROLLBACK"));
			break;
		default:
			PQreset(db);
			break;
		}
	}
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->size; i++)
		if (p->conns[i] == db && p->busy[i]) {
			p->busy[i] = 0;
			p->nbusy--;
			break;
		}
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
idem_pool_counts(struct idem_pool *p, unsigned *idle, unsigned *busy)
{
	pthread_mutex_lock(&p->mu);
	*busy = p->nbusy;
	*idle = p->size - p->nbusy;
	pthread_mutex_unlock(&p->mu);
}

void
idem_pool_free(struct idem_pool *p)
{
	unsigned	i;

	if (p == NULL)
		return;
	for (i = 0; i < p->size; i++)
		if (p->conns[i] != NULL)
			PQfinish(p->conns[i]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->conns);
	free(p->busy);
	free(p->conninfo);
	free(p);
}
