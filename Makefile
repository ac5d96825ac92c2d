# kvmm — top-level build.
#
#   make              build everything into build/
#   make check        install missing packages, build, run every test
#   make clean-test-dirs  remove the temporary directories of test suites
#                     that no longer run (never rm -rf /tmp/kvmm-run.*)
#   make demo         the main job: tinylm clients on a real kvmmd
#   make bench        build and run the benchmarks (each prints a ratio)
#   make deps         install the Debian packages the build and tests need
#   make install      build and install what is installed, nothing else:
#                     PREFIX=/usr/local DESTDIR= (PYTHONDIR= for the
#                     Python package kvmm, SYSCONFDIR= SYSTEMDUNITDIR= for
#                     kvmmd.conf, kvmmd.service and kvmmd@.service, one
#                     per GPU)
#   make uninstall    the same variables: remove what install put there
#   make format       clang-format every C source in place
#   make SANITIZE=1   ASan+UBSan build in build/asan (check works too)
#   make analyze      gcc -fanalyzer (build/analyze), clang --analyze and
#                     cppcheck over the daemon, libraries and tools; fails
#                     on a finding tools/analyze.baseline does not list
#   make analyze-tests  the same over those and the tests and benchmarks
#                     (tools/analyze-tests.baseline too)
#   make WERROR=1     warnings are errors (CI)
#   make V=1          show the commands
#
# Each top-level directory contributes a build.mk fragment; this file only
# holds the shared rules.  Optional parts (CUDA, BPF, io_uring, NUMA) are
# probed by tools/configure.sh and turned off with one line when missing.

.DEFAULT_GOAL := all
KVMM_VERSION := 0.1.0
KVMM_ABI_MAJOR := 1

SANITIZE ?= 0
ANALYZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build/asan
else ifeq ($(ANALYZE),1)
BUILD ?= build/analyze
else
BUILD ?= build
endif
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/kvmm
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
# The Python binding (the package kvmm/python/kvmm/): where Debian's
# python3 looks, /usr/lib/python3/dist-packages for PREFIX=/usr, else
# PREFIX/lib/python3.X/dist-packages (Documentation/python.md).
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2)
endif

# Probe once per build directory; make restarts after creating it.
$(BUILD)/config.mk $(BUILD)/config.h &: tools/configure.sh
	$(Q)CC="$(CC)" tools/configure.sh $(BUILD)
	$(Q)touch $(BUILD)/config.mk
include $(BUILD)/config.mk

WARN := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARN += -Werror
endif
CPPFLAGS := -D_GNU_SOURCE -I. -Ikvmm/include -I$(BUILD) \
	-include $(BUILD)/config.h -DKVMM_VERSION='"$(KVMM_VERSION)"'
CFLAGS := -std=gnu11 -O2 -g -fPIC -pthread $(WARN) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(EXTRA_LDFLAGS)
LDLIBS := -ldl -lm -lrt
ifeq ($(SANITIZE),1)
CFLAGS += -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# make analyze's objects: each compile's findings kept in OBJECT.warn,
# and clang's analyzer's (where clang is installed) in OBJECT.clang
ANALYZE_CC :=
ifeq ($(ANALYZE),1)
CFLAGS += -fanalyzer
ANALYZE_CC := tools/analyze-cc.sh
export KVMM_ANALYZE_CLANG := $(shell command -v clang 2>/dev/null)
endif

# $(call objs,SOURCES) -> object paths under $(BUILD)/obj
objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# $(call archive_rule,ARCHIVE,SOURCES): an ar archive from sources.
define archive_rule
$(1): $(call objs,$(2))
	@mkdir -p $$(@D)
	$$(call msg,AR,$$@)
	$(Q)rm -f $$@ && ar rcs $$@ $$^
endef

# $(call program_rule,BINARY,SOURCES): a program linked against every
# internal archive.
define program_rule
$(1): $(call objs,$(2)) $$(ARCHIVES)
	@mkdir -p $$(@D)
	$$(call msg,LD,$$@)
	$(Q)$$(CC) $$(LDFLAGS) -o $$@ $(call objs,$(2)) $$(LINK_GROUP)
endef

