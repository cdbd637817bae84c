// CIFAR-10 models on 3x32x32 images, 10 classes: the ResNet-(6n+2) of He et al., "Deep Residual Learning for
// Image Recognition" (CVPR 2016), Section 4.2, as in akamaster/pytorch_resnet_cifar10 (resnet.py: option-A
// zero-padding shortcuts, BN after every conv), and VGG-16 with batch norm as in kuangliu/pytorch-cifar (vgg.py).
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"

#include <array>
#include <string>

namespace ddlsim::dag::detail {

namespace {

constexpr std::int64_t kCifarImageSize = 32;
constexpr std::int64_t kCifarClasses = 10;
constexpr double kCifarImageBytes = 3.0 * kCifarImageSize * kCifarImageSize * kFloatBytes;

} // namespace

std::optional<Model> build_resnet_cifar(std::string_view name) {
  int n = 0; // basic blocks per resolution level (layer1..3): depth 6n + 2
  if (name == "resnet20-cifar") {
    n = 3;
  } else if (name == "resnet56-cifar") {
    n = 9;
  } else if (name == "resnet110-cifar") {
    n = 18;
  } else {
    return std::nullopt;
  }
  ModelBuilder b(std::string(name), kCifarImageBytes);
  Chw x = b.conv2d("conv1", {3, kCifarImageSize, kCifarImageSize}, 16, ConvSpec::square(3, 1, 1));
  x = b.batchnorm2d("bn1", x);
  b.relu(x.numel());
  for (int level = 0; level < 3; ++level) {
    const std::int64_t planes = std::int64_t{16} << level;
    for (int block = 0; block < n; ++block) {
      const std::string p = "layer" + std::to_string(level + 1) + "." + std::to_string(block);
      const std::int64_t stride = (level > 0 && block == 0) ? 2 : 1;
      Chw y = b.conv2d(p + ".conv1", x, planes, ConvSpec::square(3, stride, 1));
      y = b.batchnorm2d(p + ".bn1", y);
      b.relu(y.numel());
      y = b.conv2d(p + ".conv2", y, planes, ConvSpec::square(3, 1, 1));
      y = b.batchnorm2d(p + ".bn2", y);
      // Option A: the shortcut is x[:, :, ::2, ::2] zero-padded to `planes` channels (a LambdaLayer, no
      // parameters, no FLOPs); `out += shortcut(x); out = relu(out)` fold into bn2.
      b.residual_add(y.numel(), x.src);
      b.relu(y.numel());
      x = y;
    }
  }
  x = b.avg_pool2d("avg_pool2d", x, {x.h, x.h}); // F.avg_pool2d(out, out.size()[3])
  b.linear("linear", x.src, 1, x.numel(), kCifarClasses);
  b.cross_entropy(kCifarClasses);
  return std::move(b).finish();
}

Model build_vgg16_cifar() {
  // kuangliu cfg['VGG16'] (configuration D); 0 is "M" (2x2 max pool).
  static constexpr std::array<int, 18> kD{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  ModelBuilder b("vgg16-cifar", kCifarImageBytes);
  Chw x{3, kCifarImageSize, kCifarImageSize};
  int module = 0; // index in the `features` Sequential: conv, bn, relu, ..., pool
  for (const int v : kD) {
    if (v == 0) {
      x = b.max_pool2d("features." + std::to_string(module), x, {2, 2});
      module += 1;
    } else {
      ConvSpec conv = ConvSpec::square(3, 1, 1);
      conv.bias = true;
      x = b.conv2d("features." + std::to_string(module), x, v, conv);
      x = b.batchnorm2d("features." + std::to_string(module + 1), x);
      b.relu(x.numel());
      module += 3;
    }
  }
  x = b.avg_pool2d("features." + std::to_string(module), x, {1, 1}); // AvgPool2d(kernel_size=1, stride=1)
  b.linear("classifier", x.src, 1, x.numel(), kCifarClasses);
  b.cross_entropy(kCifarClasses);
  return std::move(b).finish();
}

} // namespace ddlsim::dag::detail
