# tests/: one binary (tests/NAME.c -> build/tests/NAME) or script
# (tests/NAME.sh) per behaviour; tests/lib/ holds helpers shared by tests.
# tests/run.sh runs them all.
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
$(eval $(call archive_rule,$(BUILD)/libtesthelp.a,$(TESTLIB_SRCS)))
TEST_SRCS := $(wildcard tests/*.c)
# A test too big for one file keeps its main in tests/NAME.c (the name
# the runner and its "timeout:" line go by) and its other pieces in
# tests/NAME/*.c, linked into the same binary.
test_parts = $(t) $(wildcard $(basename $(t))/*.c)
$(foreach t,$(TEST_SRCS),$(eval $(call program_rule,$(BUILD)/tests/$(basename $(notdir $(t))),$(test_parts))))
TEST_BINS := $(foreach t,$(TEST_SRCS),$(BUILD)/tests/$(basename $(notdir $(t))))
PROGRAMS += $(TEST_BINS)
$(TEST_BINS): TESTHELP_LIB := $(BUILD)/libtesthelp.a
$(TEST_BINS): $(BUILD)/libtesthelp.a

# LD_PRELOAD shims that tests start kvmmd under (tests/shims/NAME.c ->
# build/tests/shims/NAME.so; the runner skips the folder).  Built without
# the sanitizers: under SANITIZE=1 the daemon brings its own runtime.
SHIM_SRCS := $(wildcard tests/shims/*.c)
SHIMS := $(patsubst tests/shims/%.c,$(BUILD)/tests/shims/%.so,$(SHIM_SRCS))
$(BUILD)/tests/shims/%.so: tests/shims/%.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 -O2 -g -fPIC -shared $(WARN) -o $@ $< -ldl
PROGRAMS += $(SHIMS)

# tests/run.sh's launcher, the subreaper each test runs under
# (tests/runner/reaper.c -> build/tests/runner/reaper; the runner skips
# the folder).  Built without the sanitizers: it is the runner's, not
# under test, and LeakSanitizer's exit status would be taken for the
# test's.
RUNNER_REAPER := $(BUILD)/tests/runner/reaper
$(RUNNER_REAPER): tests/runner/reaper.c
	@mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -g $(WARN) -o $@ $<
PROGRAMS += $(RUNNER_REAPER)
