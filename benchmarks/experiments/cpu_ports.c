// Reciprocal throughput of 512-bit instructions on one core, alone and in pairs (independent destinations: a chain
// shows latency instead), to tell which port each uses: 0.5 cycles = two ports (p0 and p5 on Intel's server cores),
// 1.0 = one. Cycles at 3.1 GHz. gcc -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512vnni -mavx512ifma cpu_ports.c
// Throughput of zmm instructions alone and in pairs: cycles per instruction at 3.1 GHz (min over short runs).
#include <stdio.h>
#include <time.h>
static double now(){struct timespec a; clock_gettime(CLOCK_MONOTONIC,&a); return a.tv_sec+a.tv_nsec*1e-9;}
#define N 20000
#define REP8(x) x x x x x x x x
#define BENCH(name, count, body) { double best=1e9; for(int r=0;r<300;r++){ double a=now(); for(int i=0;i<N;i++){ __asm__ volatile(body ::: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23"); } double s=now()-a; if(s<best)best=s;} printf("%-28s %.2f cycles/instr\n", name, best*3.1e9/N/(count)); }
int main(){
  __asm__ volatile("vpxord %%zmm0,%%zmm0,%%zmm0\n vpternlogd $0xff,%%zmm8,%%zmm8,%%zmm8\n vpternlogd $0xff,%%zmm9,%%zmm9,%%zmm9" ::: "xmm0","xmm8","xmm9");
  BENCH("vpdpbusd", 8, "vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n vpdpbusd %%zmm8,%%zmm9,%%zmm3\n vpdpbusd %%zmm8,%%zmm9,%%zmm4\n vpdpbusd %%zmm8,%%zmm9,%%zmm5\n vpdpbusd %%zmm8,%%zmm9,%%zmm6\n vpdpbusd %%zmm8,%%zmm9,%%zmm7\n");
  BENCH("vpmaddubsw", 8, REP8("vpmaddubsw %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpmaddwd", 8, REP8("vpmaddwd %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpslld", 8, REP8("vpslld $7,%%zmm8,%%zmm16\n"));
  BENCH("vpaddd", 8, REP8("vpaddd %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpermb", 8, REP8("vpermb %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpermt2b", 8, "vpermt2b %%zmm8,%%zmm9,%%zmm16\n vpermt2b %%zmm8,%%zmm9,%%zmm17\n vpermt2b %%zmm8,%%zmm9,%%zmm18\n vpermt2b %%zmm8,%%zmm9,%%zmm19\n vpermt2b %%zmm8,%%zmm9,%%zmm20\n vpermt2b %%zmm8,%%zmm9,%%zmm21\n vpermt2b %%zmm8,%%zmm9,%%zmm22\n vpermt2b %%zmm8,%%zmm9,%%zmm23\n");
  BENCH("vpshufb", 8, REP8("vpshufb %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vptestnmd->k", 8, REP8("vptestnmd %%zmm8,%%zmm9,%%k1\n"));
  BENCH("vpsrld", 8, REP8("vpsrld $21,%%zmm8,%%zmm16\n"));
  BENCH("vpackssdw", 8, REP8("vpackssdw %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vfmadd231ps", 8, "vfmadd231ps %%zmm8,%%zmm9,%%zmm0\n vfmadd231ps %%zmm8,%%zmm9,%%zmm1\n vfmadd231ps %%zmm8,%%zmm9,%%zmm2\n vfmadd231ps %%zmm8,%%zmm9,%%zmm3\n vfmadd231ps %%zmm8,%%zmm9,%%zmm4\n vfmadd231ps %%zmm8,%%zmm9,%%zmm5\n vfmadd231ps %%zmm8,%%zmm9,%%zmm6\n vfmadd231ps %%zmm8,%%zmm9,%%zmm7\n");
  BENCH("vcvtdq2ps", 8, REP8("vcvtdq2ps %%zmm8,%%zmm16\n"));
  BENCH("vpmultishiftqb", 8, REP8("vpmultishiftqb %%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpshldd", 8, REP8("vpshldd $7,%%zmm8,%%zmm9,%%zmm16\n"));
  BENCH("vpmadd52luq", 8, "vpmadd52luq %%zmm8,%%zmm9,%%zmm0\n vpmadd52luq %%zmm8,%%zmm9,%%zmm1\n vpmadd52luq %%zmm8,%%zmm9,%%zmm2\n vpmadd52luq %%zmm8,%%zmm9,%%zmm3\n vpmadd52luq %%zmm8,%%zmm9,%%zmm4\n vpmadd52luq %%zmm8,%%zmm9,%%zmm5\n vpmadd52luq %%zmm8,%%zmm9,%%zmm6\n vpmadd52luq %%zmm8,%%zmm9,%%zmm7\n");
  BENCH("dpbusd+slld", 8, "vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vpslld $7,%%zmm8,%%zmm16\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vpslld $7,%%zmm8,%%zmm17\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n vpslld $7,%%zmm8,%%zmm18\n vpdpbusd %%zmm8,%%zmm9,%%zmm3\n vpslld $7,%%zmm8,%%zmm19\n");
  BENCH("dpbusd+permb", 8, "vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vpermb %%zmm8,%%zmm9,%%zmm16\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vpermb %%zmm8,%%zmm9,%%zmm17\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n vpermb %%zmm8,%%zmm9,%%zmm18\n vpdpbusd %%zmm8,%%zmm9,%%zmm3\n vpermb %%zmm8,%%zmm9,%%zmm19\n");
  BENCH("slld+permb", 8, "vpslld $7,%%zmm8,%%zmm20\n vpermb %%zmm8,%%zmm9,%%zmm16\n vpslld $7,%%zmm8,%%zmm21\n vpermb %%zmm8,%%zmm9,%%zmm17\n vpslld $7,%%zmm8,%%zmm22\n vpermb %%zmm8,%%zmm9,%%zmm18\n vpslld $7,%%zmm8,%%zmm23\n vpermb %%zmm8,%%zmm9,%%zmm19\n");
  BENCH("dpbusd+testnm", 8, "vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vptestnmd %%zmm8,%%zmm9,%%k1\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vptestnmd %%zmm8,%%zmm9,%%k2\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n vptestnmd %%zmm8,%%zmm9,%%k3\n vpdpbusd %%zmm8,%%zmm9,%%zmm3\n vptestnmd %%zmm8,%%zmm9,%%k4\n");
  BENCH("dpbusd+fma", 8, "vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vfmadd231ps %%zmm8,%%zmm9,%%zmm4\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vfmadd231ps %%zmm8,%%zmm9,%%zmm5\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n vfmadd231ps %%zmm8,%%zmm9,%%zmm6\n vpdpbusd %%zmm8,%%zmm9,%%zmm3\n vfmadd231ps %%zmm8,%%zmm9,%%zmm7\n");
  BENCH("fma+permb", 8, "vfmadd231ps %%zmm8,%%zmm9,%%zmm0\n vpermb %%zmm8,%%zmm9,%%zmm16\n vfmadd231ps %%zmm8,%%zmm9,%%zmm1\n vpermb %%zmm8,%%zmm9,%%zmm17\n vfmadd231ps %%zmm8,%%zmm9,%%zmm2\n vpermb %%zmm8,%%zmm9,%%zmm18\n vfmadd231ps %%zmm8,%%zmm9,%%zmm3\n vpermb %%zmm8,%%zmm9,%%zmm19\n");
  BENCH("paddd+permb+dpbusd", 9, "vpaddd %%zmm8,%%zmm9,%%zmm20\n vpermb %%zmm8,%%zmm9,%%zmm16\n vpdpbusd %%zmm8,%%zmm9,%%zmm0\n vpaddd %%zmm8,%%zmm9,%%zmm21\n vpermb %%zmm8,%%zmm9,%%zmm17\n vpdpbusd %%zmm8,%%zmm9,%%zmm1\n vpaddd %%zmm8,%%zmm9,%%zmm22\n vpermb %%zmm8,%%zmm9,%%zmm18\n vpdpbusd %%zmm8,%%zmm9,%%zmm2\n");
  return 0;
}
