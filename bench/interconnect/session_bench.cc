// SPDX-License-Identifier: Apache-2.0
//
// session_bench: two nodes in one process joined by the interconnect over loopback TCP (and, in the
// *Tls variants, mutual TLS over it).
//
// What is measured (wall clock, UseRealTime):
// /proxies_in_user_pool:0 runs the proxies in the IC pool (the default, docs/design.md), :1 in the
// User pool next to the actors (InterconnectOptions::pool), which saves a thread wake-up per hop.
//   - BM_RemotePingPong          one ball between an actor on node 1 and one on node 2; reports
//                                rtt_us, the mean round trip (actor → proxy → TCP → proxy → actor
//                                and back). The ponger forwards the received handle untouched, so
//                                its body is never parsed nor serialized again.
//   - BM_RemoteStream/body:B     one sender on node 1 streams B-byte events to one receiver on
//                                node 2 within a window of credits the receiver returns every
//                                1024 events; events/s (items), body bytes/s, the bytes node 1
//                                wrote per event and the calls of operator new per event
//                                (bench/alloc_counter.h).
//   - BM_RemotePingPongTls, BM_RemoteStreamTls: the same over mutual TLS 1.3
//                                (interconnect/tls_transport.h), with a test CA and node
//                                certificates that scripts/make-test-certs.sh makes once per run
//                                in a temporary directory (the openssl CLI; the script is found
//                                next to this source, or at $TROUPE_MAKE_TEST_CERTS). The TLS
//                                handshake happens before the timed region.
// Why: the targets (RTT ≤ 25 µs, ≥ 3 M events/s of 64 B, ≥ 1.5 GB/s with 64 KiB events)
// and the peers' figures are for two nodes on loopback; the two processes of a real cluster
// add nothing but the second address space.
// Each node runs User and IC pools of one worker each; the box has two vCPUs for four workers,
// two Asio threads and the scheduler threads, so these figures are what a 2-core box carries.
//
//   build/release/bench/interconnect/session_bench

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/scoped_actor.h"
#include "actors/sync.h"
#include "bench/alloc_counter.h"
#include "bench/interconnect/session_bench.pb.h"
#include "interconnect/interconnect.h"
#include "interconnect/testing/free_ports.h"

namespace troupe::interconnect {
namespace {

enum : EventType {
  kEvBlob = EventSpaceBegin(kUserEventSpace + 40),
  kEvCredit,
  kEvBenchEnd,
};
static_assert(InEventSpace(kEvBenchEnd - 1, kUserEventSpace + 40));

struct EvBlob final : EventPB<EvBlob, bench::Blob, kEvBlob> {};
struct EvCredit final : EventPB<EvCredit, bench::Credit, kEvCredit> {};

// The directory of the test CA and the certificates of nodes 1 and 2, made on first use and
// removed at exit; nullopt (with the reason printed) when they cannot be made.
const std::optional<std::string>& TlsCertificates() {
  static const std::optional<std::string> dir = []() -> std::optional<std::string> {
    const char* override_script = std::getenv("TROUPE_MAKE_TEST_CERTS");
    const std::string script =
        override_script != nullptr
            ? std::string(override_script)
            : (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() /
               "scripts" / "make-test-certs.sh")
                  .string();
    std::string made = (std::filesystem::temp_directory_path() / "troupe-bench-XXXXXX").string();
    if (::mkdtemp(made.data()) == nullptr) {
      std::fprintf(stderr, "session_bench: mkdtemp failed\n");
      return std::nullopt;
    }
    const std::string command = "bash '" + script + "' '" + made + "' 1 2 >/dev/null";
    if (std::system(command.c_str()) != 0) {
      std::fprintf(stderr, "session_bench: %s failed\n", command.c_str());
      return std::nullopt;
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*TlsCertificates(), ignored);
    });
    return made;
  }();
  return dir;
}

