// Pins our ABI header against the layout NCCL 2.28.9 uses (shared/reference/
// nccl-net-plugin.md §1.3-1.4b), independently written down here as numbers for LP64:
// every offset and size of the properties structs and function tables, per version.
// Then checks the loaded tables: name "zcx", mandatory members set, offload members NULL.
#include "nccl/net_abi.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace {

#define ZCX_EXPECT_OFF(type, member, off) EXPECT_EQ(offsetof(type, member), size_t{off}) << #type "." #member

TEST(PluginAbi, ConstantsMatchNccl) {
  EXPECT_EQ(NCCL_NET_HANDLE_MAXSIZE, 128);
  EXPECT_EQ(NCCL_PTR_HOST, 1);
  EXPECT_EQ(NCCL_PTR_CUDA, 2);
  EXPECT_EQ(NCCL_PTR_DMABUF, 4);
  EXPECT_EQ(NCCL_NET_OPTIONAL_RECV_COMPLETION, 1);
  EXPECT_EQ(NCCL_MAX_NET_SIZE_BYTES, 1ull << 40);
  EXPECT_EQ(NCCL_NET_MAX_DEVS_PER_NIC, 4);
  EXPECT_EQ(static_cast<int>(ncclRemoteError), 6);
  EXPECT_EQ(static_cast<int>(ncclInvalidUsage), 5);
  EXPECT_EQ(static_cast<int>(NCCL_LOG_INFO), 3);
  EXPECT_EQ(NCCL_NET, 16);
  EXPECT_EQ(sizeof(ncclNetDeviceType), 4u);
  EXPECT_EQ(sizeof(ncclResult_t), 4u);
  EXPECT_EQ(sizeof(ncclNetVDeviceProps_t), 20u);
  EXPECT_EQ(sizeof(ncclNetCommConfig_t), 4u);
  EXPECT_EQ(sizeof(ncclNetAttr_v11_t), 44u);
}

// Fields shared by v9, v10 and v11 properties.
template <typename P>
void expect_v9_props_prefix() {
  ZCX_EXPECT_OFF(P, name, 0);
  ZCX_EXPECT_OFF(P, pciPath, 8);
  ZCX_EXPECT_OFF(P, guid, 16);
  ZCX_EXPECT_OFF(P, ptrSupport, 24);
  ZCX_EXPECT_OFF(P, regIsGlobal, 28);
  ZCX_EXPECT_OFF(P, forceFlush, 32);
  ZCX_EXPECT_OFF(P, speed, 36);
  ZCX_EXPECT_OFF(P, port, 40);
  ZCX_EXPECT_OFF(P, latency, 44);
  ZCX_EXPECT_OFF(P, maxComms, 48);
  ZCX_EXPECT_OFF(P, maxRecvs, 52);
  ZCX_EXPECT_OFF(P, netDeviceType, 56);
  ZCX_EXPECT_OFF(P, netDeviceVersion, 60);
  ZCX_EXPECT_OFF(P, vProps, 64);
  ZCX_EXPECT_OFF(P, maxP2pBytes, 88);
  ZCX_EXPECT_OFF(P, maxCollBytes, 96);
}

TEST(PluginAbi, PropertiesV11) {
  expect_v9_props_prefix<ncclNetProperties_v11_t>();
  ZCX_EXPECT_OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);
  EXPECT_EQ(sizeof(ncclNetProperties_v11_t), 112u);
}

TEST(PluginAbi, PropertiesV10AndV9) {
  expect_v9_props_prefix<ncclNetProperties_v10_t>();
  expect_v9_props_prefix<ncclNetProperties_v9_t>();
  EXPECT_EQ(sizeof(ncclNetProperties_v9_t), 104u);
  EXPECT_EQ(sizeof(ncclNetProperties_v10_t), 104u);
}

TEST(PluginAbi, PropertiesV8) {
  using P = ncclNetProperties_v8_t;
  ZCX_EXPECT_OFF(P, name, 0);
  ZCX_EXPECT_OFF(P, pciPath, 8);
  ZCX_EXPECT_OFF(P, guid, 16);
  ZCX_EXPECT_OFF(P, ptrSupport, 24);
  ZCX_EXPECT_OFF(P, regIsGlobal, 28);
  ZCX_EXPECT_OFF(P, speed, 32);
  ZCX_EXPECT_OFF(P, port, 36);
  ZCX_EXPECT_OFF(P, latency, 40);
  ZCX_EXPECT_OFF(P, maxComms, 44);
  ZCX_EXPECT_OFF(P, maxRecvs, 48);
  ZCX_EXPECT_OFF(P, netDeviceType, 52);
  ZCX_EXPECT_OFF(P, netDeviceVersion, 56);
  EXPECT_EQ(sizeof(P), 64u);
}

