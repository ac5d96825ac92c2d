# kvmm/: the daemon (kvmmd/), the client library (lib/) and the policy
# library (policy/, no IPC inside so kvmm-replay links the same code).

POLICY_SRCS := $(wildcard kvmm/policy/*.c)
$(eval $(call archive_rule,$(BUILD)/libkvmmpolicy.a,$(POLICY_SRCS)))

KVMMD_SRCS := $(filter-out kvmm/kvmmd/main.c,$(wildcard kvmm/kvmmd/*.c))
$(eval $(call archive_rule,$(BUILD)/libkvmmd.a,$(KVMMD_SRCS)))

LIBKVMM_SRCS := $(wildcard kvmm/lib/*.c)
$(eval $(call archive_rule,$(BUILD)/libkvmm-client.a,$(LIBKVMM_SRCS)))

ARCHIVES += $(BUILD)/libkvmmd.a $(BUILD)/libkvmm-client.a \
	$(BUILD)/libkvmmpolicy.a

# The installable client library carries its own copy of vmm/ and policy/
# (hashing) with every symbol hidden except those in the version map.
LIBKVMM_OBJS := $(call objs,$(LIBKVMM_SRCS) $(VMM_SRCS) $(POLICY_SRCS))
$(BUILD)/libkvmm.a: $(LIBKVMM_OBJS)
	@mkdir -p $(@D)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

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
