// The product's uint8 spans (csrc/img2gray_cpu_simd.h) and the variants of cpu_spans_variants.h against a memcpy of
// the same bytes (half read, half written, as bench_op's copy), on one thread, at a frame's pixel count:
//   g++ -std=c++17 -O3 -ffp-contract=off -I csrc -isystem $(python -c 'import torch,os;print(os.path.dirname(torch.__file__))')/include \
//       benchmarks/experiments/cpu_spans.cpp -o /tmp/cpu_spans && /tmp/cpu_spans PIXELS [ROUNDS] [NAME-FILTER]
// Per round each candidate's best of 10 calls; the median over rounds; cycles at 3.1 GHz (the Xeon of issue 54: a
// chain of dependent imul runs 3.1e9 a second there). Each variant's output is compared with the product's first.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
#include "img2gray.h"
#include "img2gray_cpu_simd.h"
#include "cpu_spans_variants.h"
using namespace img2gray;
static double now_ms(){return std::chrono::duration<double,std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(int argc,char**argv){
  int64_t n = argc>1? atoll(argv[1]) : 1280*720;
  int rounds = argc>2? atoi(argv[2]) : 15;
  const char* only = argc>3? argv[3] : "";
  std::vector<uint8_t> rgb(3*n+64), out2(n); std::vector<uint8_t> outbuf(n+64); uint8_t* outp = (uint8_t*)(((uintptr_t)outbuf.data()+63)&~(uintptr_t)63); struct V{uint8_t* p; uint8_t* data(){return p;} uint8_t* begin(){return p;}} out{outp};
  srand(1); for(auto& v: rgb) v = rand()&255;
  int64_t moved = 4*n; std::vector<uint8_t> src(moved/2), dst(moved/2); memset(src.data(),1,src.size()); memset(dst.data(),0,dst.size());
  Weights<float> w{0.299f,0.587f,0.114f};
  simd::U8Call vnni{simd::CpuIsa::Avx512Vnni, w, simd::fixed_point(w), false};
  simd::U8Call f512{simd::CpuIsa::Avx512, w, simd::fixed_point(w), false};
  const uint8_t* R=rgb.data(); const uint8_t* G=R+n; const uint8_t* B=G+n;
  std::vector<std::pair<std::string,std::function<void()>>> c = {
    {"memcpy", [&]{memcpy(dst.data(),src.data(),src.size());}},
    {"vnni-hwc", [&]{simd::interleaved_u8(rgb.data(),out.data(),n,vnni);}},
    {"f512-hwc", [&]{simd::interleaved_u8(rgb.data(),out.data(),n,f512);}},
    {"vnni-planar", [&]{simd::planar_u8(R,G,B,out.data(),n,vnni);}},
  };
  add_variants(c, rgb.data(), out.data(), n, w);
  // check variants against the product
  simd::interleaved_u8(rgb.data(),out2.data(),n,vnni);
  for(auto& [name,f]: c){ if(name.rfind("v-",0)==0){ memset(outp,7,n); f(); int64_t done=(n-6)/64*64; if(memcmp(out.data(),out2.data(),done)) printf("MISMATCH %s\n",name.c_str()); } }
  std::vector<std::pair<std::string,std::vector<double>>> t;
  for(auto& [name,f]: c){ if(*only && name!="memcpy" && name.find(only)==std::string::npos) continue; t.push_back({name,{}}); }
  for(int r=0;r<rounds+1;r++) for(auto& [name,times]: t){ auto& f = std::find_if(c.begin(),c.end(),[&](auto&p){return p.first==name;})->second;
      double best=1e9; for(int k=0;k<10;k++){double a=now_ms(); f(); double b=now_ms(); best=std::min(best,b-a);} if(r) times.push_back(best);}
  double copy=0; for(auto&[name,times]:t){ std::sort(times.begin(),times.end()); double med=times[times.size()/2]; if(name=="memcpy") copy=med;
    printf("%-22s %8.4f ms  %6.1f%% copy  %5.2f cyc/16px  [%.4f-%.4f]\n", name.c_str(), med, 100*copy/med, med*1e-3*3.1e9/(n/16.0), times.front(), times.back()); }
  return 0;
}