// Members common to every version's table, by slot (8 bytes each).
template <typename T>
void expect_table_prefix() {
  ZCX_EXPECT_OFF(T, name, 0);
  ZCX_EXPECT_OFF(T, init, 8);
  ZCX_EXPECT_OFF(T, devices, 16);
  ZCX_EXPECT_OFF(T, getProperties, 24);
  ZCX_EXPECT_OFF(T, listen, 32);
  ZCX_EXPECT_OFF(T, connect, 40);
  ZCX_EXPECT_OFF(T, accept, 48);
  ZCX_EXPECT_OFF(T, regMr, 56);
  ZCX_EXPECT_OFF(T, regMrDmaBuf, 64);
  ZCX_EXPECT_OFF(T, deregMr, 72);
  ZCX_EXPECT_OFF(T, isend, 80);
  ZCX_EXPECT_OFF(T, irecv, 88);
  ZCX_EXPECT_OFF(T, iflush, 96);
  ZCX_EXPECT_OFF(T, test, 104);
  ZCX_EXPECT_OFF(T, closeSend, 112);
  ZCX_EXPECT_OFF(T, closeRecv, 120);
  ZCX_EXPECT_OFF(T, closeListen, 128);
  ZCX_EXPECT_OFF(T, getDeviceMr, 136);
  ZCX_EXPECT_OFF(T, irecvConsumed, 144);
}

TEST(PluginAbi, FunctionTables) {
  expect_table_prefix<ncclNet_v8_t>();
  EXPECT_EQ(sizeof(ncclNet_v8_t), 152u);
  expect_table_prefix<ncclNet_v9_t>();
  ZCX_EXPECT_OFF(ncclNet_v9_t, makeVDevice, 152);
  EXPECT_EQ(sizeof(ncclNet_v9_t), 160u);
  expect_table_prefix<ncclNet_v10_t>();
  ZCX_EXPECT_OFF(ncclNet_v10_t, makeVDevice, 152);
  EXPECT_EQ(sizeof(ncclNet_v10_t), 160u);
  expect_table_prefix<ncclNet_v11_t>();
  ZCX_EXPECT_OFF(ncclNet_v11_t, makeVDevice, 152);
  ZCX_EXPECT_OFF(ncclNet_v11_t, finalize, 160);
  ZCX_EXPECT_OFF(ncclNet_v11_t, setNetAttr, 168);
  EXPECT_EQ(sizeof(ncclNet_v11_t), 176u);
}

template <typename T>
void expect_loaded_table(void* lib, const char* symbol) {
  auto* t = static_cast<T*>(dlsym(lib, symbol));
  ASSERT_NE(t, nullptr) << symbol;
  EXPECT_STREQ(t->name, "zcx") << symbol;  // what NCCL_NET compares (case-insensitively)
  EXPECT_TRUE(t->init && t->devices && t->getProperties && t->listen && t->connect && t->accept)
      << symbol;
  EXPECT_TRUE(t->regMr && t->regMrDmaBuf && t->deregMr && t->isend && t->irecv && t->iflush &&
              t->test && t->closeSend && t->closeRecv && t->closeListen) << symbol;
  EXPECT_EQ(t->getDeviceMr, nullptr) << symbol << ": host plugin, no device offload";
  EXPECT_EQ(t->irecvConsumed, nullptr) << symbol;
}

TEST(PluginAbi, ExportedTablesAsNcclLoadsThem) {
  void* lib = dlopen(ZCX_PLUGIN_REAL_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  expect_loaded_table<ncclNet_v8_t>(lib, "ncclNetPlugin_v8");
  expect_loaded_table<ncclNet_v9_t>(lib, "ncclNetPlugin_v9");
  expect_loaded_table<ncclNet_v10_t>(lib, "ncclNetPlugin_v10");
  expect_loaded_table<ncclNet_v11_t>(lib, "ncclNetPlugin_v11");
  auto* v11 = static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  EXPECT_NE(v11->finalize, nullptr);
  EXPECT_NE(v11->setNetAttr, nullptr);
  EXPECT_EQ(v11->makeVDevice, nullptr) << "no NIC fusion: NCCL uses physical devices";
  EXPECT_EQ(dlsym(lib, "ncclNetPlugin_v7"), nullptr);
  EXPECT_EQ(dlsym(lib, "ncclNetPlugin_v12"), nullptr);
  dlclose(lib);
}

}  // namespace
