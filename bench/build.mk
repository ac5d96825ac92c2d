# bench/: benchmarks (bench/NAME.c -> build/bench/NAME, or bench/NAME.sh);
# each prints a ratio against a baseline measured in the same run and ends
# with one JSON line.  bench/run.sh runs them all.
BENCH_SRCS := $(wildcard bench/*.c)
$(foreach t,$(BENCH_SRCS),$(eval $(call program_rule,$(BUILD)/bench/$(basename $(notdir $(t))),$(t))))
PROGRAMS += $(foreach t,$(BENCH_SRCS),$(BUILD)/bench/$(basename $(notdir $(t))))
