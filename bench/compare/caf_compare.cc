// SPDX-License-Identifier: Apache-2.0
//
// CAF 0.17 side of the peer comparison (bench/compare/README.md). It measures, with CAF's default
// actor_system_config (the work-stealing scheduler on every core; the remote modes load the
// caf::io middleman, CAF's default network layer), the same workloads as Troupe's
// troupe_compare and troupe_remote (and so actors_bench and session_bench):
//
//   caf_compare fanin [EVENTS]  4 senders each send EVENTS/4 messages holding one int, as fast as
//                               they can and with no flow control, to 1 receiver that counts
//                               them. Prints events/s (EVENTS / wall time from the first send to
//                               the receiver counting the last) and the peak RSS growth in MiB
//                               (RSS sampled from /proc/self/statm every 10 ms by a plain thread,
//                               minus the RSS before the run, taken after malloc_trim(0)).
//   caf_compare idle [ACTORS]   spawns ACTORS actors that just wait for an int, waits until each
//                               has started, and prints (RSS after - RSS before) / ACTORS, with
//                               malloc_trim(0) before both readings. CAF ends an actor that no
//                               handle refers to (exit_reason::unreachable), so the program keeps
//                               one `caf::actor` (8 B) per actor: it is part of the figure.
//   caf_compare skynet [LEAVES] the classic skynet: a root spawns 10 children, each as many, down
//                               to LEAVES leaves; each replies the sum of its leaves' ordinals to
//                               its parent and quits. ms from spawning the root to its sum.
//   caf_compare pingpong [N]    a pinger sends (ping, n) to a ponger, which returns (pong, n), N
//                               times one after another. Round trips/s.
//   caf_compare ring [HOPS]     a ring of 1,000 actors passes one (token, hops) message on HOPS
//                               times. Hops/s.
//   caf_compare rtt [N]         two processes: the client starts its own binary again as the
//                               server (peer_process.h), which publishes a ponger on 127.0.0.1
//                               (port 0: the kernel picks) with the middleman; the client's
//                               remote_actor reaches it, and a pinger makes 1,000 untimed round
//                               trips of (ping, n) -> (pong, n), then N timed ones. Mean µs.
//   caf_compare stream [EVENTS] [BODY]  two processes as above: a sender streams EVENTS
//                               (blob, seq, std::string of BODY bytes) messages to the published
//                               sink, at most W = clamp(8 MiB / BODY, 64, 16384) ahead of the
//                               (credit, count) messages the sink sends back every W/16 (the same
//                               window as troupe_remote's; the middleman has no flow control of
//                               its own). EVENTS is rounded up to a multiple of W/16; an untimed
//                               stream of 4 W first. events/s and GB/s.
//
// Sizes default to the full ones of run.sh; smaller values are for a quick check. Each mode
// prints one line of key=value pairs that run.sh reads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_memory.h"
#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "peer_process.h"
#include "report.h"