# Fragments append their archives here; tests, benches and tools link the
# whole group so any of them can use any internal module.
ARCHIVES :=
# The test helpers (tests/lib): only the tests and benches that link them
# set it (a target-specific value) and depend on it, so `make install`
# does not build them.
TESTHELP_LIB :=
PROGRAMS :=
SCRIPTS_TO_CHECK :=

include vmm/build.mk
include kvmm/build.mk
include ebpf/build.mk
include kernels/build.mk
include tests/build.mk
include tools/build.mk
include bench/build.mk

LINK_GROUP = -Wl,--start-group $(ARCHIVES) $(TESTHELP_LIB) -Wl,--end-group \
	$(EXTRA_LIBS) $(LDLIBS)
# Programs defined before a later fragment added its archive still link it.
$(filter-out %.a %.so,$(PROGRAMS)): $(ARCHIVES)

# The install paths a program needs at run time (DATADIR's profiles,
# LIBDIR's libkvmm for BPF telemetry) come from this header, which only
# the sources that use them include: it is rewritten only when a value
# changes, so `make install PREFIX=/usr` after a plain `make` rebuilds
# exactly the objects (through their .d files) and the .pc that hold them.
$(BUILD)/install_paths.h: FORCE
	@mkdir -p $(@D)
	$(Q)printf '%s\n' '/* generated by the Makefile from make install'"'"'s paths */' \
		'#define KVMM_PREFIX "$(PREFIX)"' '#define KVMM_LIBDIR "$(LIBDIR)"' \
		'#define KVMM_INCLUDEDIR "$(INCLUDEDIR)"' \
		'#define KVMM_PROFILE_DIR_DEFAULT "$(DATADIR)/profiles"' >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

FORCE:

