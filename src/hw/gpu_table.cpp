// The datasheet table. Each figure names its source; "derived" notes say how a per-GPU dense number
// was obtained from a published one (sparse figures halved, 8-GPU baseboard totals divided by 8).
// Where only third-party or device-query sources exist, the source says so.
#include <string>
#include <vector>

#include "hw/gpu_spec.h"

namespace ceiling::hw {
namespace {

constexpr double kT = 1e12;
constexpr double kG = 1e9;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Sources, named once.
const char* const kH100Datasheet =
    "NVIDIA H100 Tensor Core GPU datasheet "
    "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)";
const char* const kHopperWp =
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper "
    "(https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)";
const char* const kH200Page =
    "NVIDIA H200 product page / datasheet (https://www.nvidia.com/en-us/data-center/h200/)";
const char* const kHgxPage =
    "NVIDIA HGX platform page (https://www.nvidia.com/en-us/data-center/hgx/)";
const char* const kA100Datasheet =
    "NVIDIA A100 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/"
    "pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)";
const char* const kAmpereWp =
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper "
    "(https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-"
    "whitepaper.pdf)";
const char* const kAdaWp =
    "NVIDIA Ada GPU Architecture whitepaper v2.1 "
    "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)";
const char* const kL40sDatasheet =
    "NVIDIA L40S datasheet (https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413)";
const char* const kL4Datasheet =
    "NVIDIA L4 datasheet "
    "(https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet)";
const char* const kB200Query =
    "device query of a B200 quoted in pytorch/ao PR #4002 "
    "(https://github.com/pytorch/ao/pull/4002)";
const char* const kBlackwellUltraBlog =
    "NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra' (https://developer.nvidia.com/blog/"
    "inside-nvidia-blackwell-ultra-the-chip-powering-the-ai-factory-era)";
const char* const kB300Garden =
    "HGX B300 per-GPU table at https://glennklockwood.com/garden/processors/B300 (from NVIDIA's "
    "HGX "
    "page; third-party transcription, not checked against an NVIDIA datasheet)";

Figure f(double v, std::string src) {
  return Figure{v, std::move(src)};
}
std::string halved(const char* src, const char* sparse) {
  return std::string(src) + ": " + sparse + " with sparsity, halved for dense";
}

GpuSpec h100_sxm() {
  GpuSpec g;
  g.id = "h100-sxm";
  g.name = "NVIDIA H100 SXM5 80GB";
  g.arch = "hopper";
  g.sm_count = f(132, kHopperWp);
  g.boost_clock_mhz = f(1980, std::string("max SM clock reported by the driver (nvidia-smi) on "
                                          "H100 SXM5; the datasheet tensor rates correspond to "
                                          "1830 MHz (") +
                                  kHopperWp + ")");
  g.memory_bytes = f(80 * kGiB, std::string(kH100Datasheet) + ": 80GB HBM3");
  g.memory_bw = f(3.35 * kT, std::string(kH100Datasheet) + ": 3.35TB/s");
  g.l2_bytes = f(50 * kMiB, std::string(kHopperWp) + ": 50 MB L2 in H100 SXM5");
  g.bf16_flops = f(989.4 * kT, halved(kH100Datasheet, "BF16 1,979 TFLOPS"));
  g.fp8_flops = f(1978.9 * kT, halved(kH100Datasheet, "FP8 3,958 TFLOPS"));
  g.fp4_flops = f(0, "no FP4 tensor path on Hopper");
  g.int8_ops = f(1978.9 * kT, halved(kH100Datasheet, "INT8 3,958 TOPS"));
  g.fp32_flops = f(66.9 * kT, std::string(kH100Datasheet) + ": FP32 67 TFLOPS");
  g.nvlink_bw = f(900 * kG, std::string(kH100Datasheet) + ": NVLink 900GB/s");
  g.device_name_patterns = {"h100 80gb hbm3", "h100 sxm", "h100-sxm"};
  return g;
}

GpuSpec h100_pcie() {
  GpuSpec g;
  g.id = "h100-pcie";
  g.name = "NVIDIA H100 PCIe 80GB";
  g.arch = "hopper";
  g.sm_count = f(114, kHopperWp);
  g.boost_clock_mhz = f(1755, std::string(kHopperWp) + " (H100 PCIe boost clock)");
  g.memory_bytes = f(80 * kGiB, std::string(kH100Datasheet) + ": 80GB HBM2e");
  g.memory_bw = f(2.0 * kT, std::string(kH100Datasheet) + ": 2TB/s");
  g.l2_bytes = f(50 * kMiB, std::string(kHopperWp) + ": 50 MB L2");
  g.bf16_flops = f(756.5 * kT, halved(kH100Datasheet, "BF16 1,513 TFLOPS"));
  g.fp8_flops = f(1513 * kT, halved(kH100Datasheet, "FP8 3,026 TFLOPS"));
  g.fp4_flops = f(0, "no FP4 tensor path on Hopper");
  g.int8_ops = f(1513 * kT, halved(kH100Datasheet, "INT8 3,026 TOPS"));
  g.fp32_flops = f(51.2 * kT, std::string(kH100Datasheet) + ": FP32 51 TFLOPS");
  g.nvlink_bw = f(600 * kG, std::string(kH100Datasheet) + ": NVLink bridge 600GB/s");
  g.device_name_patterns = {"h100 pcie", "h100-pcie"};
  return g;
}

GpuSpec h200() {
  GpuSpec g;
  g.id = "h200";
  g.name = "NVIDIA H200 SXM 141GB";
  g.arch = "hopper";
  g.sm_count = f(132, std::string("same GH100 configuration as H100 SXM5 (") + kHopperWp +
                          "); 132 multiprocessors seen on an H200 here");
  g.boost_clock_mhz = f(1980, "max SM clock reported by the driver (nvidia-smi) on H200 SXM");
  g.memory_bytes = f(141 * kGiB, std::string(kH200Page) + ": 141GB HBM3e");
  g.memory_bw = f(4.8 * kT, std::string(kH200Page) + ": 4.8TB/s");
  g.l2_bytes = f(60 * kMiB, "cudaDeviceProp::l2CacheSize read on an H200 here (60 MiB)");
  g.bf16_flops = f(989.4 * kT, halved(kH200Page, "BF16 1,979 TFLOPS"));
  g.fp8_flops = f(1978.9 * kT, halved(kH200Page, "FP8 3,958 TFLOPS"));
  g.fp4_flops = f(0, "no FP4 tensor path on Hopper");
  g.int8_ops = f(1978.9 * kT, halved(kH200Page, "INT8 3,958 TOPS"));
  g.fp32_flops = f(66.9 * kT, std::string(kH200Page) + ": FP32 67 TFLOPS");
  g.nvlink_bw = f(900 * kG, std::string(kH200Page) + ": NVLink 900GB/s");
  g.device_name_patterns = {"h200"};
  return g;
}

GpuSpec b200() {
  GpuSpec g;
  g.id = "b200";
  g.name = "NVIDIA B200 (HGX)";
  g.arch = "blackwell";
  g.sm_count = f(148, kB200Query);
  g.boost_clock_mhz = f(1965, "third-party GPU databases (TechPowerUp); not on NVIDIA's datasheet");
  g.memory_bytes = f(180 * kGiB, std::string(kHgxPage) + ": HGX B200 1,440GB total / 8 GPUs");
  g.memory_bw = f(7.7 * kT, std::string(kHgxPage) + ": HGX B200 62TB/s / 8; " + kB200Query +
                                " derives 7.67 TB/s from a 7680-bit bus at 3996 MHz");
  g.l2_bytes = f(126.5 * kMiB, kB200Query);
  g.bf16_flops =
      f(2250 * kT, std::string(kHgxPage) + ": HGX B200 FP16/BF16 36 PFLOPS sparse, /8, halved");
  g.fp8_flops = f(4500 * kT, std::string(kHgxPage) + ": HGX B200 FP8 72 PFLOPS sparse, /8, halved");
  g.fp4_flops =
      f(9000 * kT, std::string(kHgxPage) + ": HGX B200 FP4 144 PFLOPS sparse, /8, halved");
  g.int8_ops = f(4500 * kT, std::string(kHgxPage) + ": HGX B200 INT8 72 POPS sparse, /8, halved");
  g.fp32_flops = f(75 * kT, std::string(kHgxPage) + ": HGX B200 FP32 600 TFLOPS / 8");
  g.nvlink_bw = f(1800 * kG, std::string(kHgxPage) + ": NVLink 5, 1.8TB/s per GPU");
  g.device_name_patterns = {"b200"};
  return g;
}

GpuSpec b300() {
  GpuSpec g;
  g.id = "b300";
  g.name = "NVIDIA B300 (Blackwell Ultra, HGX)";
  g.arch = "blackwell";
  g.sm_count =
      f(160, std::string(kBlackwellUltraBlog) +
                 ": 160 SMs in the full GPU; shipping parts may enable fewer (unverified)");
  g.boost_clock_mhz = f(1965, "assumed equal to B200 (no published figure found); unverified");
  g.memory_bytes = f(288 * kGiB, std::string(kBlackwellUltraBlog) + ": 288 GB HBM3e");
  g.memory_bw = f(8.0 * kT, std::string(kBlackwellUltraBlog) + ": 8 TB/s");
  g.l2_bytes = f(126.5 * kMiB, "assumed equal to B200 (same die family); unverified");
  g.bf16_flops = f(2250 * kT, kB300Garden);
  g.fp8_flops = f(4500 * kT, kB300Garden);
  g.fp4_flops = f(13125 * kT, std::string(kB300Garden) +
                                  "; NVIDIA's blog quotes 15 PFLOPS dense "
                                  "NVFP4 for the GB300 configuration");
  g.int8_ops = f(4500 * kT, kB300Garden);
  g.fp32_flops = f(75 * kT, kB300Garden);
  g.nvlink_bw = f(1800 * kG, std::string(kBlackwellUltraBlog) + ": NVLink 5, 1.8 TB/s");
  g.device_name_patterns = {"b300"};
  return g;
}

GpuSpec a100_sxm_80gb() {
  GpuSpec g;
  g.id = "a100-sxm-80gb";
  g.name = "NVIDIA A100 SXM4 80GB";
  g.arch = "ampere";
  g.sm_count = f(108, kAmpereWp);
  g.boost_clock_mhz = f(1410, kAmpereWp);
  g.memory_bytes = f(80 * kGiB, std::string(kA100Datasheet) + ": 80GB HBM2e");
  g.memory_bw = f(2039 * kG, std::string(kA100Datasheet) + ": 2,039GB/s");
  g.l2_bytes = f(40 * kMiB, std::string(kAmpereWp) + ": 40 MB L2");
  g.bf16_flops = f(312 * kT, std::string(kA100Datasheet) + ": BF16 312 TFLOPS (dense)");
  g.fp8_flops = f(0, "no FP8 tensor path on Ampere");
  g.fp4_flops = f(0, "no FP4 tensor path on Ampere");
  g.int8_ops = f(624 * kT, std::string(kA100Datasheet) + ": INT8 624 TOPS (dense)");
  g.fp32_flops = f(19.5 * kT, std::string(kA100Datasheet) + ": FP32 19.5 TFLOPS");
  g.nvlink_bw = f(600 * kG, std::string(kA100Datasheet) + ": NVLink 600GB/s");
  g.device_name_patterns = {"a100-sxm4-80gb", "a100 80gb", "a100-sxm-80gb"};
  return g;
}

GpuSpec l40s() {
  GpuSpec g;
  g.id = "l40s";
  g.name = "NVIDIA L40S";
  g.arch = "ada";
  g.sm_count = f(142, std::string(kAdaWp) + " (AD102 with 142 SMs enabled)");
  g.boost_clock_mhz = f(2520, kL40sDatasheet);
  g.memory_bytes = f(48 * kGiB, std::string(kL40sDatasheet) + ": 48GB GDDR6");
  g.memory_bw = f(864 * kG, std::string(kL40sDatasheet) + ": 864GB/s");
  g.l2_bytes = f(96 * kMiB, "third-party GPU databases (TechPowerUp): 96 MB L2");
  g.bf16_flops = f(362.05 * kT, std::string(kL40sDatasheet) + ": BF16 362.05 TFLOPS (dense)");
  g.fp8_flops = f(733 * kT, halved(kL40sDatasheet, "FP8 1,466 TFLOPS"));
  g.fp4_flops = f(0, "no FP4 tensor path on Ada");
  g.int8_ops = f(733 * kT, halved(kL40sDatasheet, "INT8 1,466 TOPS"));
  g.fp32_flops = f(91.6 * kT, std::string(kL40sDatasheet) + ": FP32 91.6 TFLOPS");
  g.nvlink_bw = f(0, std::string(kL40sDatasheet) + ": no NVLink");
  g.device_name_patterns = {"l40s"};
  return g;
}

GpuSpec l4() {
  GpuSpec g;
  g.id = "l4";
  g.name = "NVIDIA L4";
  g.arch = "ada";
  g.sm_count = f(58, std::string(kAdaWp) + " (AD104 with 58 SMs enabled)");
  g.boost_clock_mhz = f(2040, "third-party GPU databases (TechPowerUp)");
  g.memory_bytes = f(24 * kGiB, std::string(kL4Datasheet) + ": 24GB GDDR6");
  g.memory_bw = f(300 * kG, std::string(kL4Datasheet) + ": 300GB/s");
  g.l2_bytes = f(48 * kMiB, "third-party GPU databases (TechPowerUp): 48 MB L2");
  g.bf16_flops = f(121 * kT, halved(kL4Datasheet, "BF16 242 TFLOPS"));
  g.fp8_flops = f(242.5 * kT, halved(kL4Datasheet, "FP8 485 TFLOPS"));
  g.fp4_flops = f(0, "no FP4 tensor path on Ada");
  g.int8_ops = f(242.5 * kT, halved(kL4Datasheet, "INT8 485 TOPS"));
  g.fp32_flops = f(30.3 * kT, std::string(kL4Datasheet) + ": FP32 30.3 TFLOPS");
  g.nvlink_bw = f(0, std::string(kL4Datasheet) + ": no NVLink");
  g.device_name_patterns = {"=nvidia l4"};  // exact: "NVIDIA L40" is another GPU
  return g;
}

GpuSpec rtx4090() {
  GpuSpec g;
  g.id = "rtx4090";
  g.name = "NVIDIA GeForce RTX 4090";
  g.arch = "ada";
  g.sm_count = f(128, kAdaWp);
  g.boost_clock_mhz = f(2520, kAdaWp);
  g.memory_bytes = f(24 * kGiB, std::string(kAdaWp) + ": 24 GB GDDR6X");
  g.memory_bw = f(1008 * kG, std::string(kAdaWp) + ": 1008 GB/s");
  g.l2_bytes = f(72 * kMiB, std::string(kAdaWp) + ": 72 MB L2");
  g.bf16_flops = f(165.2 * kT, std::string(kAdaWp) +
                                   ": BF16 with FP32 accumulate 165.2 TFLOPS "
                                   "(GeForce runs FP32 accumulation at half rate)");
  g.fp8_flops = f(330.3 * kT, std::string(kAdaWp) + ": FP8 with FP32 accumulate 330.3 TFLOPS");
  g.fp4_flops = f(0, "no FP4 tensor path on Ada");
  g.int8_ops = f(660.6 * kT, std::string(kAdaWp) + ": INT8 660.6 TOPS (dense)");
  g.fp32_flops = f(82.6 * kT, std::string(kAdaWp) + ": FP32 82.6 TFLOPS");
  g.nvlink_bw = f(0, std::string(kAdaWp) + ": no NVLink on AD102 GeForce");
  g.device_name_patterns = {"rtx 4090"};
  return g;
}

}  // namespace

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> table = {h100_sxm(),      h100_pcie(), h200(), b200(),   b300(),
                                             a100_sxm_80gb(), l40s(),      l4(),   rtx4090()};
  return table;
}

}  // namespace ceiling::hw
