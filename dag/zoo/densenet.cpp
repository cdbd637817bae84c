// DenseNet-121/161/169/201 on 3x224x224 images, 1000 classes, as torchvision builds them
// (torchvision/models/densenet.py, memory_efficient=False, drop_rate=0). Each dense layer concatenates all
// earlier feature maps of its block (`denselayerN.cat`, a copy) before BN-ReLU-Conv1x1-BN-ReLU-Conv3x3; each
// block ends with the concatenation of all of them (`denseblockN.cat`).
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

namespace ddlsim::dag::detail {

namespace {

struct DenseNetConfig {
  std::int64_t growth_rate = 32;
  std::array<int, 4> block_config{};
  std::int64_t num_init_features = 64;
};

std::optional<DenseNetConfig> densenet_config(std::string_view name) {
  if (name == "densenet121")
    return DenseNetConfig{32, {6, 12, 24, 16}, 64};
  if (name == "densenet161")
    return DenseNetConfig{48, {6, 12, 36, 24}, 96};
  if (name == "densenet169")
    return DenseNetConfig{32, {6, 12, 32, 32}, 64};
  if (name == "densenet201")
    return DenseNetConfig{32, {6, 12, 48, 32}, 64};
  return std::nullopt;
}

} // namespace

std::optional<Model> build_densenet(std::string_view name) {
  const std::optional<DenseNetConfig> cfg = densenet_config(name);
  if (!cfg) {
    return std::nullopt;
  }
  constexpr std::int64_t size = 224;
  constexpr std::int64_t bn_size = 4;
  ModelBuilder b(std::string(name), 3.0 * size * size * kFloatBytes);
  Chw x = b.conv2d("features.conv0", {3, size, size}, cfg->num_init_features, ConvSpec::square(7, 2, 3));
  x = b.batchnorm2d("features.norm0", x);
  b.relu(x.numel());
  x = b.max_pool2d("features.pool0", x, {3, 2, 1});
  for (std::size_t block = 0; block < cfg->block_config.size(); ++block) {
    const std::string bp = fmt::format("features.denseblock{}", block + 1);
    std::vector<Chw> features{x};
    for (int layer = 0; layer < cfg->block_config[block]; ++layer) {
      const std::string p = fmt::format("{}.denselayer{}", bp, layer + 1);
      Chw y = b.concat(p + ".cat", features); // bn_function: torch.cat(inputs, 1)
      y = b.batchnorm2d(p + ".norm1", y);
      b.relu(y.numel());
      y = b.conv2d(p + ".conv1", y, bn_size * cfg->growth_rate, ConvSpec::square(1));
      y = b.batchnorm2d(p + ".norm2", y);
      b.relu(y.numel());
      y = b.conv2d(p + ".conv2", y, cfg->growth_rate, ConvSpec::square(3, 1, 1));
      features.push_back(y);
    }
    x = b.concat(bp + ".cat", features);
    if (block + 1 == cfg->block_config.size()) {
      break;
    }
    // fmt, not "..." + std::to_string: GCC 12 at -O3 warns (-Warray-bounds) on the inlined concatenation.
    const std::string tp = fmt::format("features.transition{}", block + 1);
    x = b.batchnorm2d(tp + ".norm", x);
    b.relu(x.numel());
    x = b.conv2d(tp + ".conv", x, x.c / 2, ConvSpec::square(1));
    x = b.avg_pool2d(tp + ".pool", x, {2, 2});
  }
  x = b.batchnorm2d("features.norm5", x);
  b.relu(x.numel()); // F.relu(features, inplace=True)
  x = b.adaptive_avg_pool2d("adaptive_avg_pool2d", x, 1, 1);
  b.linear("classifier", x.src, 1, x.numel(), 1000);
  b.cross_entropy(1000);
  return std::move(b).finish();
}

} // namespace ddlsim::dag::detail
