/*
 * conn.c - a request's database connection: taken from the pool on first
 * use, given back once.  The wait is kept in the request, and counted by
 * the metrics when the request is (so this file calls nothing above it).
 */
#include "private.h"

PGconn *
idem_req_conn(idem_req *req)
{
	long long	t0;

	if (req->db == NULL && !req->db_unavailable) {
		t0 = idem_now_us();
		req->db = idem_pool_acquire(req->app->pool,
		    req->app->cfg.acquire_timeout_ms, &req->stmts);
		if (req->npool_waits < sizeof(req->pool_wait_us) /
		    sizeof(req->pool_wait_us[0]))
			req->pool_wait_us[req->npool_waits++] =
			    idem_now_us() - t0;
		if (req->db == NULL)
			req->db_unavailable = 1;
	}
	return req->db;
}

void
idem_req_conn_release(idem_req *req)
{
	if (req->db != NULL)
		idem_pool_release(req->app->pool, req->db);
	req->db = NULL;
	req->stmts = NULL;
}
