// NCCL profiler interface v5 (NCCL 2.28; 2.29+ loads it through an adapter). Differences from
// v4: `type` is 64 bits, four API-level events join the union (in front, so every v4 member
// keeps its offset), coll/p2p gain parentGroup, and init takes the communicator id second.
#pragma once

#include "abi_common.h"

namespace laggard::nccl::abi {

struct GroupApiDescr {
  bool graphCaptured;  // NCCL's own example once declared this int: reading it as int picks up padding
  int groupDepth;
};
struct CollApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};
struct P2pApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};
struct KernelLaunchDescr {
  void* stream;
};

struct CollDescrV5 {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;  // the Group event; parentObj is the CollApi event
};

struct P2pDescrV5 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
};

struct DescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                 int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};

static_assert(sizeof(DescrV5) == 112 && alignof(DescrV5) == 8);
static_assert(offsetof(DescrV5, parentObj) == 8 && offsetof(DescrV5, rank) == 16);
static_assert(offsetof(DescrV5, groupApi.graphCaptured) == 24 && offsetof(DescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(DescrV5, collApi.root) == 48 && offsetof(DescrV5, collApi.graphCaptured) == 64 &&
              offsetof(DescrV5, p2pApi.graphCaptured) == 56 && offsetof(DescrV5, kernelLaunch.stream) == 24);
static_assert(offsetof(DescrV5, coll.seqNumber) == 24 && offsetof(DescrV5, coll.func) == 32 &&
              offsetof(DescrV5, coll.count) == 56 && offsetof(DescrV5, coll.root) == 64 &&
              offsetof(DescrV5, coll.datatype) == 72 && offsetof(DescrV5, coll.nChannels) == 80 &&
              offsetof(DescrV5, coll.algo) == 88 && offsetof(DescrV5, coll.proto) == 96 &&
              offsetof(DescrV5, coll.parentGroup) == 104);
static_assert(offsetof(DescrV5, p2p.count) == 48 && offsetof(DescrV5, p2p.peer) == 56 &&
              offsetof(DescrV5, p2p.nChannels) == 60 && offsetof(DescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(DescrV5, kernelCh.channelId) == 24 && offsetof(DescrV5, kernelCh.pTimer) == 32);
static_assert(sizeof(ProfilerV5) == 48 && offsetof(ProfilerV5, startEvent) == 16 &&
              offsetof(ProfilerV5, finalize) == 40);

}  // namespace laggard::nccl::abi
