#include "common/bootstrap/bootstrap.h"
#include "bootstrap/test_util.h"
#include "common/bootstrap/bootstrap_internal.h"

#include <gtest/gtest.h>

#include <string>

namespace zcx {
namespace {

using test::ScopedEnv;

TEST(LaunchEnv, NothingSetIsAClearError) {
  test::CleanLaunchEnv clean;
  LaunchInfo info;
  EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  EXPECT_NE(std::string(last_error()).find("ZCX_RANK"), std::string::npos) << last_error();
  EXPECT_EQ(launch_info_from_env(nullptr), Status::kInvalidArg);
}

TEST(LaunchEnv, ZcxRun) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("ZCX_RANK", "2"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1:5555"),
      s("ZCX_SECRET", "0123456789abcdef"), l("ZCX_LOCAL_RANK", "1"), j("ZCX_RUN_JOB", "77");
  LaunchInfo info;
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.nranks, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.id.secret, 0x0123456789abcdefull);
  EXPECT_EQ(info.id.root.to_string(), "127.0.0.1:5555");
  EXPECT_EQ(info.source, "zcx-run");
}

TEST(LaunchEnv, ZcxVariablesValidated) {
  test::CleanLaunchEnv clean;
  LaunchInfo info;
  {
    ScopedEnv r("ZCX_RANK", "4"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1:5555"),
        s("ZCX_SECRET", "1");
    EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);  // rank out of range
  }
  {
    ScopedEnv r("ZCX_RANK", "x"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1:5555");
    EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  }
  {
    ScopedEnv r("ZCX_RANK", "0"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1:5555");
    EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);  // no secret, no job id
    EXPECT_NE(std::string(last_error()).find("ZCX_SECRET"), std::string::npos);
  }
  {
    ScopedEnv r("ZCX_RANK", "0"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1"),
        s("ZCX_SECRET", "1");
    EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);  // no port
  }
  {
    ScopedEnv r("ZCX_RANK", "0"), n("ZCX_NRANKS", "4"), root("ZCX_ROOT", "127.0.0.1:1"),
        s("ZCX_SECRET", "not-hex");
    EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  }
}

TEST(LaunchEnv, Torchrun) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("RANK", "3"), n("WORLD_SIZE", "8"), l("LOCAL_RANK", "3"),
      a("MASTER_ADDR", "127.0.0.1"), p("MASTER_PORT", "29500"), j("TORCHELASTIC_RUN_ID", "abc");
  LaunchInfo info;
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.nranks, 8);
  EXPECT_EQ(info.local_rank, 3);
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.id.root.to_string(), "127.0.0.1:29501");  // MASTER_PORT + 1
  EXPECT_NE(info.id.secret, 0u);
  LaunchInfo again;
  ASSERT_EQ(launch_info_from_env(&again), Status::kSuccess);
  EXPECT_EQ(again.id.secret, info.id.secret);  // every rank derives the same one
  ScopedEnv other("TORCHELASTIC_RUN_ID", "def");
  ASSERT_EQ(launch_info_from_env(&again), Status::kSuccess);
  EXPECT_NE(again.id.secret, info.id.secret);
}

TEST(LaunchEnv, TorchrunZcxRootOverrides) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("RANK", "0"), n("WORLD_SIZE", "2"), a("MASTER_ADDR", "127.0.0.1"),
      p("MASTER_PORT", "29500"), root("ZCX_ROOT", "127.0.0.1:40000"), s("ZCX_SECRET", "ab");
  LaunchInfo info;
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.id.root.to_string(), "127.0.0.1:40000");
  EXPECT_EQ(info.id.secret, 0xabu);
}

TEST(LaunchEnv, MpirunNeedsZcxRoot) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("OMPI_COMM_WORLD_RANK", "1"), n("OMPI_COMM_WORLD_SIZE", "2"),
      l("OMPI_COMM_WORLD_LOCAL_RANK", "1"), j("OMPI_MCA_ess_base_jobid", "12345");
  LaunchInfo info;
  EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  EXPECT_NE(std::string(last_error()).find("ZCX_ROOT"), std::string::npos) << last_error();
  EXPECT_NE(std::string(last_error()).find("mpirun"), std::string::npos) << last_error();
  ScopedEnv root("ZCX_ROOT", "127.0.0.1:6000");
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.nranks, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "mpirun");
  EXPECT_NE(info.id.secret, 0u);
}

TEST(LaunchEnv, Srun) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("SLURM_PROCID", "5"), n("SLURM_NTASKS", "6"), l("SLURM_LOCALID", "1"),
      j("SLURM_JOB_ID", "999"), st("SLURM_STEP_ID", "0");
  LaunchInfo info;
  EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  EXPECT_NE(std::string(last_error()).find("srun"), std::string::npos) << last_error();
  ScopedEnv root("ZCX_ROOT", "127.0.0.1:6001");
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.nranks, 6);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "srun");
  uint64_t step0 = info.id.secret;
  ScopedEnv st1("SLURM_STEP_ID", "1");
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess);
  EXPECT_NE(info.id.secret, step0);
}

TEST(LaunchEnv, SrunWithoutJobIdNeedsSecret) {
  test::CleanLaunchEnv clean;
  ScopedEnv r("SLURM_PROCID", "0"), n("SLURM_NTASKS", "2"), root("ZCX_ROOT", "127.0.0.1:6001");
  LaunchInfo info;
  EXPECT_EQ(launch_info_from_env(&info), Status::kInvalidArg);
  ScopedEnv s("ZCX_SECRET", "42");
  ASSERT_EQ(launch_info_from_env(&info), Status::kSuccess) << last_error();
  EXPECT_EQ(info.id.secret, 0x42u);
}

TEST(LaunchEnv, InitFromEnvRunsAJob) {
  test::CleanLaunchEnv clean;
  UniqueId id;
  ASSERT_EQ(test::loopback_id(&id), Status::kSuccess);
  // Rank 0 takes the listener reserved by unique_id_create; env-launched ranks bind it.
  (void)take_reserved_listener(id);
  ScopedEnv n("ZCX_NRANKS", "1"), r("ZCX_RANK", "0"), root("ZCX_ROOT", id.root.to_string()),
      s("ZCX_SECRET", "abcdef");
  std::unique_ptr<Bootstrap> bs;
  ASSERT_EQ(Bootstrap::init_from_env(&bs), Status::kSuccess) << last_error();
  EXPECT_EQ(bs->rank(), 0);
  EXPECT_EQ(bs->nranks(), 1);
  EXPECT_EQ(bs->secret(), 0xabcdefu);
  EXPECT_EQ(bs->barrier(), Status::kSuccess);
}

}  // namespace
}  // namespace zcx
