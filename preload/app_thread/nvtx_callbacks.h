// NVTX tool callbacks (what NVTX calls instead of its no-op stubs once laggard is attached).
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace laggard::nvtx {

int push_a(const char* message);
int push_w(const wchar_t* message);
int push_ex(const nvtxEventAttributes_t* attr);
int pop();
nvtxRangeId_t start_a(const char* message);
nvtxRangeId_t start_w(const wchar_t* message);
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* attr);
void end(nvtxRangeId_t id);

int domain_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr);
int domain_pop(nvtxDomainHandle_t domain);
nvtxRangeId_t domain_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr);
void domain_end(nvtxDomainHandle_t domain, nvtxRangeId_t id);
nvtxDomainHandle_t domain_create_a(const char* name);
nvtxDomainHandle_t domain_create_w(const wchar_t* name);
void domain_destroy(nvtxDomainHandle_t domain);
nvtxStringHandle_t domain_register_string_a(nvtxDomainHandle_t domain, const char* s);
nvtxStringHandle_t domain_register_string_w(nvtxDomainHandle_t domain, const wchar_t* s);

}  // namespace laggard::nvtx
