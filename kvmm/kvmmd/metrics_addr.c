// SPDX-License-Identifier: MIT
/*
 * --metrics-listen's address: "PORT", "IPV4:PORT", "[IPV6]:PORT" or
 * "localhost:PORT" into a sockaddr to bind, and a bound address back into
 * the text the log prints.  Used by the option parser (a bad address is a
 * usage error before anything starts) and by kd_metrics_start().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "kvmm/kvmmd/metrics_http_priv.h"

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int kd_metrics_parse_listen(const char *s, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	char host[64];
	const char *port, *colon;
	uint16_t p;

	memset(ss, 0, sizeof(*ss));
	if (!s || !*s)
		goto bad;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':' ||
		    (size_t)(end - s - 1) >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, end - s - 1);
		host[end - s - 1] = '\0';
		if (parse_port(end + 2, &p) ||
		    inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			goto bad;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(p);
		*len = sizeof(*in6);
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon) {
		strcpy(host, "127.0.0.1");
		port = s;
	} else {
		if (colon == s || (size_t)(colon - s) >= sizeof(host))
			goto bad;
		memcpy(host, s, colon - s);
		host[colon - s] = '\0';
		port = colon + 1;
		if (!strcmp(host, "localhost"))
			strcpy(host, "127.0.0.1");
	}
	if (parse_port(port, &p) ||
	    inet_pton(AF_INET, host, &in4->sin_addr) != 1)
		goto bad;
	in4->sin_family = AF_INET;
	in4->sin_port = htons(p);
	*len = sizeof(*in4);
	return 0;
bad:
	fprintf(stderr,
		"kvmmd: --metrics-listen: '%s' is not [HOST:]PORT (PORT alone binds 127.0.0.1; HOST an IPv4 address, localhost or [IPv6])\n",
		s ? s : "");
	return -EINVAL;
}

/* "127.0.0.1:9400" or "[::1]:9400" */
void kd_metrics_addr_string(const struct sockaddr_storage *ss, char *buf,
			    size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in4 = (const void *)ss;

		inet_ntop(AF_INET, &in4->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in4->sin_port));
	}
}
