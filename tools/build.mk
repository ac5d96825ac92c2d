# tools/: one program per sub-directory holding a main.c
# (tools/kvmmctl -> build/kvmmctl, tools/kvmm-replay -> build/kvmm-replay, ...).
TOOL_DIRS := $(patsubst %/main.c,%,$(wildcard tools/*/main.c))
$(foreach d,$(TOOL_DIRS),$(eval $(call program_rule,$(BUILD)/$(notdir $(d)),$(wildcard $(d)/*.c))))
TOOL_BINS := $(foreach d,$(TOOL_DIRS),$(BUILD)/$(notdir $(d)))
PROGRAMS += $(TOOL_BINS)
INSTALL_BINS += $(TOOL_BINS)
