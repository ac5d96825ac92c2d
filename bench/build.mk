# bench/: benchmarks (bench/NAME.c -> build/bench/NAME, or bench/NAME.sh);
# each prints a ratio against a baseline measured in the same run and ends
# with one JSON line.  bench/run.sh runs them all.
BENCH_SRCS := $(wildcard bench/*.c)
$(foreach t,$(BENCH_SRCS),$(eval $(call program_rule,$(BUILD)/bench/$(basename $(notdir $(t))),$(t))))
BENCH_BINS := $(foreach t,$(BENCH_SRCS),$(BUILD)/bench/$(basename $(notdir $(t))))
PROGRAMS += $(BENCH_BINS)
# they start kvmmd with the tests' helpers (tests/lib)
$(BENCH_BINS): TESTHELP_LIB := $(BUILD)/libtesthelp.a
$(BENCH_BINS): $(BUILD)/libtesthelp.a
