// SPDX-License-Identifier: Apache-2.0
//
// troupe_sim: the scenario campaign over the real interconnect with the built-in workloads
// (interconnect/testing/scenario.h). `troupe_sim --seed=N` replays one seed; `troupe_sim
// --seeds=100000` runs a long campaign.
#include "gtest/gtest.h"

#include "interconnect/testing/scenario.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return troupe::testing::ScenarioMain(argc, argv);
}