namespace {

using compare::Clock;
using troupe::bench::ResidentBytes;
using troupe::bench::TrimHeap;

constexpr int kSenders = 4;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Shared between the fan-in actors and main: when the first message left and when the last one
// was counted.
struct FanInClock {
  std::atomic<int64_t> first_send_ns{0};
  std::atomic<int64_t> last_count_ns{0};
};

// Sends `count` ints to `receiver` in one go and ends (no behavior: the actor quits after this).
void Sender(caf::event_based_actor* self, caf::actor receiver, int64_t count, FanInClock* clock) {
  int64_t expected = 0;
  clock->first_send_ns.compare_exchange_strong(expected, NowNs());
  for (int64_t i = 0; i < count; ++i) {
    self->send(receiver, static_cast<int>(i & 0xffff));
  }
}

// Counts ints until `total` have arrived, notes the time and quits.
caf::behavior Receiver(caf::event_based_actor* self, int64_t total, FanInClock* clock) {
  auto received = std::make_shared<int64_t>(0);
  return {
      [self, received, total, clock](int) {
        if (++*received == total) {
          clock->last_count_ns.store(NowNs());
          self->quit();
        }
      },
  };
}

// An actor that waits for one int and then does nothing with it.
caf::behavior Idle(caf::event_based_actor* /*self*/, std::atomic<int64_t>* started) {
  started->fetch_add(1, std::memory_order_relaxed);
  return {
      [](int) {},
  };
}

int RunFanIn(int64_t events) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const int64_t per_sender = events / kSenders;
  const int64_t total = per_sender * kSenders;

  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  std::atomic<bool> sampling{true};
  std::atomic<int64_t> rss_peak{rss_before};
  std::thread sampler([&] {
    // Bounded by the run's own timeout in run.sh; stops when main clears `sampling`.
    while (sampling.load()) {
      const int64_t rss = ResidentBytes();
      if (rss > rss_peak.load()) {
        rss_peak.store(rss);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  FanInClock clock;
  {
    caf::actor receiver = system.spawn(Receiver, total, &clock);
    for (int s = 0; s < kSenders; ++s) {
      system.spawn(Sender, receiver, per_sender, &clock);
    }
  }
  system.await_all_actors_done();
  sampling.store(false);
  sampler.join();
  const int64_t rss = ResidentBytes();
  rss_peak.store(std::max(rss_peak.load(), rss));

  const double seconds =
      static_cast<double>(clock.last_count_ns.load() - clock.first_send_ns.load()) / 1e9;
  compare::PrintFanIn(static_cast<uint64_t>(total), seconds, rss_peak.load() - rss_before);
  return 0;
}

int RunIdle(int64_t actors) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  std::atomic<int64_t> started{0};

  TrimHeap();
  const int64_t rss_before = ResidentBytes();
  const auto spawn_start = Clock::now();
  std::vector<caf::actor> alive;
  alive.reserve(static_cast<size_t>(actors));
  for (int64_t i = 0; i < actors; ++i) {
    alive.push_back(system.spawn(Idle, &started));
  }
  // Wait (at most 60 s) until every actor has run its start and waits for a message.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (started.load() < actors && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double spawn_seconds = std::chrono::duration<double>(Clock::now() - spawn_start).count();
  if (started.load() < actors) {
    std::fprintf(stderr, "idle: only %lld of %lld actors started within 60 s\n",
                 static_cast<long long>(started.load()), static_cast<long long>(actors));
    return 1;
  }
  TrimHeap();
  const int64_t rss_after = ResidentBytes();
  compare::PrintIdle(static_cast<uint64_t>(actors), spawn_seconds, rss_after - rss_before);
  // Dropping the handles ends the actors (unreachable); the system's destructor waits for them.
  alive.clear();
  return 0;
}

// -- messages of the other workloads --------------------------------------------------------------

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using pong_atom = caf::atom_constant<caf::atom("pong")>;
using token_atom = caf::atom_constant<caf::atom("token")>;
using next_atom = caf::atom_constant<caf::atom("next")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using blob_atom = caf::atom_constant<caf::atom("blob")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;

constexpr auto kWait = std::chrono::seconds(120);

// Waits (at most kWait) for a message of type T at `waiter`, which it returns; exits on timeout.
template <typename T>
T AwaitOrExit(caf::scoped_actor& waiter, const char* what) {
  T value{};
  bool got = false;
  waiter->receive([&](T received) { value = received, got = true; }, caf::after(kWait) >> [] {});
  if (!got) {
    std::fprintf(stderr, "caf_compare: %s did not finish within %lld s\n", what,
                 static_cast<long long>(kWait.count()));
    std::_Exit(1);
  }
  return value;
}

// -- skynet ---------------------------------------------------------------------------------------

constexpr uint64_t kFanOut = 10;

// A skynet node over the leaf ordinals [first, first + size): a leaf sends its ordinal to
// `parent`, an inner node spawns kFanOut children and sends the sum of theirs; either then quits.
caf::behavior Skynet(caf::event_based_actor* self, caf::actor parent, uint64_t first,
                     uint64_t size) {
  if (size == 1) {
    self->send(parent, first);
    self->quit();
    return {};
  }
  const uint64_t part = size / kFanOut;
  for (uint64_t i = 0; i < kFanOut; ++i) {
    self->spawn(Skynet, caf::actor_cast<caf::actor>(self), first + i * part, part);
  }
  auto sum = std::make_shared<uint64_t>(0);
  auto replies = std::make_shared<uint64_t>(0);
  return {
      [=](uint64_t value) {
        *sum += value;
        if (++*replies == kFanOut) {
          self->send(parent, *sum);
          self->quit();
        }
      },
  };
}

int RunSkynet(uint64_t leaves) {
  compare::CheckSkynetLeaves("caf_compare", leaves);
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor waiter{system};
  const auto start = Clock::now();
  system.spawn(Skynet, caf::actor_cast<caf::actor>(waiter), uint64_t{0}, leaves);
  const auto sum = AwaitOrExit<uint64_t>(waiter, "skynet");
  return compare::ReportSkynet("caf_compare", leaves, sum, compare::SecondsSince(start));
}

// -- ping-pong (local and remote) -----------------------------------------------------------------

// Answers every (ping, n) with (pong, n) to its sender. Remotely, also the stream's sink: counts
// (blob, seq, data) messages and sends (credit, count) to the sender every `credit_every`.
caf::behavior Server(caf::event_based_actor* self, uint64_t credit_every) {
  auto count = std::make_shared<uint64_t>(0);
  return {
      [](ping_atom, uint64_t n) { return caf::make_message(pong_atom::value, n); },
      [=](blob_atom, uint64_t /*seq*/, const std::string& /*data*/) {
        if (++*count % credit_every == 0) {
          self->send(caf::actor_cast<caf::actor>(self->current_sender()), credit_atom::value,
                     *count);
        }
      },
  };
}

// Makes `count` round trips to `ponger` one after another, then tells `done_to`.
caf::behavior Pinger(caf::event_based_actor* self, caf::actor ponger, uint64_t count,
                     caf::actor done_to) {
  self->send(ponger, ping_atom::value, count);
  return {
      [=](pong_atom, uint64_t left) {
        if (left == 1) {
          self->send(done_to, done_atom::value);
          self->quit();
        } else {
          self->send(ponger, ping_atom::value, left - 1);
        }
      },
  };
}

// Runs a pinger of `round_trips` against `ponger` and returns its seconds.
double TimePinger(caf::actor_system& system, const caf::actor& ponger, uint64_t round_trips) {
  caf::scoped_actor waiter{system};
  const auto start = Clock::now();
  system.spawn(Pinger, ponger, round_trips, caf::actor_cast<caf::actor>(waiter));
  AwaitOrExit<done_atom>(waiter, "ping-pong");
  return compare::SecondsSince(start);
}

int RunPingPong(uint64_t round_trips) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const caf::actor ponger = system.spawn(Server, uint64_t{1});
  compare::PrintPingPong(round_trips, TimePinger(system, ponger, round_trips));
  caf::anon_send_exit(ponger, caf::exit_reason::user_shutdown);
  return 0;
}

// -- ring -----------------------------------------------------------------------------------------

constexpr int kRingSize = 1000;

// Passes (token, hops) on to its successor, set by (next, actor), until hops is 0.
caf::behavior RingMember(caf::event_based_actor* self, caf::actor done_to) {
  auto next = std::make_shared<caf::actor>();
  return {
      [=](next_atom, caf::actor successor) { *next = std::move(successor); },
      [=](token_atom, uint64_t hops) {
        if (hops == 0) {
          self->send(done_to, done_atom::value);
        } else {
          self->send(*next, token_atom::value, hops - 1);
        }
      },
  };
}

int RunRing(uint64_t hops) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor waiter{system};
  std::vector<caf::actor> ring;
  for (int i = 0; i < kRingSize; ++i) {
    ring.push_back(system.spawn(RingMember, caf::actor_cast<caf::actor>(waiter)));
  }
  // Sent before the token starts, so each member knows its successor when the token comes.
  for (int i = 0; i < kRingSize; ++i) {
    waiter->send(ring[i], next_atom::value, ring[(i + 1) % kRingSize]);
  }
  const auto start = Clock::now();
  waiter->send(ring[0], token_atom::value, hops - 1);
  AwaitOrExit<done_atom>(waiter, "ring");
  compare::PrintRing(kRingSize, hops, compare::SecondsSince(start));
  // The members refer to each other: they end only when told to.
  for (const caf::actor& member : ring) {
    caf::anon_send_exit(member, caf::exit_reason::user_shutdown);
  }
  return 0;
}

// -- remote ---------------------------------------------------------------------------------------

// The stream's window in events for `body`-byte messages (troupe_remote's); credits every 1/16.
uint64_t Window(size_t body) { return std::clamp<uint64_t>((uint64_t{8} << 20) / body, 64, 16384); }

// The server process: publishes a Server on 127.0.0.1 (the kernel picks the port), prints the
// port and serves until the client ends this process.
int Serve(uint64_t body) {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  caf::actor_system system{cfg};
  const caf::actor server = system.spawn(Server, Window(body) / 16);
  caf::expected<uint16_t> port = system.middleman().publish(server, 0, "127.0.0.1");
  if (!port) {
    std::fprintf(stderr, "caf_compare: publish: %s\n", system.render(port.error()).c_str());
    return 1;
  }
  compare::AnnounceReady(std::to_string(*port));
  // Until SIGTERM (default action: exit) from the client.
  for (;;) {
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

// The client's side: the server process, and the remote Server reached through the middleman.
struct Remote {
  explicit Remote(size_t body) : server_process({"serve", std::to_string(body)}) {
    cfg.load<caf::io::middleman>();
  }
  compare::ServerProcess server_process;
  caf::actor_system_config cfg;
};

// Returns the published Server of the process `remote` started, or exits.
caf::actor Connect(caf::actor_system& system, const compare::ServerProcess& server) {
  if (!server.ok()) {
    std::fprintf(stderr, "caf_compare: %s\n", server.error().c_str());
    std::_Exit(1);
  }
  caf::expected<caf::actor> actor = system.middleman().remote_actor(
      "127.0.0.1", static_cast<uint16_t>(std::atoi(server.line().c_str())));
  if (!actor) {
    std::fprintf(stderr, "caf_compare: remote_actor: %s\n", system.render(actor.error()).c_str());
    std::_Exit(1);
  }
  return *actor;
}

int RunRtt(uint64_t round_trips) {
  Remote remote(64);
  caf::actor_system system{remote.cfg};
  const caf::actor server = Connect(system, remote.server_process);
  TimePinger(system, server, 1000);
  compare::PrintRtt(round_trips, TimePinger(system, server, round_trips));
  return 0;
}

// Streams `count` (blob, seq, data) messages of `body` bytes to `sink`, at most `window` ahead of
// its credits; the sink has counted `base` of earlier streams. Tells `done_to` at the last credit.
caf::behavior StreamSender(caf::event_based_actor* self, caf::actor sink, uint64_t count,
                           size_t body, uint64_t window, uint64_t base, caf::actor done_to) {
  struct State {
    uint64_t sent = 0;
    uint64_t credited = 0;
    std::string payload;
  };
  auto state = std::make_shared<State>();
  state->payload.assign(body, 'p');
  auto fill = [=] {
    while (state->sent < count && state->sent - state->credited < window) {
      self->send(sink, blob_atom::value, ++state->sent, state->payload);
    }
  };
  fill();
  return {
      [=](credit_atom, uint64_t total) {
        state->credited = total - base;
        if (state->credited >= count) {
          self->send(done_to, done_atom::value);
          self->quit();
          return;
        }
        fill();
      },
  };
}

int RunStream(uint64_t events, size_t body) {
  Remote remote(body);
  caf::actor_system system{remote.cfg};
  const caf::actor sink = Connect(system, remote.server_process);
  const uint64_t window = Window(body);
  const uint64_t step = window / 16;
  events = (events + step - 1) / step * step;
  caf::scoped_actor waiter{system};
  const caf::actor done_to = caf::actor_cast<caf::actor>(waiter);
  system.spawn(StreamSender, sink, 4 * window, body, window, uint64_t{0}, done_to);
  AwaitOrExit<done_atom>(waiter, "the warm-up stream");
  const auto start = Clock::now();
  system.spawn(StreamSender, sink, events, body, window, 4 * window, done_to);
  AwaitOrExit<done_atom>(waiter, "the stream");
  compare::PrintStream(events, body, compare::SecondsSince(start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto number = [&](int index, uint64_t fallback, const char* name) {
    return compare::CountArg(argc, argv, index, fallback, name);
  };
  if (mode == "fanin") {
    return RunFanIn(static_cast<int64_t>(number(2, 10'000'000, "EVENTS")));
  }
  if (mode == "idle") {
    return RunIdle(static_cast<int64_t>(number(2, 1'000'000, "ACTORS")));
  }
  if (mode == "skynet") {
    return RunSkynet(number(2, 1'000'000, "LEAVES"));
  }
  if (mode == "pingpong") {
    return RunPingPong(number(2, 2'000'000, "ROUND_TRIPS"));
  }
  if (mode == "ring") {
    return RunRing(number(2, 10'000'000, "HOPS"));
  }
  if (mode == "serve" && argc == 3) {
    return Serve(number(2, 64, "BODY"));
  }
  if (mode == "rtt") {
    return RunRtt(number(2, 20'000, "ROUND_TRIPS"));
  }
  if (mode == "stream") {
    return RunStream(number(2, 1'000'000, "EVENTS"), number(3, 64, "BODY"));
  }
  std::fprintf(stderr,
               "usage: %s fanin [EVENTS] | idle [ACTORS] | skynet [LEAVES] | pingpong [N] | "
               "ring [HOPS] | rtt [N] | stream [EVENTS] [BODY]\n",
               argv[0]);
  return 2;
}
