# kvmm — top-level build.
#
#   make              build everything into build/
#   make check        install missing packages, build, run every test
#   make demo         the main job: tinylm clients on a real kvmmd
#   make bench        build and run the benchmarks (each prints a ratio)
#   make deps         install the Debian packages the build and tests need
#   make install      PREFIX=/usr/local DESTDIR= (PYTHONDIR= for kvmm.py,
#                     SYSCONFDIR= SYSTEMDUNITDIR= for kvmmd.conf,
#                     kvmmd.service and kvmmd@.service, one per GPU)
#   make format       clang-format every C source in place
#   make SANITIZE=1   ASan+UBSan build in build/asan (check works too)
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
ifeq ($(SANITIZE),1)
BUILD ?= build/asan
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
# The Python binding (kvmm/python/kvmm.py): where Debian's python3 looks,
# /usr/lib/python3/dist-packages for PREFIX=/usr, else
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
	-include $(BUILD)/config.h -DKVMM_VERSION='"$(KVMM_VERSION)"' \
	-DKVMM_PROFILE_DIR_DEFAULT='"$(DATADIR)/profiles"'
CFLAGS := -std=gnu11 -O2 -g -fPIC -pthread $(WARN) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(EXTRA_LDFLAGS)
LDLIBS := -ldl -lm -lrt
ifeq ($(SANITIZE),1)
CFLAGS += -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
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
PROGRAMS :=
SCRIPTS_TO_CHECK :=

include vmm/build.mk
include kvmm/build.mk
include ebpf/build.mk
include kernels/build.mk
include tests/build.mk
include tools/build.mk
include bench/build.mk

LINK_GROUP = -Wl,--start-group $(ARCHIVES) -Wl,--end-group $(EXTRA_LIBS) $(LDLIBS)
# Programs defined before a later fragment added its archive still link it.
$(filter-out %.a %.so,$(PROGRAMS)): $(ARCHIVES)

$(BUILD)/obj/%.o: %.c $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

.PHONY: all check demo bench deps install format format-check clean configure

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

demo:
	$(Q)tools/deps.sh --ensure
	$(Q)$(MAKE) --no-print-directory all
	$(Q)KVMM_BUILD=$(BUILD) tools/demo.sh

bench: all
	$(Q)KVMM_BUILD=$(BUILD) bench/run.sh $(B)

deps:
	$(Q)tools/deps.sh

C_SOURCES = $(shell git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || \
	find kvmm vmm ebpf kernels tools tests bench -name '*.[ch]')

format:
	$(Q)clang-format -i $(C_SOURCES)

format-check:
	$(Q)clang-format --dry-run --Werror $(C_SOURCES)

$(BUILD)/libkvmm.pc: Makefile
	@mkdir -p $(@D)
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
		'includedir=$(INCLUDEDIR)' '' 'Name: libkvmm' \
		'Description: client library for the kvmm KV-cache memory manager' \
		'Version: $(KVMM_VERSION)' 'Libs: -L$${libdir} -lkvmm' \
		'Libs.private: -lpthread -ldl' 'Cflags: -I$${includedir}' >$@

install: all $(BUILD)/libkvmm.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR)/kvmm $(DESTDIR)$(DATADIR)/profiles
	install -m 755 $(INSTALL_BINS) $(DESTDIR)$(BINDIR)
	install -m 644 $(BUILD)/libkvmm.a $(DESTDIR)$(LIBDIR)
	install -m 755 $(BUILD)/libkvmm.so.$(KVMM_ABI_MAJOR) $(DESTDIR)$(LIBDIR)
	ln -sf libkvmm.so.$(KVMM_ABI_MAJOR) $(DESTDIR)$(LIBDIR)/libkvmm.so
	install -m 644 kvmm/include/kvmm/*.h $(DESTDIR)$(INCLUDEDIR)/kvmm
	install -m 644 $(BUILD)/libkvmm.pc $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 kvmm/policy/profiles/*.profile $(DESTDIR)$(DATADIR)/profiles
	install -d $(DESTDIR)$(PYTHONDIR)
	sed 's|^_INSTALLED_LIB = None$$|_INSTALLED_LIB = "$(LIBDIR)/libkvmm.so.$(KVMM_ABI_MAJOR)"|' \
		kvmm/python/kvmm.py >$(DESTDIR)$(PYTHONDIR)/kvmm.py
	chmod 644 $(DESTDIR)$(PYTHONDIR)/kvmm.py
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

clean:
	rm -rf build
