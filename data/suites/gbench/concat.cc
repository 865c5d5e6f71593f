// The Google Benchmark example of docs/suites.md: two builds of this file are the two sides of
// `explain-pipeline ab --measure gbench`.
//
//   g++ -O2 concat.cc -o concat-old -lbenchmark -lpthread            (the baseline)
//   g++ -O2 -DAPPEND concat.cc -o concat-new -lbenchmark -lpthread   (the candidate)
//
// BM_concat appends "ab" to a string state.range(0) times: the old build with `s = s + "ab"`
// (a new string, every character copied, every time), the new one with `s += "ab"` (in place).
// Its user counter `appends` is the number of appends per iteration, the same in both builds.
// BM_copy is the same in both builds: a benchmark the change does not touch.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

static void BM_concat(benchmark::State& state) {
  const int64_t appends = state.range(0);
  for (auto _ : state) {
    std::string s;
    for (int64_t i = 0; i < appends; ++i) {
#ifdef APPEND
      s += "ab";
#else
      s = s + "ab";
#endif
    }
    benchmark::DoNotOptimize(s);
  }
  state.counters["appends"] = static_cast<double>(appends);
}
BENCHMARK(BM_concat)->Arg(64)->Arg(4096);

static void BM_copy(benchmark::State& state) {
  const std::string source(4096, 'x');
  for (auto _ : state) {
    std::string copy = source;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_copy);

BENCHMARK_MAIN();
