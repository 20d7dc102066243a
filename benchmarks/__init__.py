"""bcjax microbenchmarks: JSON output, compile time reported separately, medians of timed repeats."""
