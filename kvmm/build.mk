# kvmm/: the daemon (kvmmd/), the client library (lib/) and the policy
# library (policy/, no IPC inside so kvmm-replay links the same code).

POLICY_SRCS := $(wildcard kvmm/policy/*.c)
$(eval $(call archive_rule,$(BUILD)/libkvmmpolicy.a,$(POLICY_SRCS)))

KVMMD_SRCS := $(filter-out kvmm/kvmmd/main.c,$(wildcard kvmm/kvmmd/*.c))
$(eval $(call archive_rule,$(BUILD)/libkvmmd.a,$(KVMMD_SRCS)))

# salt.c and siphash.c too: libkvmm names the blocks it reports to
# telemetry as kvmmd does (kvmm/kvmmd/salt.h); knob_text.c: its test
# knobs read as kvmmd's do
LIBKVMM_SRCS := $(wildcard kvmm/lib/*.c) kvmm/kvmmd/salt.c \
	kvmm/kvmmd/siphash.c kvmm/kvmmd/knob_text.c
$(eval $(call archive_rule,$(BUILD)/libkvmm-client.a,$(LIBKVMM_SRCS)))

ARCHIVES += $(BUILD)/libkvmmd.a $(BUILD)/libkvmm-client.a \
	$(BUILD)/libkvmmpolicy.a

# What libkvmm is built from, one word a line, for the builds outside
# make (tests/lib/tsan.sh compiles them under ThreadSanitizer): this
# list, so that a source added here is in theirs too.
libkvmm-sources:
	@printf '%s\n' $(LIBKVMM_SRCS) $(VMM_SRCS) $(POLICY_SRCS)

# The installable client library carries its own copy of vmm/ and policy/
# (hashing) with every symbol hidden except those in the version map.
LIBKVMM_OBJS := $(call objs,$(LIBKVMM_SRCS) $(VMM_SRCS) $(POLICY_SRCS))
# The version map's global patterns (kvmm_*), for the static archive.
LIBKVMM_EXPORTS := $(shell sed -n \
	'/global:/,/local:/s/^[[:space:]]*\([A-Za-z0-9_*]*\);.*/\1/p' \
	kvmm/lib/libkvmm.map)
OBJCOPY ?= objcopy

# libkvmm.a holds one object: every client object linked together (ld -r)
# with all globals but the version map's made local, so it exports what
# libkvmm.so.1 does.  An archive of the objects themselves exported
# vmm_*, pol_*, kc_* ... to the program linking it, and an engine with a
# vmm_log of its own silently replaced libkvmm's
# (tests/install-static-symbols.sh).  Hidden symbols go first, in a pass
# of their own: the USDT semaphores (kvmm_*_semaphore, weak hidden) match
# the map's pattern and would stay global.  Internal programs link
# build/libkvmm-client.a and the other internal archives instead.
$(BUILD)/libkvmm.a: $(LIBKVMM_OBJS) kvmm/lib/libkvmm.map
	@mkdir -p $(@D)
	$(call msg,AR,$@)
	$(Q)rm -f $@ $(BUILD)/obj/libkvmm-all.o
	$(Q)$(CC) -r -nostdlib -o $(BUILD)/obj/libkvmm-all.o $(LIBKVMM_OBJS)
	$(Q)$(OBJCOPY) --localize-hidden $(BUILD)/obj/libkvmm-all.o
	$(Q)$(OBJCOPY) --wildcard \
		$(foreach s,$(LIBKVMM_EXPORTS),--keep-global-symbol='$(s)') \
		$(BUILD)/obj/libkvmm-all.o
	$(Q)ar rcs $@ $(BUILD)/obj/libkvmm-all.o

$(BUILD)/libkvmm.so.$(KVMM_ABI_MAJOR): $(LIBKVMM_OBJS) kvmm/lib/libkvmm.map
	@mkdir -p $(@D)
	$(call msg,LD,$@)
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,libkvmm.so.$(KVMM_ABI_MAJOR) \
		-Wl,--version-script=kvmm/lib/libkvmm.map -o $@ \
		$(LIBKVMM_OBJS) $(EXTRA_LIBS) $(LDLIBS)

$(BUILD)/libkvmm.so: $(BUILD)/libkvmm.so.$(KVMM_ABI_MAJOR)
	$(Q)ln -sf libkvmm.so.$(KVMM_ABI_MAJOR) $@

PROGRAMS += $(BUILD)/libkvmm.a $(BUILD)/libkvmm.so

ifneq ($(wildcard kvmm/kvmmd/main.c),)
$(eval $(call program_rule,$(BUILD)/kvmmd,kvmm/kvmmd/main.c))
PROGRAMS += $(BUILD)/kvmmd
INSTALL_BINS += $(BUILD)/kvmmd
endif
