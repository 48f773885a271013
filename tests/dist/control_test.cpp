// The multi-process launch: the environment a launcher sets (dist/launch.h) and the control
// plane between the processes (dist/control.h) over real loopback sockets.
#include "dist/control.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <map>
#include <string>
#include <thread>

#include "core/status.h"
#include "dist/launch.h"
#include "dist/tp_group.h"
#include "model/weights.h"
#include "test_models.h"

namespace ceiling::dist {
namespace {

using namespace std::chrono_literals;

ProcessGroup from(const std::map<std::string, std::string>& env) {
  return process_group_from_env([&](const char* n) -> const char* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Launch, NoEnvironmentIsOneProcess) {
  const ProcessGroup g = from({});
  EXPECT_EQ(g.size, 1);
  EXPECT_EQ(g.rank, 0);
  EXPECT_FALSE(g.multi());
}

TEST(Launch, TorchrunMpirunAndSlurmVariables) {
  ProcessGroup g = from(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29501"}});
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.size, 2);
  EXPECT_EQ(g.master_addr, "10.0.0.7");
  EXPECT_EQ(g.master_port, 29501);
  g = from({{"OMPI_COMM_WORLD_RANK", "3"},
            {"OMPI_COMM_WORLD_SIZE", "4"},
            {"MASTER_ADDR", "h0"},
            {"MASTER_PORT", "1234"}});
  EXPECT_EQ(g.rank, 3);
  EXPECT_EQ(g.size, 4);
  g = from({{"SLURM_PROCID", "0"},
            {"SLURM_NTASKS", "2"},
            {"MASTER_ADDR", "h0"},
            {"MASTER_PORT", "1234"}});
  EXPECT_EQ(g.rank, 0);
  EXPECT_EQ(g.size, 2);
  EXPECT_EQ(ranks_per_process(g, 8), 4);
}

TEST(Launch, BadEnvironmentNamesTheVariable) {
  EXPECT_NE(error_of([] {
              from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
            }).find("MASTER_ADDR"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        from({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
      }).find("RANK='2'"),
      std::string::npos);
  EXPECT_NE(
      error_of([] {
        from({{"RANK", "0"}, {"WORLD_SIZE", "x"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
      }).find("WORLD_SIZE='x'"),
      std::string::npos);
  EXPECT_NE(
      error_of([] {
        from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}});
      }).find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              from({{"WORLD_SIZE", "2"}});
            }).find("RANK is not set"),
            std::string::npos);
  ProcessGroup g;
  g.size = 3;
  EXPECT_NE(error_of([&] { ranks_per_process(g, 4); }).find("multiple of the process count"),
            std::string::npos);
}

TEST(Control, PayloadsRoundTrip) {
  engine::StepBatch s;
  s.token_ids = {5, 6, 7};
  s.positions = {0, 1, 9};
  s.slot_mapping = {16, 17, 41};
  s.query_start = {0, 2, 3};
  s.seq_lens = {2, 10};
  s.max_blocks = 3;
  s.block_tables = {4, -1, -1, 7, 9, 10};
  s.logits_rows = {1, 2};
  const engine::StepBatch t = decode_step(encode(s));
  EXPECT_EQ(t.token_ids, s.token_ids);
  EXPECT_EQ(t.positions, s.positions);
  EXPECT_EQ(t.slot_mapping, s.slot_mapping);
  EXPECT_EQ(t.query_start, s.query_start);
  EXPECT_EQ(t.seq_lens, s.seq_lens);
  EXPECT_EQ(t.max_blocks, s.max_blocks);
  EXPECT_EQ(t.block_tables, s.block_tables);
  EXPECT_EQ(t.logits_rows, s.logits_rows);

  Hello h{3, 4, 8, 2, 0x1234567890abcdefull, "llama-3.1-70b"};
  const Hello h2 = decode_hello(encode(h));
  EXPECT_EQ(h2.process, 3);
  EXPECT_EQ(h2.processes, 4);
  EXPECT_EQ(h2.world, 8);
  EXPECT_EQ(h2.local_ranks, 2);
  EXPECT_EQ(h2.fingerprint, h.fingerprint);
  EXPECT_EQ(h2.model, h.model);

  const InitMsg i = decode_init(encode(InitMsg{{512, 64}, 1000, 16}));
  EXPECT_EQ(i.limits.max_tokens, 512);
  EXPECT_EQ(i.limits.max_logits_rows, 64);
  EXPECT_EQ(i.num_blocks, 1000);
  EXPECT_EQ(i.block_size, 16);
  EXPECT_EQ(decode_text(encode_text("rank 3: out of memory")), "rank 3: out of memory");

  std::vector<uint8_t> cut = encode(s);
  cut.resize(cut.size() - 3);
  EXPECT_NE(error_of([&] { decode_step(cut); }).find("truncated"), std::string::npos);
  std::vector<uint8_t> extra = encode(h);
  extra.push_back(0);
  EXPECT_NE(error_of([&] { decode_hello(extra); }).find("trailing"), std::string::npos);
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t l = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(Control, MessagesOverLoopbackAndAClosedPeer) {
  const int port = free_port();
  auto server =
      std::async(std::launch::async, [&] { return accept_workers("127.0.0.1", port, 2, 10s); });
  // The workers may start first: connect_to_master retries until process 0 listens.
  auto w1 = connect_to_master("127.0.0.1", port, 10s);
  auto w2 = connect_to_master("127.0.0.1", port, 10s);
  auto conns = server.get();
  ASSERT_EQ(conns.size(), 2u);
  engine::StepBatch s;
  s.token_ids = {1, 2, 3};
  w1->send(MsgType::kStep, encode(s));
  w2->send(MsgType::kOk);
  std::map<MsgType, int> seen;
  for (auto& c : conns) {
    const Message m = c->recv_within(5s);
    ++seen[m.type];
    if (m.type == MsgType::kStep) {
      EXPECT_EQ(decode_step(m.payload).token_ids, s.token_ids);
    }
  }
  EXPECT_EQ(seen[MsgType::kStep], 1);
  EXPECT_EQ(seen[MsgType::kOk], 1);
  // Silence past the deadline, then a peer that exits: both are one-line errors.
  EXPECT_NE(error_of([&] { conns[0]->recv_within(50ms); }).find("within 50 ms"), std::string::npos);
  w1.reset();
  w2.reset();
  for (auto& c : conns) {
    EXPECT_NE(error_of([&] { c->recv(); }).find("closed the connection"), std::string::npos);
  }
}

TEST(Control, MissingWorkersAndNoMasterAreOneLineErrors) {
  const int port = free_port();
  EXPECT_NE(error_of([&] {
              accept_workers("127.0.0.1", port, 1, 200ms);
            }).find("0 of 1 worker processes connected within 200 ms"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              connect_to_master("127.0.0.1", free_port(), 300ms);
            }).find("did not accept a connection within 300 ms"),
            std::string::npos);
}

TEST(Control, MultiProcessGroupsNeedCuda) {
  const ModelConfig c = engine::testing::small_config(Arch::kLlama);
  TpOptions o;
  o.world = 2;
  o.device = "cpu";
  o.process.size = 2;
  o.process.rank = 1;
  EXPECT_NE(error_of([&] { TpGroup g(c, ModelWeights{}, o); }).find("needs --device cuda"),
            std::string::npos);
}

}  // namespace
}  // namespace ceiling::dist
