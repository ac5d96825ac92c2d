# tests/: one binary (tests/NAME.c -> build/tests/NAME) or script
# (tests/NAME.sh) per behaviour; tests/lib/ holds helpers shared by tests.
# tests/run.sh runs them all.
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
$(eval $(call archive_rule,$(BUILD)/libtesthelp.a,$(TESTLIB_SRCS)))
ARCHIVES += $(BUILD)/libtesthelp.a
TEST_SRCS := $(wildcard tests/*.c)
$(foreach t,$(TEST_SRCS),$(eval $(call program_rule,$(BUILD)/tests/$(basename $(notdir $(t))),$(t))))
PROGRAMS += $(foreach t,$(TEST_SRCS),$(BUILD)/tests/$(basename $(notdir $(t))))