// Two nodes with their interconnects, connected.
class Pair {
 public:
  // `proxy_pool`: "IC" (the default: proxies on their own worker) or "User" (proxies share the
  // worker of the actors, so no thread is woken between an actor and its proxy). `tls_dir`: the
  // certificates for mutual TLS (plain TCP when empty). `bulk_nice`: the Bulk pools' niceness.
  explicit Pair(const std::string& proxy_pool, const std::string& tls_dir = "",
                uint32_t bulk_nice = 0) {
    absl::StatusOr<std::vector<uint16_t>> ports = FreeLoopbackPorts(2);
    if (!ports.ok()) {
      std::fprintf(stderr, "%s\n", ports.status().ToString().c_str());
      std::abort();
    }
    for (NodeId node = 1; node <= 2; ++node) {
      proto::ActorSystemConfig config;
      config.set_node_id(node);
      // Bulk: only BM_RemotePingPongUnderBulk's large-event stream runs there (parked otherwise).
      for (const char* name : {"User", "IC", "Bulk"}) {
        proto::PoolConfig* pool = config.add_pools();
        pool->set_name(name);
        pool->set_threads(1);
        pool->set_spin_time_us(50);
        if (std::string_view(name) == "Bulk" && bulk_nice > 0) {
          pool->set_nice(bulk_nice);
        }
      }
      proto::InterconnectConfig& ic = *config.mutable_interconnect();
      ic.set_cluster_id("bench");
      // The stream's window is at least two credit steps (2048 events): 128 MiB of 64 KiB events,
      // more than the default per-peer bound, which would refuse events with kOverloaded.
      ic.set_max_queued_bytes(uint64_t{512} << 20);
      for (NodeId peer = 1; peer <= 2; ++peer) {
        proto::NodeAddress& address = *ic.add_nodes();
        address.set_node_id(peer);
        address.set_host("127.0.0.1");
        address.set_port((*ports)[peer - 1]);
      }
      if (!tls_dir.empty()) {
        proto::TlsConfig& tls = *ic.mutable_tls();
        tls.set_ca_file(tls_dir + "/ca.crt");
        tls.set_cert_file(tls_dir + "/node" + std::to_string(node) + ".crt");
        tls.set_key_file(tls_dir + "/node" + std::to_string(node) + ".key");
      }
      auto system = ActorSystem::Create(config);
      if (!system.ok()) {
        std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
        std::abort();
      }
      systems_[node - 1] = std::move(*system);
      InterconnectOptions options;
      options.pool = proxy_pool;
      auto started = Interconnect::Start(systems_[node - 1].get(), options);
      if (!started.ok()) {
        std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
        std::abort();
      }
      ics_[node - 1] = std::move(*started);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!(ics_[0]->Counters()[0].connected && ics_[1]->Counters()[0].connected)) {
      if (absl::Now() > deadline) {
        std::fprintf(stderr, "session_bench: the nodes did not connect\n");
        std::abort();
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  ~Pair() {
    for (int i = 0; i < 2; ++i) {
      ics_[i].reset();
      systems_[i]->Stop();
    }
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  Pair(Pair&&) = delete;
  Pair& operator=(Pair&&) = delete;

  ActorSystem& node(NodeId node) { return *systems_[node - 1]; }
  // The session counters of `node` (with its one peer).
  SessionCounters Session(NodeId node) { return ics_[node - 1]->Counters()[0]; }

 private:
  std::array<std::unique_ptr<ActorSystem>, 2> systems_;
  std::array<std::unique_ptr<Interconnect>, 2> ics_;
};

// Returns every ball to its sender, untouched.
class Ponger final : public Actor {
 public:
  Ponger() : Actor(&Ponger::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvBlob) {
      Forward(ev->sender(), ev);
    } else {
      Unhandled(ev);
    }
  }
};

// Serves `count` round trips to `ponger`, then notifies.
class Pinger final : public Actor {
 public:
  Pinger(ActorId ponger, int64_t count, troupe::Notification* done)
      : Actor(&Pinger::StateWork), ponger_(ponger), left_(count), done_(done) {}

 private:
  void Bootstrap() override { Send(ponger_, std::make_unique<EvBlob>()); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlob) {
      Unhandled(ev);
      return;
    }
    if (--left_ > 0) {
      Forward(ponger_, ev);
    } else {
      done_->Notify();
      PassAway();
    }
  }

  ActorId ponger_;
  int64_t left_;
  troupe::Notification* done_;
};

// Asks `ponger` `count` times, one after another (Actor::Ask: the framework's cookie, timeout and
// continuation around each round trip), then notifies.
class AskingPinger final : public Actor {
 public:
  AskingPinger(ActorId ponger, int64_t count, troupe::Notification* done)
      : Actor(&AskingPinger::StateWork), ponger_(ponger), left_(count), done_(done) {}

 private:
  void Bootstrap() override { Next(); }
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  void Next() {
    Ask<EvBlob>(ponger_, std::make_unique<EvBlob>(), absl::Seconds(30),
                [this](const AskResult<EvBlob>& reply) {
                  if (!reply.ok()) {
                    std::fprintf(stderr, "BM_RemoteAsk: %s\n", reply.status().ToString().c_str());
                  }
                  if (--left_ > 0 && reply.ok()) {
                    Next();
                  } else {
                    done_->Notify();
                    PassAway();
                  }
                });
  }

  ActorId ponger_;
  int64_t left_;
  troupe::Notification* done_;
};

const char* ProxyPool(const benchmark::State& state) { return state.range(0) == 0 ? "IC" : "User"; }

// The certificate directory for a TLS variant ("" for TCP); nullopt after SkipWithError.
std::optional<std::string> CertificatesFor(benchmark::State& state, bool tls) {
  if (!tls) {
    return std::string();
  }
  if (!TlsCertificates().has_value()) {
    state.SkipWithError("no TLS certificates (is the openssl CLI installed?)");
    return std::nullopt;
  }
  return TlsCertificates();
}

// Times `run` (which makes `round_trips` round trips, or skips the benchmark and returns false)
// once per iteration; reports the items and the mean round trip (rtt_us).
template <typename Run>
void TimeRoundTrips(benchmark::State& state, int64_t round_trips, Run run) {
  int64_t total = 0;
  absl::Duration elapsed;
  for (auto _ : state) {
    const absl::Time start = absl::Now();
    if (!run()) {
      return;
    }
    elapsed += absl::Now() - start;
    total += round_trips;
  }
  state.SetItemsProcessed(total);
  state.counters["rtt_us"] = absl::ToDoubleMicroseconds(elapsed) / static_cast<double>(total);
}

// Registers `make(&done)` on `node` and waits for it to notify `done`; false (and skips the
// benchmark) after 60 s.
template <typename Make>
bool RunUntilDone(benchmark::State& state, ActorSystem& node, Make make) {
  troupe::Notification done;
  node.Register(make(&done));
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(60))) {
    state.SkipWithError("the round trips did not finish within 60 s");
    return false;
  }
  return true;
}

