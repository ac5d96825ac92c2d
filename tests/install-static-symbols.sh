#!/bin/bash
# The installed libkvmm.a defines no global symbol but libkvmm.so.1's
# exports (kvmm_*): an engine with a function of its own named like one
# of libkvmm's internals (here vmm_log, the vmm/ logger's name), linked
# statically as build.md shows, keeps its own and libkvmm keeps its own.
# With an archive of libkvmm's objects the engine's vmm_log replaced
# libkvmm's and its first log call (kvmm_connect) crashed the engine.
# Skips (77) without pkg-config or a static libc, or in an ASan build.
# timeout: 180
set -u
source "${KVMM_SRC:-.}/tests/lib/install-tree.sh"
command -v pkg-config >/dev/null || { echo "skip: pkg-config not installed"; exit 77; }
case "$B" in */asan) echo "skip: no static link of an ASan build"; exit 77 ;; esac
cc=${CC:-cc}
printf 'int main(void) { return 0; }\n' >"$D/t.c"
"$cc" -static "$D/t.c" -o "$D/t" 2>/dev/null || { echo "skip: no static libc"; exit 77; }

install_tree "$D/root"
lib=$D/root$LIBDIR
[ -f "$lib/libkvmm.a" ] || fail "no $lib/libkvmm.a"

# the archive's defined globals are exactly the shared library's exports
nm -g --defined-only "$lib/libkvmm.a" | awk 'NF == 3 { print $3 }' |
	sort >"$D/a.syms"
nm -D --defined-only "$lib/libkvmm.so.1" | awk 'NF == 3 { print $3 }' |
	sed 's/@.*//' | grep -v '^KVMM_1\(\.[0-9]*\)*$' | sort >"$D/so.syms"
bad=$(grep -vc '^kvmm_' "$D/a.syms")
[ "$bad" = 0 ] || { grep -v '^kvmm_' "$D/a.syms" | head; fail "libkvmm.a defines $bad globals without the kvmm_ prefix"; }
diff "$D/so.syms" "$D/a.syms" || fail "libkvmm.a and libkvmm.so.1 export different symbols"
grep -qx kvmm_connect "$D/a.syms" || fail "libkvmm.a has no kvmm_connect"
echo "libkvmm.a: $(wc -l <"$D/a.syms") global symbols, all kvmm_*, as libkvmm.so.1"

cat >"$D/engine.c" <<'C'
#include <stdio.h>
#include <kvmm/kvmm.h>

static int engine_logs;

/* the engine's own logger, named like libkvmm's internal one */
void vmm_log(const char *msg)
{
	engine_logs++;
	printf("engine vmm_log: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = argv[1] };
	struct kvmm_region_opts ro = { .size = sizeof(ro), .layers = 2,
				       .kv_heads = 2, .head_dim = 64,
				       .dtype_bytes = 2, .max_seqs = 2,
				       .max_tokens = 1024 };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;
	int err;

	vmm_log("engine starting");
	err = kvmm_connect(&co, &c);
	printf("kvmm_connect: %d\n", err);
	if (err)
		return 2;
	err = kvmm_region_create(c, &ro, &r);
	if (!err)
		err = kvmm_seq_open(r, &s);
	if (!err)
		err = kvmm_seq_extend(r, s, 700);
	printf("extend: %d, len %lld\n", err, (long long)kvmm_seq_len(r, s));
	kvmm_disconnect(c);
	printf("engine logs: %d\n", engine_logs);
	return err ? 3 : 0;
}
C
flags=$(PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D/root \
	PKG_CONFIG_LIBDIR= pkg-config --static --cflags --libs libkvmm) ||
	fail "pkg-config --static libkvmm"
"$cc" -static "$D/engine.c" -o "$D/engine" $flags 2>"$D/link.log" ||
	{ cat "$D/link.log"; fail "static link with: $flags"; }

sock=$D/kvmm.sock
"$SRC/$B/kvmmd" --foreground --backend host --socket "$sock" \
	--gpu-mem 16M --telemetry off >"$D/kvmmd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$D/kvmmd.log"; fail "kvmmd did not start"; }

# an engine log line before the connection (KVMM_LOG_LEVEL=debug makes
# libkvmm log during kvmm_connect: with the engine's vmm_log in its place
# that call crashed)
KVMM_LOG_LEVEL=debug "$D/engine" "$sock" >"$D/out" 2>"$D/err"
rc=$?
cat "$D/out"
[ $rc = 0 ] || { cat "$D/err"; fail "static engine exited $rc (139: SIGSEGV)"; }
grep -qx 'kvmm_connect: 0' "$D/out" || fail "kvmm_connect failed"
grep -qx 'extend: 0, len 700' "$D/out" || fail "extend to 700 tokens failed"
# only the engine's own call reached the engine's vmm_log
grep -qx 'engine logs: 1' "$D/out" || fail "the engine's vmm_log ran for libkvmm"
echo "ok: static engine with its own vmm_log"
