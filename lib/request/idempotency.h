/*
 * idempotency.h - the exactly-once middleware's own state and entry
 * points.  struct idem_txn is embedded in every idem_req (so a request on
 * the stack needs no allocation) but only idempotency.c reads or writes it.
 */
#ifndef IDEM_IDEMPOTENCY_H
#define IDEM_IDEMPOTENCY_H

#include <stdint.h>

#include "internal.h"
#include "lease.h"

/* A statement the handler deferred to the commit flight. */
struct idem_defer {
	char		*sql;
	int		 n;
	char		**vals;
};

struct idem_txn {
	int			 in_txn;	/* under the middleware */
	int			 txn_open;	/* a transaction is open on db */
	int			 phased;
	int			 resumed;	/* lease taken over */
	int64_t			 record_id;	/* idempotency_keys.id */
	long long		 key_expires;	/* its expires_at, Unix s; 0 */
	char			 recovery_point[64];
	char			 lease_token[40];	/* phased: our lease */
	int			 hb;	/* its heartbeat handle; 0: none */
	struct idem_route_limits limits;	/* the route's */
	long long		 started_us;	/* the handler's start */
	long long		 phase_started_us;	/* the phase's */
	const char		*retry_later;	/* why a 5xx is a 503 */
	long long		 lease_sent_us;	/* our last claim or renewal
						 * of the lease was sent */
	int			 lease_doubt;	/* not proven: stopped */
	size_t			 ndefer;
	struct idem_defer	 defer[4];
};

/* Run req's handler exactly once for its key. */
void	idem_idempotent_run(idem_req *req);
/* Is req running a phased route under the middleware?  (phases.c) */
int	idem_txn_phased(const idem_req *req);
/*
 * May req still act on its lease (phased, under the middleware)?  Proven
 * from when its last claim or renewal, its own or the heartbeat's, was
 * sent (lease.h).  Not proven: the request is marked stopped (it answers
 * 503 and releases its lease), logged once, and IDEM_LEASE_DOUBTFUL is
 * returned from then on.  Requests without a lease: IDEM_LEASE_SURE.
 */
enum idem_lease_state idem_req_lease_check(idem_req *req);
/* How long req's lease is still proven, in microseconds (<= 0: not; a
 * request without a lease: LLONG_MAX).  No side effect. */
long long idem_req_lease_left_us(const idem_req *req);
/* Free the statements a handler deferred and did not commit. */
void	idem_defer_free(idem_req *req);

#endif /* IDEM_IDEMPOTENCY_H */