void RemotePingPong(benchmark::State& state, bool tls) {
  const std::optional<std::string> certificates = CertificatesFor(state, tls);
  if (!certificates.has_value()) {
    return;
  }
  Pair pair(ProxyPool(state), *certificates);
  const ActorId ponger = pair.node(2).Register(std::make_unique<Ponger>());
  constexpr int64_t kRoundTrips = 2000;
  TimeRoundTrips(state, kRoundTrips, [&] {
    return RunUntilDone(state, pair.node(1), [&](troupe::Notification* done) {
      return std::make_unique<Pinger>(ponger, kRoundTrips, done);
    });
  });
}

// Remote asks, one at a time: from an actor (state.range(1) == 0, Actor::Ask) or from a plain
// thread waiting on each future (troupe::AskFuture: a one-shot actor per ask). Compare with
// BM_RemotePingPong, the same round trip by hand.
void BM_RemoteAsk(benchmark::State& state) {
  Pair pair(ProxyPool(state), "");
  const ActorId ponger = pair.node(2).Register(std::make_unique<Ponger>());
  const bool from_thread = state.range(1) != 0;
  constexpr int64_t kAsks = 2000;
  TimeRoundTrips(state, kAsks, [&] {
    if (!from_thread) {
      return RunUntilDone(state, pair.node(1), [&](troupe::Notification* done) {
        return std::make_unique<AskingPinger>(ponger, kAsks, done);
      });
    }
    for (int64_t i = 0; i < kAsks; ++i) {
      if (!troupe::AskFuture<EvBlob>(pair.node(1), ponger, std::make_unique<EvBlob>(),
                                     absl::Seconds(30))
               .get()
               .ok()) {
        state.SkipWithError("a remote ask failed");
        return false;
      }
    }
    return true;
  });
}
BENCHMARK(BM_RemoteAsk)
    ->ArgNames({"user_pool_proxies", "from_thread"})
    ->ArgsProduct({{0}, {0, 1}})
    ->UseRealTime();

void BM_RemotePingPong(benchmark::State& state) { RemotePingPong(state, /*tls=*/false); }
void BM_RemotePingPongTls(benchmark::State& state) { RemotePingPong(state, /*tls=*/true); }
BENCHMARK(BM_RemotePingPong)
    ->ArgName("proxies_in_user_pool")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RemotePingPongTls)
    ->ArgName("proxies_in_user_pool")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

