// Engines on separate threads share no state: what a server with one engine per thread
// does. Each thread owns a block pool and runs forward() on a CPU backend, whose kernels
// start their own OpenMP team inside the thread. The results equal a single-threaded run
// bit for bit, and under ThreadSanitizer (make tsan) any hidden shared state (a cache of
// the ISA dispatch, checked mode's process default, scratch buffers) would be a race.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "attnkit/kv_cache/block_pool.h"
#include "reliability/paged_step.h"

namespace attnkit {
namespace {

using testing::PagedStep;

struct Engine {
  const char* backend;
  bool mla;
  std::vector<float> output;
  std::string pool_state;
};

void run_engine(Engine& e) {
  BlockPool pool(64);
  for (int round = 0; round < 200; ++round) {
    const auto blocks = pool.allocate(1 + round % 7);
    if (!blocks) continue;
    pool.add_ref(blocks->front());  // a shared prefix block
    pool.release(*blocks);
    pool.release(blocks->front());
  }
  e.pool_state = pool.check_invariants();
  if (pool.num_free_blocks() != pool.num_usable_blocks()) e.pool_state += " (blocks leaked)";
  PagedStep step(e.backend, e.mla);
  step.run();
  e.output = step.output_values();
}

TEST(Threads, EnginesOnSeparateThreadsShareNoState) {
  std::vector<Engine> alone = {{"CPU_FLASH", false, {}, {}},
                               {"CPU_MLA", true, {}, {}},
                               {"REFERENCE", false, {}, {}},
                               {"CPU_FLASH", false, {}, {}}};
  std::vector<Engine> together = alone;
  for (Engine& e : alone) run_engine(e);
  std::vector<std::thread> threads;
  for (Engine& e : together) threads.emplace_back(run_engine, std::ref(e));
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < alone.size(); ++i) {
    SCOPED_TRACE(std::string(alone[i].backend) + " engine " + std::to_string(i));
    EXPECT_EQ(together[i].pool_state, "");
    ASSERT_FALSE(alone[i].output.empty());
    EXPECT_EQ(together[i].output, alone[i].output);
  }
}

}  // namespace
}  // namespace attnkit
