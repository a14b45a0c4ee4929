// NCCL profiler interface v6 (NCCL 2.29 to at least 2.31.0a): v5 plus three copy-engine
// collective events appended to the union. Every v5 member keeps its offset and the size stays
// 112, so the v6 table reuses the v5 code; laggard never enables the Ce* events (their
// collectives carry no KernelCh timing) and ignores them if they come anyway.
#pragma once

#include "abi_v5.h"

namespace laggard::nccl::abi {

struct CeCollDescr {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};
struct CeCollSyncDescr {
  bool isComplete;
  int nRanks;
};
struct CeCollBatchDescr {
  int numOps;
  size_t totalBytes;
  bool useIntraSync;
};

struct DescrV6 {
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
    CeCollDescr ceColl;
    CeCollSyncDescr ceCollSync;
    CeCollBatchDescr ceCollBatch;
  };
};

struct ProfilerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                 int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, DescrV6* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};

static_assert(sizeof(DescrV6) == 112 && alignof(DescrV6) == 8);
static_assert(offsetof(DescrV6, coll.seqNumber) == offsetof(DescrV5, coll.seqNumber) &&
              offsetof(DescrV6, coll.parentGroup) == offsetof(DescrV5, coll.parentGroup) &&
              offsetof(DescrV6, p2p.parentGroup) == offsetof(DescrV5, p2p.parentGroup) &&
              offsetof(DescrV6, kernelCh.pTimer) == offsetof(DescrV5, kernelCh.pTimer));
static_assert(offsetof(DescrV6, ceColl.syncStrategy) == 80 && offsetof(DescrV6, ceColl.intraBatchSync) == 88 &&
              offsetof(DescrV6, ceColl.batchSize) == 92 && offsetof(DescrV6, ceColl.ceSeqNum) == 100 &&
              offsetof(DescrV6, ceColl.stream) == 104);
static_assert(offsetof(DescrV6, ceCollSync.nRanks) == 28 && offsetof(DescrV6, ceCollBatch.totalBytes) == 32 &&
              offsetof(DescrV6, ceCollBatch.useIntraSync) == 40);
static_assert(sizeof(ProfilerV6) == 48);

}  // namespace laggard::nccl::abi
