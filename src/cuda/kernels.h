// The two kernels of `gpuman bench`, as PTX text: the driver compiles PTX for whatever GPU
// it runs on (JIT), so gpuman needs no CUDA toolkit at build time and one text serves
// every architecture from sm_50 on. The constants say how much work one launch does; the
// stand-in libcuda.so.1 of the tests (tests/fake_cuda/) reads them too, to turn a launch
// into a time.
#pragma once

namespace gpuman::cuda {

/// gpuman_fma(.u64 out, .u32 iters): each thread runs `iters` rounds of kFmasPerRound
/// single-precision fused multiply-adds (8 independent chains, so latency hides behind
/// other warps), then stores its sum to out[thread] so that nothing is optimised away.
/// FLOPs of a launch: threads x iters x kFmasPerRound x 2.
inline constexpr int kFmasPerRound = 32;
inline constexpr const char* kFmaKernel = "gpuman_fma";

/// gpuman_copy(.u64 src, .u64 dst, .u64 n): copies n 16-byte elements from src to dst,
/// grid-stride. Bytes moved by a launch: n x 16 read + n x 16 written.
inline constexpr int kCopyElementBytes = 16;
inline constexpr const char* kCopyKernel = "gpuman_copy";

inline constexpr const char kBenchPtx[] = R"PTX(//
// gpuman bench: FP32 FMA throughput and device memory bandwidth (src/cuda/kernels.h)
//
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpuman_fma(
  .param .u64 gpuman_fma_out,
  .param .u32 gpuman_fma_iters)
{
  .reg .pred %p;
  .reg .f32 %a<8>;
  .reg .f32 %m;
  .reg .f32 %c;
  .reg .u32 %i;
  .reg .u32 %n;
  .reg .u32 %r_tid;
  .reg .u32 %r_ctaid;
  .reg .u32 %r_ntid;
  .reg .u32 %gid;
  .reg .u64 %out;
  .reg .u64 %off;

  ld.param.u64 %out, [gpuman_fma_out];
  ld.param.u32 %n, [gpuman_fma_iters];
  cvta.to.global.u64 %out, %out;
  mov.u32 %r_tid, %tid.x;
  mov.u32 %r_ctaid, %ctaid.x;
  mov.u32 %r_ntid, %ntid.x;
  mad.lo.u32 %gid, %r_ctaid, %r_ntid, %r_tid;
  cvt.rn.f32.u32 %a0, %r_tid;
  add.f32 %a1, %a0, 0f3F800000;
  add.f32 %a2, %a0, 0f40000000;
  add.f32 %a3, %a0, 0f40400000;
  add.f32 %a4, %a0, 0f40800000;
  add.f32 %a5, %a0, 0f40A00000;
  add.f32 %a6, %a0, 0f40C00000;
  add.f32 %a7, %a0, 0f40E00000;
  mov.f32 %m, 0f3F7FFFFE;
  mov.f32 %c, 0f3A83126F;
  mov.u32 %i, 0;
  setp.eq.u32 %p, %n, 0;
  @%p bra FMA_DONE;
FMA_LOOP:
  fma.rn.f32 %a0, %a0, %m, %c;
  fma.rn.f32 %a1, %a1, %m, %c;
  fma.rn.f32 %a2, %a2, %m, %c;
  fma.rn.f32 %a3, %a3, %m, %c;
  fma.rn.f32 %a4, %a4, %m, %c;
  fma.rn.f32 %a5, %a5, %m, %c;
  fma.rn.f32 %a6, %a6, %m, %c;
  fma.rn.f32 %a7, %a7, %m, %c;
  fma.rn.f32 %a0, %a0, %m, %c;
  fma.rn.f32 %a1, %a1, %m, %c;
  fma.rn.f32 %a2, %a2, %m, %c;
  fma.rn.f32 %a3, %a3, %m, %c;
  fma.rn.f32 %a4, %a4, %m, %c;
  fma.rn.f32 %a5, %a5, %m, %c;
  fma.rn.f32 %a6, %a6, %m, %c;
  fma.rn.f32 %a7, %a7, %m, %c;
  fma.rn.f32 %a0, %a0, %m, %c;
  fma.rn.f32 %a1, %a1, %m, %c;
  fma.rn.f32 %a2, %a2, %m, %c;
  fma.rn.f32 %a3, %a3, %m, %c;
  fma.rn.f32 %a4, %a4, %m, %c;
  fma.rn.f32 %a5, %a5, %m, %c;
  fma.rn.f32 %a6, %a6, %m, %c;
  fma.rn.f32 %a7, %a7, %m, %c;
  fma.rn.f32 %a0, %a0, %m, %c;
  fma.rn.f32 %a1, %a1, %m, %c;
  fma.rn.f32 %a2, %a2, %m, %c;
  fma.rn.f32 %a3, %a3, %m, %c;
  fma.rn.f32 %a4, %a4, %m, %c;
  fma.rn.f32 %a5, %a5, %m, %c;
  fma.rn.f32 %a6, %a6, %m, %c;
  fma.rn.f32 %a7, %a7, %m, %c;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, %n;
  @%p bra FMA_LOOP;
FMA_DONE:
  add.f32 %a0, %a0, %a1;
  add.f32 %a2, %a2, %a3;
  add.f32 %a4, %a4, %a5;
  add.f32 %a6, %a6, %a7;
  add.f32 %a0, %a0, %a2;
  add.f32 %a4, %a4, %a6;
  add.f32 %a0, %a0, %a4;
  mul.wide.u32 %off, %gid, 4;
  add.u64 %out, %out, %off;
  st.global.f32 [%out], %a0;
  ret;
}

.visible .entry gpuman_copy(
  .param .u64 gpuman_copy_src,
  .param .u64 gpuman_copy_dst,
  .param .u64 gpuman_copy_n)
{
  .reg .pred %p;
  .reg .u32 %v<4>;
  .reg .u32 %r_tid;
  .reg .u32 %r_ctaid;
  .reg .u32 %r_ntid;
  .reg .u32 %r_nctaid;
  .reg .u32 %g;
  .reg .u64 %src;
  .reg .u64 %dst;
  .reg .u64 %n;
  .reg .u64 %i;
  .reg .u64 %stride;
  .reg .u64 %off;
  .reg .u64 %a;

  ld.param.u64 %src, [gpuman_copy_src];
  ld.param.u64 %dst, [gpuman_copy_dst];
  ld.param.u64 %n, [gpuman_copy_n];
  cvta.to.global.u64 %src, %src;
  cvta.to.global.u64 %dst, %dst;
  mov.u32 %r_tid, %tid.x;
  mov.u32 %r_ctaid, %ctaid.x;
  mov.u32 %r_ntid, %ntid.x;
  mov.u32 %r_nctaid, %nctaid.x;
  mad.lo.u32 %g, %r_ctaid, %r_ntid, %r_tid;
  cvt.u64.u32 %i, %g;
  mul.lo.u32 %g, %r_nctaid, %r_ntid;
  cvt.u64.u32 %stride, %g;
  setp.ge.u64 %p, %i, %n;
  @%p bra COPY_DONE;
COPY_LOOP:
  shl.b64 %off, %i, 4;
  add.u64 %a, %src, %off;
  ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%a];
  add.u64 %a, %dst, %off;
  st.global.v4.u32 [%a], {%v0, %v1, %v2, %v3};
  add.u64 %i, %i, %stride;
  setp.lt.u64 %p, %i, %n;
  @%p bra COPY_LOOP;
COPY_DONE:
  ret;
}
)PTX";

}  // namespace gpuman::cuda
