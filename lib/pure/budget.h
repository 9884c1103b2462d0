/*
 * budget.h - the process's memory budget for what connections hold
 * ([server] max_buffered): who may take how much of it.  Pure: the
 * runtime (conns.c) keeps the count and asks here before it buffers.
 */
#ifndef IDEM_BUDGET_H
#define IDEM_BUDGET_H

#include <stddef.h>

/* A holding of at most this many bytes is small: it may fill the budget. */
#define IDEM_BUDGET_SMALL	(64 * 1024)

/* What a connection would hold. */
enum idem_budget_kind {
	IDEM_BUDGET_BODY,	/* a request body, by its CONTENT_LENGTH */
	IDEM_BUDGET_ANSWER	/* an answer its peer has not taken yet, and
				 * the input read past its request */
};

enum idem_budget_verdict {
	IDEM_BUDGET_REFUSE = 0,
	IDEM_BUDGET_ADMIT = 1
};

/*
 * Whether n more bytes of kind may be held when held are held already,
 * against a budget of max.  Small holdings may fill it; a larger answer
 * only three quarters of it, a larger body only half: a flood of large
 * bodies (or of peers not reading large answers) always leaves room for
 * small requests and their answers.
 */
enum idem_budget_verdict idem_budget_admit(size_t held, size_t n,
	    enum idem_budget_kind kind, size_t max);

#endif /* IDEM_BUDGET_H */