# order-only: the header must exist before a first compile includes it
$(BUILD)/obj/%.o: %.c $(BUILD)/config.h | $(BUILD)/install_paths.h
	@mkdir -p $(@D)
	$(call msg,CC,$<)
	$(Q)$(ANALYZE_CC) $(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

.PHONY: all check clean-test-dirs demo bench deps install uninstall \
	format format-check clean configure analyze analyze-objs \
	analyze-tests analyze-test-objs \
	libkvmm-sources FORCE

all: $(PROGRAMS)

configure:
	$(Q)rm -f $(BUILD)/config.mk
	$(Q)CC="$(CC)" tools/configure.sh $(BUILD)

# check and demo install missing packages first, then build in a sub-make
# so features are probed again after an install.
check:
	$(Q)tools/deps.sh --ensure
	$(Q)$(MAKE) --no-print-directory all
	$(Q)KVMM_BUILD=$(BUILD) tests/run.sh $(T)

# Only suites whose tests/run.sh has ended: a running one holds its lock.
clean-test-dirs:
	$(Q)tests/runner/clean-dirs.sh

demo:
	$(Q)tools/deps.sh --ensure
	$(Q)$(MAKE) --no-print-directory all
	$(Q)KVMM_BUILD=$(BUILD) tools/demo.sh

bench: all
	$(Q)KVMM_BUILD=$(BUILD) bench/run.sh $(B)

deps:
	$(Q)tools/deps.sh

# What make analyze reads: the daemon, the libraries and the tools that
# are built everywhere (kernels/gpu and kvmm-calibrate need nvcc).
ANALYZE_SRCS = $(VMM_SRCS) $(KVMMD_SRCS) kvmm/kvmmd/main.c $(LIBKVMM_SRCS) \
	$(POLICY_SRCS) $(EBPF_SRCS) $(KERNELS_SRCS) \
	$(foreach d,$(filter-out tools/kvmm-calibrate,$(TOOL_DIRS)),$(wildcard $(d)/*.c))
ANALYZE_SRCS := $(sort $(ANALYZE_SRCS))
# What make analyze-tests reads besides: every test (tests/NAME.c and its
# tests/NAME/*.c), the tests' helpers (tests/lib), the benchmarks, and
# the test programs built by rules of their own (the LD_PRELOAD shims,
# the runner's reaper, the ThreadSanitizer programs, and the mock
# libcuda where cuda.h is there), each compiled here as an object with
# the build's flags (Documentation/build.md, "Static analysis", says why
# it is a target of its own).
ANALYZE_TEST_SRCS = $(foreach t,$(TEST_SRCS),$(test_parts)) $(TESTLIB_SRCS) \
	$(BENCH_SRCS) $(SHIM_SRCS) tests/runner/reaper.c \
	$(wildcard tests/tsan/*.c)
# the shims' and the reaper's own preprocessor flags (tests/build.mk's)
$(call objs,$(SHIM_SRCS)): CPPFLAGS :=
$(call objs,tests/runner/reaper.c): CPPFLAGS := -D_GNU_SOURCE
ifeq ($(HAVE_CUDA_H),1)
ANALYZE_TEST_SRCS += $(wildcard tests/vmm-cuda-mock/*.c)
$(call objs,$(wildcard tests/vmm-cuda-mock/*.c)): CPPFLAGS := -D_GNU_SOURCE \
	-I$(CUDA_HOME)/include
endif
ANALYZE_TEST_SRCS := $(sort $(ANALYZE_TEST_SRCS))

analyze-objs: $(call objs,$(ANALYZE_SRCS))
analyze-test-objs: $(call objs,$(ANALYZE_TEST_SRCS))

ifeq ($(ANALYZE),1)
# An object is analysed again when the analysis changes: clang installed
# or upgraded (its version is in the stamp, rewritten only when it
# changes), or tools/analyze-cc.sh's checkers
$(BUILD)/analyze-clang.stamp: FORCE
	@mkdir -p $(@D)
	$(Q){ [ -n "$(KVMM_ANALYZE_CLANG)" ] && \
		"$(KVMM_ANALYZE_CLANG)" --version | head -1 || echo none; } >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(call objs,$(ANALYZE_SRCS) $(ANALYZE_TEST_SRCS)): tools/analyze-cc.sh \
	$(BUILD)/analyze-clang.stamp
endif

# a sub-make for the objects: ANALYZE=1 picks build/analyze and the flags
analyze:
	$(Q)tools/deps.sh --ensure
	$(Q)$(MAKE) --no-print-directory ANALYZE=1 analyze-objs
	$(Q)KVMM_BUILD=build/analyze tools/analyze.sh \
		--gcc $(ANALYZE_SRCS) --clang $(ANALYZE_SRCS) \
		--cppcheck $(ANALYZE_SRCS)

# the same over the code and the tests together, against both baselines
# (the tests' findings in tools/analyze-tests.baseline)
analyze-tests:
	$(Q)tools/deps.sh --ensure
	$(Q)$(MAKE) --no-print-directory ANALYZE=1 analyze-objs analyze-test-objs
	$(Q)KVMM_BUILD=build/analyze tools/analyze.sh \
		--baseline tools/analyze.baseline \
		--baseline tools/analyze-tests.baseline \
		--gcc $(ANALYZE_SRCS) $(ANALYZE_TEST_SRCS) \
		--clang $(ANALYZE_SRCS) $(ANALYZE_TEST_SRCS) \
		--cppcheck $(ANALYZE_SRCS) $(ANALYZE_TEST_SRCS)

C_SOURCES = $(shell git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || \
	find kvmm vmm ebpf kernels tools tests bench -name '*.[ch]')

format:
	$(Q)clang-format -i $(C_SOURCES)

format-check:
	$(Q)clang-format --dry-run --Werror $(C_SOURCES)

# Libs.private: what a static link of libkvmm.a needs besides it, the
# optional libraries its objects use as configured (LIBKVMM_LIBS, e.g.
# libxxhash for block hashing) and libc's parts.
$(BUILD)/libkvmm.pc: $(BUILD)/install_paths.h $(BUILD)/config.mk Makefile
	@mkdir -p $(@D)
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
		'includedir=$(INCLUDEDIR)' '' 'Name: libkvmm' \
		'Description: client library for the kvmm KV-cache memory manager' \
		'Version: $(KVMM_VERSION)' 'Libs: -L$${libdir} -lkvmm' \
		'Libs.private: $(strip $(LIBKVMM_LIBS) -lm -lpthread -ldl -lrt)' \
		'Cflags: -I$${includedir}' >$@

# Only what it installs, so `make install` alone builds no test, bench or
# GPU test program (a packager's make && make install builds them once,
# with make).
INSTALL_BUILT := $(INSTALL_BINS) $(BUILD)/libkvmm.a \
	$(BUILD)/libkvmm.so.$(KVMM_ABI_MAJOR) $(BUILD)/libkvmm.pc

install: $(INSTALL_BUILT)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR)/kvmm/uapi $(DESTDIR)$(DATADIR)/profiles
	install -m 755 $(INSTALL_BINS) $(DESTDIR)$(BINDIR)
	install -m 644 $(BUILD)/libkvmm.a $(DESTDIR)$(LIBDIR)
	install -m 755 $(BUILD)/libkvmm.so.$(KVMM_ABI_MAJOR) $(DESTDIR)$(LIBDIR)
	ln -sf libkvmm.so.$(KVMM_ABI_MAJOR) $(DESTDIR)$(LIBDIR)/libkvmm.so
	install -m 644 kvmm/include/kvmm/*.h $(DESTDIR)$(INCLUDEDIR)/kvmm
	install -m 644 kvmm/include/kvmm/uapi/*.h $(DESTDIR)$(INCLUDEDIR)/kvmm/uapi
	install -m 644 $(BUILD)/libkvmm.pc $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 kvmm/policy/profiles/*.profile $(DESTDIR)$(DATADIR)/profiles
	@# the package, whose library.py learns where libkvmm is installed
	install -d $(DESTDIR)$(PYTHONDIR)/kvmm
	install -m 644 kvmm/python/kvmm/*.py $(DESTDIR)$(PYTHONDIR)/kvmm
	sed 's|^_INSTALLED_LIB = None$$|_INSTALLED_LIB = "$(LIBDIR)/libkvmm.so.$(KVMM_ABI_MAJOR)"|' \
		kvmm/python/kvmm/library.py >$(DESTDIR)$(PYTHONDIR)/kvmm/library.py
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/kvmm
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		kvmm/kvmmd/systemd/kvmmd.service.in \
		>$(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd.service
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		kvmm/kvmmd/systemd/kvmmd@.service.in \
		>$(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd@.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd@.service
	@# an operator's configuration is never overwritten
	[ -e $(DESTDIR)$(SYSCONFDIR)/kvmm/kvmmd.conf ] || \
		install -m 644 kvmm/kvmmd/systemd/kvmmd.conf \
			$(DESTDIR)$(SYSCONFDIR)/kvmm/kvmmd.conf

# What install put there, and the directories it made if they are empty
# now; an operator's kvmmd.conf stays (as install never overwrites it).
# PYTHONDIR/kvmm.py is what an install before the package put there.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_BINS))) \
		$(DESTDIR)$(LIBDIR)/libkvmm.a \
		$(DESTDIR)$(LIBDIR)/libkvmm.so.$(KVMM_ABI_MAJOR) \
		$(DESTDIR)$(LIBDIR)/libkvmm.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/libkvmm.pc \
		$(addprefix $(DESTDIR)$(INCLUDEDIR)/kvmm/,$(notdir $(wildcard kvmm/include/kvmm/*.h))) \
		$(addprefix $(DESTDIR)$(INCLUDEDIR)/kvmm/uapi/,$(notdir $(wildcard kvmm/include/kvmm/uapi/*.h))) \
		$(addprefix $(DESTDIR)$(DATADIR)/profiles/,$(notdir $(wildcard kvmm/policy/profiles/*.profile))) \
		$(addprefix $(DESTDIR)$(PYTHONDIR)/kvmm/,$(notdir $(wildcard kvmm/python/kvmm/*.py))) \
		$(DESTDIR)$(PYTHONDIR)/kvmm.py \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kvmmd@.service
	@# the bytecode python3 wrote for the package when it was imported
	rm -rf $(DESTDIR)$(PYTHONDIR)/kvmm/__pycache__
	for d in $(DESTDIR)$(INCLUDEDIR)/kvmm/uapi $(DESTDIR)$(INCLUDEDIR)/kvmm \
		$(DESTDIR)$(PYTHONDIR)/kvmm $(DESTDIR)$(DATADIR)/profiles \
		$(DESTDIR)$(DATADIR); do rmdir $$d 2>/dev/null || true; done
	@[ ! -e $(DESTDIR)$(SYSCONFDIR)/kvmm/kvmmd.conf ] || \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/kvmm/kvmmd.conf (yours to remove)"

clean:
	rm -rf build
