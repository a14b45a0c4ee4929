// NCCL profiler interface v4 (the newest one in NCCL 2.27; 2.28+ still loads it through an
// adapter). laggard's own declarations; layout checked below.
#pragma once

#include "abi_common.h"

namespace laggard::nccl::abi {

struct CollDescrV4 {
  uint64_t seqNumber;  // per communicator and function: matches one collective across ranks
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
};

struct P2pDescrV4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
};

struct DescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescrV4 coll;
    P2pDescrV4 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                 int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};

static_assert(sizeof(DescrV4) == 104 && alignof(DescrV4) == 8);
static_assert(offsetof(DescrV4, parentObj) == 8 && offsetof(DescrV4, rank) == 16);
static_assert(offsetof(DescrV4, coll.seqNumber) == 24 && offsetof(DescrV4, coll.func) == 32 &&
              offsetof(DescrV4, coll.count) == 56 && offsetof(DescrV4, coll.root) == 64 &&
              offsetof(DescrV4, coll.datatype) == 72 && offsetof(DescrV4, coll.nChannels) == 80 &&
              offsetof(DescrV4, coll.nWarps) == 81 && offsetof(DescrV4, coll.algo) == 88 &&
              offsetof(DescrV4, coll.proto) == 96);
static_assert(offsetof(DescrV4, p2p.func) == 24 && offsetof(DescrV4, p2p.datatype) == 40 &&
              offsetof(DescrV4, p2p.count) == 48 && offsetof(DescrV4, p2p.peer) == 56 &&
              offsetof(DescrV4, p2p.nChannels) == 60);
static_assert(offsetof(DescrV4, proxyOp.pid) == 24 && offsetof(DescrV4, kernelCh.channelId) == 24 &&
              offsetof(DescrV4, kernelCh.pTimer) == 32 && offsetof(DescrV4, netPlugin.data) == 32);
static_assert(sizeof(ProfilerV4) == 48 && offsetof(ProfilerV4, init) == 8 &&
              offsetof(ProfilerV4, startEvent) == 16 && offsetof(ProfilerV4, stopEvent) == 24 &&
              offsetof(ProfilerV4, recordEventState) == 32 && offsetof(ProfilerV4, finalize) == 40);

}  // namespace laggard::nccl::abi