constexpr uint64_t kCreditEvery = 1024;

// Counts streamed events and returns a credit every `credit_every` (kCreditEvery by default).
class StreamReceiver final : public Actor {
 public:
  explicit StreamReceiver(uint64_t credit_every = kCreditEvery)
      : Actor(&StreamReceiver::StateWork), credit_every_(credit_every) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlob) {
      Unhandled(ev);
      return;
    }
    if (++count_ % credit_every_ == 0) {
      auto credit = std::make_unique<EvCredit>();
      credit->record.set_count(count_);
      Send(ev->sender(), std::move(credit));
    }
  }
  const uint64_t credit_every_;
  uint64_t count_ = 0;
};

// Streams `count` events of `body` bytes, at most `window` ahead of the receiver's credits.
class StreamSender final : public Actor {
 public:
  // `stop` (optional): once set, the sender sends no more and passes away at its next credit.
  StreamSender(ActorId receiver, uint64_t count, size_t body, uint64_t window,
               troupe::Notification* done, const std::atomic<bool>* stop = nullptr)
      : Actor(&StreamSender::StateWork),
        receiver_(receiver),
        count_(count),
        payload_(body, 'p'),
        window_(window),
        done_(done),
        stop_(stop) {}

 private:
  void Bootstrap() override { Fill(); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvCredit) {
      Unhandled(ev);
      return;
    }
    EvCredit* credit = ev->Get<EvCredit>();
    credited_ = credit->record.count();
    if (credited_ >= count_ || (stop_ != nullptr && stop_->load(std::memory_order_relaxed))) {
      done_->Notify();
      PassAway();
      return;
    }
    Fill();
  }
  void Fill() {
    while (sent_ < count_ && sent_ - credited_ < window_) {
      auto blob = std::make_unique<EvBlob>();
      blob->record.set_seq(++sent_);
      blob->record.set_data(payload_);
      Send(receiver_, std::move(blob));
    }
  }

  ActorId receiver_;
  uint64_t count_;
  std::string payload_;
  uint64_t window_;
  troupe::Notification* done_;
  const std::atomic<bool>* stop_;
  uint64_t sent_ = 0;
  uint64_t credited_ = 0;
};

