/* SPDX-License-Identifier: MIT */
/*
 * vmm_log writes one line per message to stderr, "TIME LEVEL prog[pid]:
 * text", with a UTC timestamp, drops messages above the threshold set by
 * vmm_log_set_level, ends every line with exactly one newline and cuts
 * over-long messages instead of overflowing.
 */
#include <regex.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

int main(void)
{
	char buf[8192], big[3000], expect[128];
	regex_t re;
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO), lines = 0;
	ssize_t n;

	t_assert(f && saved >= 0);
	t_assert(dup2(fileno(f), STDERR_FILENO) == STDERR_FILENO);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;

	vmm_log_set_level(VMM_LOG_WARN);
	vmm_log(VMM_LOG_ERR, "first %d", 1);
	vmm_log(VMM_LOG_WARN, "second\n");
	vmm_log(VMM_LOG_INFO, "hidden info");
	vmm_log(VMM_LOG_DEBUG, "hidden debug");
	vmm_log_set_level(VMM_LOG_DEBUG);
	vmm_log(VMM_LOG_DEBUG, "third %s", "shown");
	vmm_log(VMM_LOG_INFO, "%s", big);

	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	n = pread(fileno(f), buf, sizeof(buf) - 1, 0);
	t_assert(n > 0);
	buf[n] = 0;
	t_assert(strstr(buf, "hidden") == NULL);

	snprintf(expect, sizeof(expect),
		 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
		 "[0-9]{6}Z (ERR  |WARN |INFO |DEBUG) vmm-log\\[%d\\]: .+$",
		 (int)getpid());
	t_assert(regcomp(&re, expect, REG_EXTENDED | REG_NOSUB) == 0);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (regexec(&re, line, 0, NULL, 0))
			t_fail("badly formed log line: %.120s", line);
		lines++;
		if (lines == 1)
			t_assert(strstr(line, " ERR   ") &&
				 strstr(line, ": first 1"));
		if (lines == 2)
			t_assert(strstr(line, " WARN  ") &&
				 strstr(line, ": second"));
		if (lines == 3)
			t_assert(strstr(line, "DEBUG") &&
				 strstr(line, ": third shown"));
		if (lines == 4)
			t_assert(strlen(line) < 1024 && strstr(line, "xxxx"));
	}
	regfree(&re);
	/* "second\n" must not produce an empty line: strtok hides that, so
	 * count newlines directly. */
	t_assert_eq(lines, 4);
	n = pread(fileno(f), buf, sizeof(buf) - 1, 0);
	buf[n] = 0;
	t_assert(strstr(buf, "\n\n") == NULL);
	fclose(f);
	return 0;
}
