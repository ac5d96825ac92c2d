// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * More sessions than one ADMIN_SESSIONS reply holds: a real kvmmd with
 * 600 ring-less sessions (and the admin's own) lists as many as fit
 * (KVMM_MSG_MAX over the 112-byte entries) and says how many there are
 * in all (`total`, ABI 1.12; the cut used to be silent), and `kvmmctl
 * sessions` says on stderr how many it could not list.
 */
#include <sys/resource.h>

#include "tests/cache-common.h"

#define N 600

int main(void)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	size_t max = (KVMM_MSG_MAX - sizeof(struct kvmm_msg_hdr) -
		      sizeof(struct kvmm_sessions_reply)) /
		     sizeof(struct kvmm_session_info);
	struct rlimit rl = { 4096, 4096 };
	struct kvmm_hello h = { .size = sizeof(h),
				.abi_major = KVMM_ABI_MAJOR,
				.flags = KVMM_HELLO_F_ADMIN };
	struct kvmm_conn *admin;
	struct td_daemon d;
	static struct cc c[N];
	char cmd[512], line[256];
	int found = 0;
	FILE *f;

	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 77; /* not allowed 600 sockets here */
	t_ok(td_start(&d, (const char *[]){ NULL }));
	for (int i = 0; i < N; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		c[i].sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		t_assert(c[i].sock >= 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock);
		t_ok(connect(c[i].sock, (struct sockaddr *)&sa, sizeof(sa)));
		t_ok(cc_call(&c[i], KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0,
			     NULL, NULL));
	}
	t_ok(kc_connect_admin(d.sock, &admin));
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			sizeof(buf), NULL));
	t_assert(max < N);
	t_assert_eq(rep->nr, max);
	t_assert_eq(rep->total, N + 1);
	t_assert_eq(rep->entry_size, sizeof(struct kvmm_session_info));
	kvmm_disconnect(admin);

	td_build_path("kvmmctl", cmd, sizeof(cmd));
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd),
		 " --socket %s sessions 2>&1 >/dev/null", d.sock);
	f = popen(cmd, "r");
	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		char want[128];

		snprintf(want, sizeof(want),
			 "%zu of %d sessions listed (one reply holds no more)",
			 max, N + 1);
		found |= strstr(line, want) != NULL;
	}
	t_ok(pclose(f));
	t_assert(found);

	for (int i = 0; i < N; i++)
		close(c[i].sock);
	t_ok(td_stop(&d));
	printf("ok: %zu of %d listed\n", max, N + 1);
	return 0;
}
