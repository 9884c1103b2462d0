/*
 * acquirer.h - the card acquirer client of the payments app.
 */
#ifndef ACQUIRER_H
#define ACQUIRER_H

struct acquirer_result {
	int	http_status;
	int	approved;	/* else declined */
	char	charge[128];
};

/* POST url/charges, each send and receive bounded by timeout_ms; 0 with
 * res filled, or -1 (no usable answer). */
int	acquirer_charge(const char *url, const char *key, const char *payment,
	    long long amount, const char *currency, long long timeout_ms,
	    struct acquirer_result *res);

#endif