void RemoteStream(benchmark::State& state, bool tls) {
  const std::optional<std::string> certificates = CertificatesFor(state, tls);
  if (!certificates.has_value()) {
    return;
  }
  const auto body = static_cast<size_t>(state.range(1));
  Pair pair(ProxyPool(state), *certificates);
  // About 64 MiB or 400 k events per iteration; a window of 8 MiB or 16 k events.
  const uint64_t count =
      std::max<uint64_t>(kCreditEvery, std::min<uint64_t>(400'000, (64u << 20) / body)) /
      kCreditEvery * kCreditEvery;
  const uint64_t window = std::max<uint64_t>(
      2 * kCreditEvery, std::min<uint64_t>(16 * kCreditEvery, (8u << 20) / body));
  int64_t events = 0;
  const uint64_t written_before = pair.Session(1).bytes_written;
  const uint64_t allocations_before = troupe::bench::AllocationCount();
  for (auto _ : state) {
    // A fresh receiver count per iteration: the credits count from zero again.
    state.PauseTiming();
    const ActorId fresh = pair.node(2).Register(std::make_unique<StreamReceiver>());
    state.ResumeTiming();
    troupe::Notification done;
    pair.node(1).Register(std::make_unique<StreamSender>(fresh, count, body, window, &done));
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(120))) {
      state.SkipWithError("the stream did not finish within 120 s");
      return;
    }
    events += static_cast<int64_t>(count);
  }
  state.SetItemsProcessed(events);
  state.SetBytesProcessed(events * static_cast<int64_t>(body));
  // Everything node 1 wrote (frames, records, its few acknowledgements) per event streamed.
  state.counters["wire_bytes_per_event"] =
      static_cast<double>(pair.Session(1).bytes_written - written_before) /
      static_cast<double>(std::max<int64_t>(events, 1));
  // Calls of operator new per event, both nodes and every thread. The event itself costs one on
  // each side when its body is over 15 bytes: the protobuf string the sender fills and the one
  // the receiver parses into.
  state.counters["allocs_per_event"] =
      static_cast<double>(troupe::bench::AllocationCount() - allocations_before) /
      static_cast<double>(std::max<int64_t>(events, 1));
}
void BM_RemoteStream(benchmark::State& state) { RemoteStream(state, /*tls=*/false); }
void BM_RemoteStreamTls(benchmark::State& state) { RemoteStream(state, /*tls=*/true); }
BENCHMARK(BM_RemoteStream)
    ->ArgNames({"proxies_in_user_pool", "body"})
    ->ArgsProduct({{0, 1}, {64, 64 << 10}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RemoteStreamTls)
    ->ArgNames({"proxies_in_user_pool", "body"})
    ->ArgsProduct({{0, 1}, {64, 64 << 10}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Serves round trips to `ponger` and records each one's time: `warmup` first, unrecorded.
class TimedPinger final : public Actor {
 public:
  TimedPinger(ActorId ponger, int64_t warmup, int64_t count, std::vector<double>* rtt_us,
              troupe::Notification* done)
      : Actor(&TimedPinger::StateWork),
        ponger_(ponger),
        warmup_(warmup),
        left_(warmup + count),
        rtt_us_(rtt_us),
        done_(done) {}

 private:
  void Bootstrap() override {
    sent_at_ = absl::Now();
    Send(ponger_, std::make_unique<EvBlob>());
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlob) {
      Unhandled(ev);
      return;
    }
    const absl::Time now = absl::Now();
    if (warmup_ > 0) {
      --warmup_;
    } else {
      rtt_us_->push_back(absl::ToDoubleMicroseconds(now - sent_at_));
    }
    if (--left_ > 0) {
      sent_at_ = now;
      Forward(ponger_, ev);
    } else {
      done_->Notify();
      PassAway();
    }
  }

  ActorId ponger_;
  int64_t warmup_;
  int64_t left_;
  std::vector<double>* rtt_us_;
  troupe::Notification* done_;
  absl::Time sent_at_;
};

double Percentile(std::vector<double> samples, double fraction) {
  if (samples.empty()) {
    return 0;
  }
  const auto at = static_cast<size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(at), samples.end());
  return samples[at];
}

// Head-of-line blocking: the round trips of small events between two actors, alone (bulk:0) or
// while another pair of actors (in the Bulk pool of each node) streams 8 MiB events from node 1
// to node 2 over the same session (bulk:1, two in flight; bulk:2, the same with the Bulk pools at
// nice 19). Reports the median and p99 round trip and the bulk stream's MB/s.
void BM_RemotePingPongUnderBulk(benchmark::State& state) {
  const bool bulk = state.range(1) != 0;
  Pair pair(ProxyPool(state), /*tls_dir=*/"", state.range(1) == 2 ? 19 : 0);
  const ActorId ponger = pair.node(2).Register(std::make_unique<Ponger>());
  std::atomic<bool> stop{false};
  troupe::Notification bulk_done;
  const uint64_t read_before = pair.Session(2).bytes_read;
  const absl::Time bulk_start = absl::Now();
  if (bulk) {
    // In their own pool: the 8 MiB copies of making and parsing the events do not run on the
    // worker of the ping-pong actors.
    auto on_bulk = [&pair](NodeId node) {
      return RegisterOptions{.pool = *pair.node(node).PoolIndex("Bulk")};
    };
    const ActorId sink = pair.node(2).Register(std::make_unique<StreamReceiver>(1), on_bulk(2));
    // 8 MiB with the envelope of the message: the default max_event_size.
    pair.node(1).Register(
        std::make_unique<StreamSender>(sink, UINT64_MAX, (8u << 20) - 16, 2, &bulk_done, &stop),
        on_bulk(1));
  }
  std::vector<double> rtt_us;
  for (auto _ : state) {
    troupe::Notification done;
    pair.node(1).Register(std::make_unique<TimedPinger>(ponger, 200, 2000, &rtt_us, &done));
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(60))) {
      state.SkipWithError("ping-pong did not finish within 60 s");
      break;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - bulk_start);
  stop.store(true, std::memory_order_relaxed);
  if (bulk) {
    (void)bulk_done.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  state.counters["p50_us"] = Percentile(rtt_us, 0.5);
  state.counters["p99_us"] = Percentile(rtt_us, 0.99);
  state.counters["bulk_MBps"] =
      static_cast<double>(pair.Session(2).bytes_read - read_before) / seconds / 1e6;
}
BENCHMARK(BM_RemotePingPongUnderBulk)
    ->ArgNames({"proxies_in_user_pool", "bulk"})
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace troupe::interconnect
