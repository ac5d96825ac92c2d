// SPDX-License-Identifier: MIT
/*
 * A pin refused for the pin quota says how many: kvmmd --pin-quota 2, a
 * session pins two of three published blocks (opts->pins 1 then 2,
 * pin_quota 2), the third is -EDQUOT with opts->pins 2 and
 * opts->pin_quota 2 filled from the refusal (ABI 1.13: the error reply
 * carries the pin reply's body), tier and expires_ns 0; re-pinning one it
 * holds still works at the quota.  kvmm_strerror(-EDQUOT) names pins as
 * well as pages (it said "memory quota of this user exceeded").  On the
 * wire, the refusal is a 40-byte struct kvmm_block_pin_reply with status
 * -EDQUOT.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/wire.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define NB 3

/* A raw session: one request, its reply's status and body (its fds,
 * a HELLO's rings, closed). */
static int raw_call(int s, uint16_t cmd, uint32_t id, const void *body,
		    size_t len, void *rep, size_t cap, size_t *rep_len)
{
	char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h = { .size = sizeof(h) + len,
				  .cmd = cmd,
				  .version = KVMM_ABI_MAJOR,
				  .id = id };
	int fds[KVMM_MSG_MAX_FDS];
	unsigned int nfds = 0;
	ssize_t n;

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), body, len);
	t_ok(kw_send(s, buf, h.size, NULL, 0, 0));
	n = kw_recv(s, buf, sizeof(buf), fds, &nfds, KVMM_MSG_MAX_FDS, 0);
	kw_close_fds(fds, nfds);
	t_assert(n >= (ssize_t)sizeof(h));
	memcpy(&h, buf, sizeof(h));
	t_assert_eq(h.id, id);
	t_assert(!(h.flags & KVMM_MSG_F_MORE_FDS));
	*rep_len = (size_t)n - sizeof(h);
	memset(rep, 0, cap);
	memcpy(rep, buf + sizeof(h), *rep_len < cap ? *rep_len : cap);
	return h.status;
}

/* Pin hashes[0..n) over a raw session; the last reply's status, body
 * length and body. */
static int raw_pins(const char *sock, const uint64_t *hashes, int n,
		    size_t *body, struct kvmm_block_pin_reply *rep)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvmm_hello hello = { .size = sizeof(hello),
				    .abi_major = KVMM_ABI_MAJOR,
				    .abi_minor = KVMM_ABI_MINOR };
	struct kvmm_hello_reply hr;
	int s, status = 0;

	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	t_assert(s >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	t_ok(connect(s, (struct sockaddr *)&sa, sizeof(sa)));
	t_ok(raw_call(s, KVMM_CMD_HELLO, 1, &hello, sizeof(hello), &hr,
		      sizeof(hr), body));
	for (int i = 0; i < n; i++) {
		struct kvmm_block_pin bp = { .size = sizeof(bp),
					     .hash = hashes[i] };

		status = raw_call(s, KVMM_CMD_BLOCK_PIN, 2 + i, &bp, sizeof(bp),
				  rep, sizeof(*rep), body);
	}
	close(s);
	return status;
}

int main(void)
{
	const char *args[] = { "--pin-quota", "2", NULL };
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_block_pin_reply rep;
	struct kvmm_pin_opts o;
	struct td_daemon d;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq, tokens[NB * TR_TPB];
	uint64_t seed, h[NB];
	size_t body;
	int err, status;

	td_start_ok(&d, args);
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, NB * TR_TPB));
	for (int i = 0; i < NB * TR_TPB; i++)
		tokens[i] = 11 * i + 2;
	t_ok(kvmm_region_hash_seed(r, "pinq", &seed));
	err = kvmm_hash_chain(seed, 0, tokens, NB * TR_TPB, TR_TPB, h, NB);
	if (err == -ENOTSUP)
		for (int i = 0; i < NB; i++)
			h[i] = 0x9100 + i; /* no libxxhash: any hashes */
	else
		t_assert_eq(err, NB);
	t_assert_eq(kvmm_block_publish(r, seq, 0, NB, 0, h), NB);

	for (int i = 0; i < 2; i++) {
		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		t_ok(kvmm_block_pin(c, h[i], &o));
		t_assert_eq(o.pins, i + 1);
		t_assert_eq(o.pin_quota, 2);
	}
	memset(&o, 0xff, sizeof(o));
	o.size = sizeof(o);
	o.flags = 0;
	o.ttl_ns = 0;
	o.priority = 0;
	t_assert_eq(kvmm_block_pin(c, h[2], &o), -EDQUOT);
	t_assert_eq(o.pins, 2);
	t_assert_eq(o.pin_quota, 2);
	t_assert_eq(o.tier, 0);
	t_assert_eq(o.expires_ns, 0);
	/* a record it holds is replaced, not counted again */
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	t_ok(kvmm_block_pin(c, h[0], &o));
	t_assert_eq(o.pins, 2);

	printf("kvmm_strerror(-EDQUOT): %s\n", kvmm_strerror(-EDQUOT));
	t_assert(strstr(kvmm_strerror(-EDQUOT), "pins"));
	t_assert(strstr(kvmm_strerror(-EDQUOT), "pages"));

	/* the wire, from a session of its own (the quota is per session):
	 * two pins, then the refusal with the pin reply's body */
	kvmm_disconnect(c);
	t_assert_eq(raw_pins(d.sock, h, 2, &body, &rep), 0);
	t_assert_eq(body, sizeof(rep));
	t_assert_eq(rep.pins, 2);
	status = raw_pins(d.sock, h, 3, &body, &rep);
	t_assert_eq(status, -EDQUOT);
	t_assert_eq(body, 40);
	t_assert_eq(rep.size, 40);
	t_assert_eq(rep.pins, 2);
	t_assert_eq(rep.pin_quota, 2);
	t_assert_eq(rep.tier, 0);
	t_assert_eq(rep.expires_ns, 0);
	printf("ok: -EDQUOT says pins 2 of 2\n");
	t_ok(td_stop(&d));
	return T_PASS;
}
