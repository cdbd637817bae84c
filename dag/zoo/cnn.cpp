// AlexNet, VGG (without batch norm) and the ResNet family (ResNet, ResNeXt, Wide ResNet) on 3x224x224 ImageNet
// images, 1000 classes, as defined by torchvision (torchvision/models/alexnet.py, vgg.py, resnet.py; ResNet v1.5:
// the stride sits on the bottleneck's 3x3 conv). Layer and tensor names are torchvision's module paths.
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"

#include <array>
#include <string>

namespace ddlsim::dag::detail {

namespace {

constexpr std::int64_t kImageNetImageSize = 224;
constexpr std::int64_t kImageNetClasses = 1000;
constexpr double kImageNetImageBytes = 3.0 * kImageNetImageSize * kImageNetImageSize * kFloatBytes;

std::string idx(const std::string& prefix, int i) {
  return prefix + "." + std::to_string(i);
}

/// torchvision classifier head shared by AlexNet and VGG on the flattened `x`: Linear-ReLU-Dropout-Linear-ReLU-
/// Dropout-Linear (VGG) or Dropout-Linear-ReLU-Dropout-Linear-ReLU-Linear (AlexNet, `alexnet_order`).
void classifier(ModelBuilder& b, Chw x, bool alexnet_order) {
  constexpr std::int64_t hidden = 4096;
  Src y = kNoLayer;
  if (alexnet_order) {
    b.dropout(x.numel()); // classifier.0, folded into avgpool
    y = b.linear("classifier.1", x.src, 1, x.numel(), hidden);
    b.relu(hidden);
    b.dropout(hidden); // classifier.3
    y = b.linear("classifier.4", y, 1, hidden, hidden);
    b.relu(hidden);
  } else {
    y = b.linear("classifier.0", x.src, 1, x.numel(), hidden);
    b.relu(hidden);
    b.dropout(hidden); // classifier.2
    y = b.linear("classifier.3", y, 1, hidden, hidden);
    b.relu(hidden);
    b.dropout(hidden); // classifier.5
  }
  b.linear("classifier.6", y, 1, hidden, kImageNetClasses);
  b.cross_entropy(kImageNetClasses);
}

ConvSpec biased(ConvSpec spec) {
  spec.bias = true;
  return spec;
}

} // namespace

Model build_alexnet() {
  ModelBuilder b("alexnet", kImageNetImageBytes);
  Chw x{3, kImageNetImageSize, kImageNetImageSize};
  x = b.conv2d("features.0", x, 64, biased(ConvSpec::square(11, 4, 2)));
  b.relu(x.numel());
  x = b.max_pool2d("features.2", x, {3, 2});
  x = b.conv2d("features.3", x, 192, biased(ConvSpec::square(5, 1, 2)));
  b.relu(x.numel());
  x = b.max_pool2d("features.5", x, {3, 2});
  x = b.conv2d("features.6", x, 384, biased(ConvSpec::square(3, 1, 1)));
  b.relu(x.numel());
  x = b.conv2d("features.8", x, 256, biased(ConvSpec::square(3, 1, 1)));
  b.relu(x.numel());
  x = b.conv2d("features.10", x, 256, biased(ConvSpec::square(3, 1, 1)));
  b.relu(x.numel());
  x = b.max_pool2d("features.12", x, {3, 2});
  x = b.adaptive_avg_pool2d("avgpool", x, 6, 6);
  classifier(b, x, true);
  return std::move(b).finish();
}

std::optional<Model> build_vgg(std::string_view name) {
  // torchvision vgg.py cfgs "A", "B", "D", "E"; 0 is "M" (2x2 max pool).
  static constexpr std::array<int, 13> kA{64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
  static constexpr std::array<int, 15> kB{64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
  static constexpr std::array<int, 18> kD{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  static constexpr std::array<int, 21> kE{64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                          512, 512, 512, 512, 0,   512, 512, 512, 512, 0};
  std::span<const int> cfg;
  if (name == "vgg11") {
    cfg = kA;
  } else if (name == "vgg13") {
    cfg = kB;
  } else if (name == "vgg16") {
    cfg = kD;
  } else if (name == "vgg19") {
    cfg = kE;
  } else {
    return std::nullopt;
  }
  ModelBuilder b(std::string(name), kImageNetImageBytes);
  Chw x{3, kImageNetImageSize, kImageNetImageSize};
  int module = 0; // index in the `features` Sequential: conv, relu, ..., pool
  for (const int v : cfg) {
    if (v == 0) {
      x = b.max_pool2d(idx("features", module), x, {2, 2});
      module += 1;
    } else {
      x = b.conv2d(idx("features", module), x, v, biased(ConvSpec::square(3, 1, 1)));
      b.relu(x.numel());
      module += 2;
    }
  }
  x = b.adaptive_avg_pool2d("avgpool", x, 7, 7);
  classifier(b, x, false);
  return std::move(b).finish();
}

namespace {

struct ResNetConfig {
  bool bottleneck = true;
  std::array<int, 4> blocks{};
  std::int64_t groups = 1;
  std::int64_t width_per_group = 64;
};

std::optional<ResNetConfig> resnet_config(std::string_view name) {
  if (name == "resnet18")
    return ResNetConfig{false, {2, 2, 2, 2}};
  if (name == "resnet34")
    return ResNetConfig{false, {3, 4, 6, 3}};
  if (name == "resnet50")
    return ResNetConfig{true, {3, 4, 6, 3}};
  if (name == "resnet101")
    return ResNetConfig{true, {3, 4, 23, 3}};
  if (name == "resnet152")
    return ResNetConfig{true, {3, 8, 36, 3}};
  if (name == "resnext50_32x4d")
    return ResNetConfig{true, {3, 4, 6, 3}, 32, 4};
  if (name == "resnext101_32x8d")
    return ResNetConfig{true, {3, 4, 23, 3}, 32, 8};
  if (name == "wide_resnet50_2")
    return ResNetConfig{true, {3, 4, 6, 3}, 1, 128};
  if (name == "wide_resnet101_2")
    return ResNetConfig{true, {3, 4, 23, 3}, 1, 128};
  return std::nullopt;
}

} // namespace

std::optional<Model> build_resnet(std::string_view name) {
  const std::optional<ResNetConfig> cfg = resnet_config(name);
  if (!cfg) {
    return std::nullopt;
  }
  const std::int64_t expansion = cfg->bottleneck ? 4 : 1;
  ModelBuilder b(std::string(name), kImageNetImageBytes);
  Chw x = b.conv2d("conv1", {3, kImageNetImageSize, kImageNetImageSize}, 64, ConvSpec::square(7, 2, 3));
  x = b.batchnorm2d("bn1", x);
  b.relu(x.numel());
  x = b.max_pool2d("maxpool", x, {3, 2, 1});
  // layer1..4: one resolution level each; each after the first halves the resolution (stride 2) and doubles the planes
  for (int level = 0; level < 4; ++level) {
    const std::int64_t planes = std::int64_t{64} << level;
    for (int block = 0; block < cfg->blocks[static_cast<std::size_t>(level)]; ++block) {
      const std::string p = "layer" + std::to_string(level + 1) + "." + std::to_string(block);
      const std::int64_t stride = (level > 0 && block == 0) ? 2 : 1;
      Chw y;
      if (cfg->bottleneck) { // Bottleneck: conv1 1x1, conv2 3x3 (stride, groups), conv3 1x1 (x4)
        const std::int64_t width = planes * cfg->width_per_group / 64 * cfg->groups;
        y = b.conv2d(p + ".conv1", x, width, ConvSpec::square(1));
        y = b.batchnorm2d(p + ".bn1", y);
        b.relu(y.numel());
        ConvSpec conv2 = ConvSpec::square(3, stride, 1);
        conv2.groups = cfg->groups;
        y = b.conv2d(p + ".conv2", y, width, conv2);
        y = b.batchnorm2d(p + ".bn2", y);
        b.relu(y.numel());
        y = b.conv2d(p + ".conv3", y, planes * expansion, ConvSpec::square(1));
        y = b.batchnorm2d(p + ".bn3", y);
      } else { // BasicBlock: two 3x3 convs
        y = b.conv2d(p + ".conv1", x, planes, ConvSpec::square(3, stride, 1));
        y = b.batchnorm2d(p + ".bn1", y);
        b.relu(y.numel());
        y = b.conv2d(p + ".conv2", y, planes, ConvSpec::square(3, 1, 1));
        y = b.batchnorm2d(p + ".bn2", y);
      }
      // `out += identity; out = relu(out)` fold into the block's last layer (bn3/bn2, or downsample.1 when the
      // identity is projected, which torchvision computes after the main path).
      if (stride != 1 || x.c != planes * expansion) {
        Chw d = b.conv2d(p + ".downsample.0", x, planes * expansion, ConvSpec::square(1, stride));
        d = b.batchnorm2d(p + ".downsample.1", d);
        b.residual_add(d.numel(), y.src);
        y = d;
      } else {
        b.residual_add(y.numel(), x.src);
      }
      b.relu(y.numel());
      x = y;
    }
  }
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  b.linear("fc", x.src, 1, x.numel(), kImageNetClasses);
  b.cross_entropy(kImageNetClasses);
  return std::move(b).finish();
}

} // namespace ddlsim::dag::detail
