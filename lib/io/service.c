/*
 * service.c - a background thread's start, stop and wait (service.h).
 */
#include "config.h"

#include <errno.h>

#include "service.h"

int
idem_service_start(struct idem_service s, void *(*fn)(void *), void *arg)
{
	pthread_condattr_t	 ca;

	pthread_mutex_init(s.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, s.clock);
	pthread_cond_init(s.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(s.th, NULL, fn, arg) != 0) {
		pthread_mutex_destroy(s.mu);
		pthread_cond_destroy(s.cv);
		return -1;
	}
	return 0;
}

int
idem_service_stop(struct idem_service s, const struct timespec *deadline)
{
	int	 done;

	pthread_mutex_lock(s.mu);
	*s.stop = 1;
	pthread_cond_broadcast(s.cv);
	while (!*s.done && (deadline == NULL ? pthread_cond_wait(s.cv, s.mu) :
	    pthread_cond_timedwait(s.cv, s.mu, deadline)) != ETIMEDOUT)
		continue;
	done = *s.done;
	pthread_mutex_unlock(s.mu);
	if (!done)
		return -1;
	pthread_join(*s.th, NULL);
	pthread_mutex_destroy(s.mu);
	pthread_cond_destroy(s.cv);
	return 0;
}

int
idem_service_wait(struct idem_service s, const struct timespec *until)
{
	int	 stop;

	pthread_mutex_lock(s.mu);
	while (!*s.stop && pthread_cond_timedwait(s.cv, s.mu, until) !=
	    ETIMEDOUT)
		continue;
	stop = *s.stop;
	pthread_mutex_unlock(s.mu);
	return stop;
}

void
idem_service_exit(struct idem_service s)
{
	pthread_mutex_lock(s.mu);
	*s.done = 1;
	pthread_cond_broadcast(s.cv);
	pthread_mutex_unlock(s.mu);
}
