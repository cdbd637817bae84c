// Kernel shapes read back from the zoo's layers (dag/kernel_shapes.hpp): ResNet-50's convolutions and classifier
// against torchvision's definition, BERT-base's GEMMs and attention against its configuration, and every zoo model's
// convolutions and GEMMs against the FLOPs the builder counted.
#include "dag/kernel_shapes.hpp"
#include "dag/zoo/builder.hpp"
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>

using namespace ddlsim::dag;

namespace {

const LayerKernel& kernel_of(const Model& m, const std::vector<LayerKernel>& ks, const std::string& name) {
  for (const auto& k : ks)
    if (m.layers[static_cast<std::size_t>(k.layer)].name == name)
      return k;
  FAIL("no kernel for layer " << name);
  return ks.front();
}

} // namespace

TEST_CASE("dag::layer_kernels: ResNet-50 as torchvision defines it", "[dag][kernels]") {
  const Model m = *build_zoo_model("resnet50");
  const auto ks = layer_kernels(m, 32);
  // conv1: 3 -> 64, 7x7, stride 2, padding 3 on 224x224.
  const auto& conv1 = kernel_of(m, ks, "conv1");
  CHECK(conv1.kind == LayerKernel::Kind::convolution);
  CHECK((conv1.n == 32 && conv1.c == 3 && conv1.h == 224 && conv1.w == 224 && conv1.k == 64));
  CHECK((conv1.r == 7 && conv1.s == 7 && conv1.stride_h == 2 && conv1.pad_h == 3 && conv1.groups == 1));
  // layer2.0.conv2: the 3x3 of the first bottleneck of stage 2, 128 -> 128, stride 2 (torchvision's v1.5) on 56x56.
  const auto& down = kernel_of(m, ks, "layer2.0.conv2");
  CHECK((down.c == 128 && down.h == 56 && down.k == 128 && down.r == 3 && down.stride_h == 2 && down.pad_h == 1));
  // layer3.0.downsample.0: 1x1, 512 -> 1024, stride 2 on 28x28.
  const auto& shortcut = kernel_of(m, ks, "layer3.0.downsample.0");
  CHECK((shortcut.c == 512 && shortcut.h == 28 && shortcut.k == 1024 && shortcut.r == 1 && shortcut.stride_h == 2 &&
         shortcut.pad_h == 0));
  // fc: 2048 -> 1000 over the batch.
  const auto& fc = kernel_of(m, ks, "fc");
  CHECK(fc.kind == LayerKernel::Kind::gemm);
  CHECK((fc.gemm_m == 32 && fc.gemm_n == 1000 && fc.gemm_k == 2048));
  std::map<LayerKernel::Kind, int> kinds;
  for (const auto& k : ks) {
    ++kinds[k.kind];
    CHECK(k.why.empty());
  }
  CHECK(kinds[LayerKernel::Kind::convolution] == 53);
  CHECK(kinds[LayerKernel::Kind::gemm] == 1);
}

TEST_CASE("dag::layer_kernels: BERT-base's GEMMs and attention", "[dag][kernels]") {
  const Model m = *build_zoo_model("bert-base");
  REQUIRE(m.transformer.has_value());
  const int s = m.transformer->sequence, h = m.transformer->hidden;
  const auto ks = layer_kernels(m, 8);
  int gemms = 0, batched = 0;
  for (const auto& k : ks) {
    // the masked-LM head is a group (transform, LayerNorm, decoder tied to the embedding): its memory traffic
    CHECK((k.why.empty() || m.layers[static_cast<std::size_t>(k.layer)].name == "cls.predictions"));
    if (k.kind == LayerKernel::Kind::gemm) {
      ++gemms;
      CHECK(k.gemm_m % 8 == 0);
    }
    if (k.kind == LayerKernel::Kind::batched_gemm) {
      ++batched;
      CHECK(k.count == 8 * 12);
      CHECK(k.gemm_m == s);
      CHECK(((k.gemm_n == s && k.gemm_k == h / 12) || (k.gemm_n == h / 12 && k.gemm_k == s)));
    }
  }
  CHECK(batched == 2 * 12); // scores and context in each of 12 layers
  // Per layer Q, K, V (or one fused QKV), the output projection and the two MLP GEMMs: their FLOPs add up to
  // 24 s h^2 per sample per layer (Megatron's count without attention): checked below over every GEMM.
  double gemm_flops = 0;
  for (const auto& k : ks)
    if (k.kind == LayerKernel::Kind::gemm && m.layers[static_cast<std::size_t>(k.layer)].block >= 0)
      gemm_flops += 2.0 * static_cast<double>(k.gemm_m) * static_cast<double>(k.gemm_n) * static_cast<double>(k.gemm_k);
  CHECK_THAT(gemm_flops, Catch::Matchers::WithinRel(8.0 * 12 * 24 * s * double(h) * h, 1e-9));
  CHECK(gemms >= 12 * 4);
}

TEST_CASE("dag::layer_kernels: every zoo model's convolutions and GEMMs carry the FLOPs it counted", "[dag][kernels]") {
  for (const auto& name : zoo_model_names()) {
    CAPTURE(name);
    const Model m = *build_zoo_model(name);
    for (const auto& k : layer_kernels(m, 2)) {
      const auto& layer = m.layers[static_cast<std::size_t>(k.layer)];
      CAPTURE(layer.name, k.why);
      if (layer.kind == "conv")
        REQUIRE(k.kind == LayerKernel::Kind::convolution);
      if (layer.kind == "linear")
        REQUIRE((k.kind == LayerKernel::Kind::gemm || !k.why.empty()));
      double macs = 0;
      if (k.kind == LayerKernel::Kind::convolution) {
        const auto out_h = (k.h + 2 * k.pad_h - k.r) / k.stride_h + 1,
                   out_w = (k.w + 2 * k.pad_w - k.s) / k.stride_w + 1;
        macs = double(k.n) * double(k.k) * double(out_h) * double(out_w) * double(k.c / k.groups) * double(k.r * k.s);
      } else if (k.kind == LayerKernel::Kind::gemm) {
        macs = double(k.gemm_m) * double(k.gemm_n) * double(k.gemm_k);
      } else {
        continue;
      }
      // the builder's forward FLOPs: 2 per MAC, plus per output element a bias and the element-wise operations the
      // builder folds into the layer (dag/zoo/builder.hpp's constants; at most one of each)
      using namespace ddlsim::dag::detail;
      const double folded = 1 + kGeluFlops + kDropoutFlops + kAddFlops + kTanhFlops + kSoftmaxFlops + kReluFlops +
                            kSwigluFlops + kRotaryFlops;
      const double outputs = layer.activation_bytes / 4;
      const double per_sample = 2 * macs / 2; // 2 FLOPs per MAC, over the batch of 2
      CHECK(per_sample <= layer.fwd_flops * (1 + 1e-12));
      CHECK(layer.fwd_flops - per_sample <= folded * outputs);
    }
  }
}
